"""Train the MNIST example's CNN with a loop of one's own: no Learner, every step written out.

Batches from a DataLoader, the forward pass, the loss, ``backward()``, the optimizer's step, a
validation pass with its accuracy each epoch, a progress bar, and the trained model saved
through ``burnish.record``."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import burnish as bn
from burnish import nn, optim, record
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


def validate(model: Cnn, loader: DataLoader) -> tuple[float, float]:
    """The mean loss and the accuracy (%) of ``model`` over ``loader``'s batches."""
    loss_sum = correct = seen = 0.0
    for batch in loader:
        logits = model(batch.images)
        loss_sum += nn.CrossEntropyLoss()(logits, batch.targets).item() * batch.targets.shape[0]
        predictions = logits.argmax(dim=1).reshape([-1])
        correct += (predictions == batch.targets).float().sum().item()
        seen += batch.targets.shape[0]
    return loss_sum / seen, 100.0 * correct / seen


def train(args: argparse.Namespace) -> Cnn:
    train_set, valid_set = datasets(args.data)
    if args.limit:
        train_set = PartialDataset(train_set, 0, min(args.limit, len(train_set)))
        valid_set = PartialDataset(valid_set, 0, min(max(args.limit // 4, 1), len(valid_set)))
    print(f"training on {len(train_set):,} digits, validating on {len(valid_set):,}; "
          f"backend {args.backend}", flush=True)

    bn.seed(0)
    device = bn.backend(args.backend).default_device()
    model = CnnConfig().init(device)
    # model.valid() is the model on the backend autodiff wraps: validation batches go there.
    valid_device = model.valid().conv1.weight.device
    train_loader = DataLoader(train_set, MnistBatcher(), args.batch_size, shuffle=True, seed=0,
                              device=device)
    valid_loader = DataLoader(valid_set, MnistBatcher(), 500, device=valid_device)
    optimizer = optim.Adam()
    steps = args.epochs * len(train_loader)
    schedule = optim.CosineAnnealingLr(args.lr, steps, warmup_iters=min(50, steps // 10))
    loss_fn = nn.CrossEntropyLoss()

    started = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        with progress(len(train_loader), f"epoch {epoch}/{args.epochs}") as advance:
            for batch in train_loader:
                logits = model(batch.images)                      # forward: [batch, 10]
                loss = loss_fn(logits, batch.targets)
                grads = loss.backward()                           # d loss / d each parameter
                model = optimizer.step(schedule.step(), model, grads)  # a new, updated model
                # Reading the loss waits for the step to end: cheap on a CPU; on a GPU, read
                # it every few steps instead.
                advance(f"loss {loss.item():.3f}")
        valid_loss, accuracy = validate(model.valid(), valid_loader)
        print(f"epoch {epoch}/{args.epochs}: validation loss {valid_loss:.4f}, accuracy "
              f"{accuracy:.2f}% ({time.perf_counter() - started:.0f}s)", flush=True)

    # The record: every parameter by its dotted name, plus metadata of our own.
    args.out.parent.mkdir(parents=True, exist_ok=True)
    path = record.save(model.valid().into_record(), args.out,
                       metadata={"model": "examples/mnist/model.py:Cnn", "epochs": args.epochs,
                                 "accuracy": round(accuracy, 2)})
    print(f"validation accuracy {accuracy:.2f}%; model saved to {path}")
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST IDX files (default: $BURNISH_MNIST_DIR, else "
                             "the test set shipped with burnish-train; never downloads)")
    parser.add_argument("--out", type=Path, default=Path("runs/custom-training-loop/"
                                                         "model.safetensors"),
                        help="where the trained model goes (format from the extension)")
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="an autodiff backend to train on (autodiff+ndarray; e.g. "
                             "autodiff+wgpu)")
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
