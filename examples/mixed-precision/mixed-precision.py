"""Train the MNIST example's CNN in mixed precision: its products (convolutions, linear layers)
in bfloat16 or float16 under ``burnish.autocast``, its loss and parameters in float32, and for
float16 the loss scaled by a ``GradScaler``.

A plain loop (no Learner): forward and loss under autocast, ``backward()``, the optimizer's step
(through the scaler for float16), validation under autocast too. ``--dtype float32`` runs the
same loop without autocast, to compare."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import burnish as bn
from burnish import nn, optim
from burnish.data import DataLoader, MnistBatcher, MnistDataset, PartialDataset

# The model of examples/mnist, imported from its folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mnist"))
from model import Cnn, CnnConfig  # noqa: E402


def datasets(data: Path | None) -> tuple:
    """Train and validation sets: MNIST's own when the folder holds its training files, else
    the first 8,000 and the last 2,000 digits of its test set (from the folder, or without one
    from the copy shipped in burnish-train). Nothing is downloaded."""
    if data is not None and any(data.glob("train-images-idx3-ubyte*")):
        return MnistDataset("train", root=data), MnistDataset("test", root=data)
    test = MnistDataset("test", root=data, embedded=data is None)
    return PartialDataset(test, 0, 8000), PartialDataset(test, 8000, 10000)


@contextmanager
def progress(total: int, description: str) -> Iterator[Callable[[str], None]]:
    """``advance(status)`` once a batch: rich's bar on a terminal when rich is installed, else
    a plain line every few seconds."""
    try:
        from rich.progress import MofNCompleteColumn, Progress, TimeRemainingColumn
    except ImportError:
        Progress = None
    if Progress is not None and sys.stdout.isatty():
        with Progress(*Progress.get_default_columns()[:-1], MofNCompleteColumn(),
                      TimeRemainingColumn(), "{task.fields[status]}", transient=True) as bar:
            task = bar.add_task(description, total=total, status="")
            yield lambda status: bar.update(task, advance=1, status=status)
        return
    done, last = 0, time.monotonic()

    def advance(status: str) -> None:
        nonlocal done, last
        done += 1
        if time.monotonic() - last >= 5.0 and done < total:
            last = time.monotonic()
            print(f"  {description}: batch {done}/{total}  {status}", flush=True)

    yield advance


def validate(model: Cnn, loader: DataLoader, precision: bn.autocast) -> float:
    """The accuracy (%) of ``model`` over ``loader``'s batches, its forward under autocast."""
    correct = seen = 0
    for batch in loader:
        with precision:
            logits = model(batch.images)
        correct += int((logits.argmax(dim=1).reshape([-1]) == batch.targets).int().sum().item())
        seen += batch.targets.shape[0]
    return 100.0 * correct / seen


def train(args: argparse.Namespace) -> float:
    """Train, print each epoch's loss and validation accuracy; return the last accuracy."""
    train_set, valid_set = datasets(args.data)
    if args.limit:
        train_set = PartialDataset(train_set, 0, min(args.limit, len(train_set)))
        valid_set = PartialDataset(valid_set, 0, min(max(args.limit // 4, 1), len(valid_set)))
    low = args.dtype != "float32"
    # autocast(enabled=False) leaves everything in float32: one loop for the three dtypes.
    precision = bn.autocast(args.dtype if low else bn.bfloat16, enabled=low)
    # Loss scaling is for float16 only (bfloat16 has float32's range); disabled, it passes
    # everything through.
    scaler = optim.GradScaler(enabled=args.dtype == "float16")
    print(f"training on {len(train_set):,} digits, validating on {len(valid_set):,}; backend "
          f"{args.backend}, products in {args.dtype}"
          f"{', loss scaling on' if scaler.enabled else ''}", flush=True)

    bn.seed(0)
    device = bn.backend(args.backend).default_device()
    model = CnnConfig().init(device)
    valid_device = model.valid().conv1.weight.device  # the backend autodiff wraps
    train_loader = DataLoader(train_set, MnistBatcher(), args.batch_size, shuffle=True, seed=0,
                              device=device)
    valid_loader = DataLoader(valid_set, MnistBatcher(), 500, device=valid_device)
    optimizer = optim.Adam()
    steps = args.epochs * len(train_loader)
    schedule = optim.CosineAnnealingLr(args.lr, steps, warmup_iters=min(50, steps // 10))
    loss_fn = nn.CrossEntropyLoss()

    started = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        loss_sum = 0.0
        with progress(len(train_loader), f"epoch {epoch}/{args.epochs}") as advance:
            for step, batch in enumerate(train_loader):
                with precision:
                    logits = model(batch.images)        # products in the low dtype
                    loss = loss_fn(logits, batch.targets)  # float32 whatever the logits
                if epoch == 1 and step == 0:
                    print(f"logits {logits.dtype}, loss {loss.dtype}, parameters "
                          f"{model.conv1.weight.val().dtype}", flush=True)
                grads = scaler.scale(loss).backward()  # float32 gradients for the parameters
                model = scaler.step(optimizer, schedule.step(), model, grads)
                scaler.update()
                loss_sum += loss.item()  # a read per step: cheap on a CPU
                advance(f"loss {loss.item():.3f}")
        accuracy = validate(model.valid(), valid_loader, precision)
        scaling = (f"; loss scale {scaler.get_scale():g}, {scaler.skipped_steps} steps skipped"
                   if scaler.enabled else "")
        print(f"epoch {epoch}/{args.epochs}: train loss {loss_sum / len(train_loader):.4f}, "
              f"validation accuracy {accuracy:.2f}% ({time.perf_counter() - started:.0f}s)"
              f"{scaling}", flush=True)
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST IDX files (default: $BURNISH_MNIST_DIR, else "
                             "the test set shipped with burnish-train; never downloads)")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"],
                        default="bfloat16",
                        help="the dtype of the products (float32: no autocast, to compare)")
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="an autodiff backend to train on (autodiff+ndarray; e.g. "
                             "autodiff+wgpu, autodiff+cuda)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak of the cosine schedule")
    parser.add_argument("--limit", type=int, default=None,
                        help="train on this many digits only (a quick smoke run)")
    args = parser.parse_args()
    if not args.backend.startswith("autodiff+"):
        parser.error(f"--backend must be an autodiff backend to train, e.g. autodiff+"
                     f"{args.backend}; got {args.backend!r}")
    train(args)


if __name__ == "__main__":
    main()
