"""A Wasserstein GAN learning to draw MNIST digits (Burn's wgan example): weight clipping,
RMSprop, several critic steps per generator step, and every few epochs an 8x8 grid of
generated digits written as a PNG.

``--backend autodiff+cuda`` (any autodiff backend) trains elsewhere; the default is
``autodiff+ndarray``."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import burnish as bn
from burnish import Tensor, optim
from burnish.data import MnistDataset
from burnish.nn import Module

sys.path.insert(0, str(Path(__file__).parent))
from model import CriticConfig, GeneratorConfig  # noqa: E402

GRID = 8  # the sample grid is GRID x GRID digits
PAD = 2  # pixels between digits in the grid


def read_digits(data: Path | None, limit: int | None) -> np.ndarray:
    """MNIST digits as float32 ``[n, 784]`` in [-1, 1]: the training set of ``data`` when it
    holds one, else its test set; without a folder, the test set shipped with burnish-train."""
    if data is None:
        digits = MnistDataset("test", embedded=True)
        source = "the MNIST test set shipped with burnish-train"
    elif any(data.glob("train-images-idx3-ubyte*")):
        digits, source = MnistDataset("train", root=data), f"MNIST's training set in {data}"
    else:
        digits, source = MnistDataset("test", root=data), f"MNIST's test set in {data}"
    images = digits.images[:limit] if limit else digits.images
    print(f"training on {len(images):,} digits of {source}", flush=True)
    return (images.reshape(len(images), -1).astype(np.float32) / 127.5 - 1.0)


def clip_weights(critic: Module, limit: float) -> Module:
    """Every trained weight of the critic clamped to [-limit, limit]: the original WGAN's way of
    keeping the critic (roughly) 1-Lipschitz."""
    return critic.map(lambda _, p: p.map(lambda t: t.clamp(-limit, limit))
                      if p.require_grad else p)


def noise(batch: int, latent_dim: int, device) -> Tensor:
    return Tensor.random([batch, latent_dim], bn.Distribution.normal(), device)


def save_grid(images: np.ndarray, path: Path) -> Path:
    """``GRID * GRID`` images ``[n, 784]`` in [-1, 1], white on black with a grey frame, as one
    greyscale PNG (``GRID * 28 + (GRID + 1) * PAD`` pixels a side)."""
    from matplotlib import image  # an optional dependency: only what writes the PNG needs it

    side = GRID * 28 + (GRID + 1) * PAD
    canvas = np.full((side, side), 0.5, dtype=np.float32)
    digits = (images[:GRID * GRID].reshape(-1, 28, 28) + 1.0) / 2.0
    for index, digit in enumerate(digits):
        row, column = divmod(index, GRID)
        top, left = PAD + row * (28 + PAD), PAD + column * (28 + PAD)
        canvas[top:top + 28, left:left + 28] = digit
    path.parent.mkdir(parents=True, exist_ok=True)
    image.imsave(path, np.clip(canvas, 0.0, 1.0), cmap="gray", vmin=0.0, vmax=1.0)
    return path


@contextmanager
def progress(total: int, description: str) -> Iterator[Callable[[str], None]]:
    """``advance(status)`` per step: rich's bar when rich is installed and the output is a
    terminal, else a plain line every tenth of the way."""
    try:
        from rich.progress import MofNCompleteColumn, Progress, TimeRemainingColumn
    except ImportError:
        Progress = None
    if Progress is not None and sys.stdout.isatty():
        with Progress(*Progress.get_default_columns()[:-1], MofNCompleteColumn(),
                      TimeRemainingColumn(), "{task.fields[status]}") as bar:
            task = bar.add_task(description, total=total, status="")
            yield lambda status: bar.update(task, advance=1, status=status)
        return
    done = 0

    def advance(status: str) -> None:
        nonlocal done
        done += 1
        if done == total or done % max(total // 10, 1) == 0:
            print(f"  {description}: {done}/{total} batches  {status}", flush=True)

    yield advance


def train(args: argparse.Namespace) -> None:
    real_images = read_digits(args.data, args.limit)
    bn.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    device = bn.backend(args.backend).default_device()
    generator = GeneratorConfig(latent_dim=args.latent_dim).init(device)
    critic = CriticConfig().init(device)
    print(f"generator: {generator.num_params():,} parameters; critic: "
          f"{critic.num_params():,}; on {device}", flush=True)
    generator_optim = optim.RmsProp()
    critic_optim = optim.RmsProp()
    # The same noise for every grid, so that successive grids show the same samples improving.
    fixed_noise = noise(GRID * GRID, args.latent_dim, device)
    batches = len(real_images) // args.batch_size
    if batches == 0:
        raise SystemExit(f"wgan.py: --batch-size {args.batch_size} is more than the "
                         f"{len(real_images)} digits to train on")
    started = time.perf_counter()
    step = 0
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(real_images))
        critic_losses, generator_losses = [], []
        status = ""
        with progress(batches, f"epoch {epoch}/{args.epochs}") as advance:
            for batch in range(batches):
                indices = order[batch * args.batch_size:(batch + 1) * args.batch_size]
                real = Tensor.from_numpy(real_images[indices], device)
                # The critic: widen the gap between its scores of real and generated digits
                # (an estimate of the Wasserstein distance), then clip its weights.
                fake = generator(noise(args.batch_size, args.latent_dim, device)).detach()
                critic_loss = critic(fake).mean() - critic(real).mean()
                critic = critic_optim.step(args.lr, critic, critic_loss.backward())
                critic = clip_weights(critic, args.clip)
                critic_losses.append(critic_loss.detach())
                step += 1
                # The generator, every n_critic steps: raise the critic's score of its digits.
                if step % args.n_critic == 0:
                    fake = generator(noise(args.batch_size, args.latent_dim, device))
                    generator_loss = -critic(fake).mean()
                    generator = generator_optim.step(args.lr, generator,
                                                     generator_loss.backward())
                    generator_losses.append(generator_loss.detach())
                if batch % 20 == 0:  # reading a value waits for the device: not every step
                    status = f"critic loss {critic_losses[-1].item():+.4f}"
                advance(status)
        # The critic's loss is minus its estimate of the Wasserstein distance, up to a scale the
        # clipping sets, and noisy: a sign of trouble when it explodes, not a quality score.
        distance = -float(np.mean([t.item() for t in critic_losses]))
        generator_text = (f"generator loss {np.mean([t.item() for t in generator_losses]):+.4f}"
                          if generator_losses else "no generator step yet")
        print(f"epoch {epoch}: Wasserstein estimate {distance:.4f}, {generator_text}, "
              f"{time.perf_counter() - started:.0f}s", flush=True)
        if epoch % args.grid_every == 0 or epoch == args.epochs:
            samples = generator.valid()(fixed_noise.inner()).to_numpy()
            path = save_grid(samples, args.out / f"epoch-{epoch:03d}.png")
            print(f"wrote {path}", flush=True)
    generator.valid().save(args.out / "generator.safetensors")
    print(f"generator saved to {args.out / 'generator.safetensors'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST IDX files (default: $BURNISH_MNIST_DIR, else "
                             "the test set shipped with burnish-train)")
    parser.add_argument("--out", type=Path, default=Path("runs/wgan"),
                        help="where the sample grids and the generator go")
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="an autodiff backend to train on (e.g. autodiff+cuda)")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-4, help="RMSprop's learning rate")
    parser.add_argument("--n-critic", type=int, default=5,
                        help="critic steps per generator step")
    parser.add_argument("--clip", type=float, default=0.01,
                        help="the critic's weights are clamped to [-clip, clip]")
    parser.add_argument("--latent-dim", type=int, default=100)
    parser.add_argument("--grid-every", type=int, default=2,
                        help="write a grid of generated digits every this many epochs (and "
                             "after the last)")
    parser.add_argument("--limit", type=int, default=None,
                        help="train on this many digits only (a quick smoke run)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not args.backend.startswith("autodiff+"):
        parser.error(f"--backend must be an autodiff backend to train, e.g. autodiff+"
                     f"{args.backend}; got {args.backend!r}")
    for name in ("epochs", "batch_size", "n_critic", "grid_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    train(args)


if __name__ == "__main__":
    main()
