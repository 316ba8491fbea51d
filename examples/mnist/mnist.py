"""Train a small CNN on MNIST with the Learner (autodiff+ndarray), save it, then read digits.

``--backend autodiff+cuda`` (or any autodiff backend) trains elsewhere; the digits are then read
on the backend it wraps (``cuda``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import burnish as bn
from burnish import optim
from burnish.data import (
    ChecksumError,
    DataError,
    DataLoader,
    MnistBatcher,
    MnistDataset,
    PartialDataset,
)
from burnish.train import AccuracyMetric, LearnerBuilder, LossMetric, TrainingInterrupted

sys.path.insert(0, str(Path(__file__).parent))
from model import CnnConfig  # noqa: E402


def datasets(data: Path | None) -> tuple:
    """Train and validation sets: MNIST's own when its training files are there (or, without a
    folder, downloaded into the cache), else the first 8,000 and the last 2,000 digits of its test
    set: from the folder, or offline from the copy shipped in burnish-train."""
    if data is None:
        try:
            return MnistDataset("train", download=True), MnistDataset("test", download=True)
        except ChecksumError:
            raise
        except DataError as error:
            print(f"mnist.py: {error}", file=sys.stderr)
            print("MNIST could not be downloaded: training on the first 8,000 digits of the test "
                  "set shipped with burnish-train, validating on the last 2,000 (--data DIR: your "
                  "own copy)", flush=True)
            test = MnistDataset("test", embedded=True)
    elif any(data.glob("train-images-idx3-ubyte*")):
        return MnistDataset("train", root=data), MnistDataset("test", root=data)
    else:
        test = MnistDataset("test", root=data)
    return PartialDataset(test, 0, 8000), PartialDataset(test, 8000, 10000)


def train(args: argparse.Namespace) -> float:
    """Fit the CNN, save it as ``run_dir/model.safetensors``; return the validation accuracy."""
    train_set, valid_set = datasets(args.data)
    if args.limit:
        train_set = PartialDataset(train_set, 0, min(args.limit, len(train_set)))
        valid_set = PartialDataset(valid_set, 0, min(max(args.limit // 4, 1), len(valid_set)))
    bn.seed(0)
    model = CnnConfig().init(bn.backend(args.backend).default_device())
    # One worker process builds the next batches while the step runs, kept from epoch to epoch.
    # Batches are made on the device each step runs on (training: the model's; validation: the
    # inner backend's, without autodiff), so that no step moves them there, which capture cannot
    # replay.
    train_loader = DataLoader(train_set, MnistBatcher(), args.batch_size, shuffle=True,
                              num_workers=1, persistent_workers=True,
                              device=model.conv1.weight.device)
    valid_loader = DataLoader(valid_set, MnistBatcher(), 500, num_workers=1,
                              persistent_workers=True, device=model.valid().conv1.weight.device)
    steps = args.epochs * len(train_loader)
    schedule = optim.CosineAnnealingLr(args.lr, steps, warmup_iters=min(50, steps // 10))
    learner = (LearnerBuilder(args.run_dir)
               .metrics(LossMetric(), AccuracyMetric())
               .num_epochs(args.epochs)
               .checkpoint(keep_last=1, best_by="accuracy")
               .build(model, optim.Adam(), schedule))
    started = time.perf_counter()
    try:
        model = learner.fit(train_loader, valid_loader, resume=args.resume)
    except TrainingInterrupted as interrupted:
        print(f"interrupted; run again with --resume to continue from {interrupted.checkpoint}")
        sys.exit(130)
    accuracy = learner.valid_metrics[1].value()
    path = model.valid().save(args.run_dir / "model.safetensors")
    print(f"validation accuracy {accuracy:.2f}% after {time.perf_counter() - started:.0f}s; "
          f"model saved to {path}")
    return accuracy


def infer(args: argparse.Namespace) -> None:
    """Print the saved model's predictions beside the labels of the test set's last digits."""
    device = bn.backend(inference_backend(args.backend)).default_device()
    model = CnnConfig().init(device).load(args.run_dir / "model.safetensors")
    # Without a folder, the shipped test set: the same digits as the downloaded one, offline.
    test = MnistDataset("test", root=args.data, embedded=args.data is None)
    # The last digits: held out of training when only the test set's files are there.
    items = [test.get(len(test) - 1 - i) for i in range(args.count)]
    batch = MnistBatcher().batch(items, device)
    predictions = model(batch.images).argmax(dim=1).reshape([-1]).tolist()
    for item, prediction in zip(items, predictions):
        mark = "" if prediction == item.label else "  <- wrong"
        print(f"label {item.label}  predicted {prediction}{mark}")
    right = sum(p == item.label for p, item in zip(predictions, items))
    print(f"{right}/{len(items)} right")


def inference_backend(name: str) -> str:
    """The backend an autodiff backend wraps: ``autodiff+cuda`` reads digits on ``cuda``."""
    return name.removeprefix("autodiff+")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST IDX files (default: $BURNISH_MNIST_DIR, else "
                             "download MNIST into the cache; offline, the test set shipped with "
                             "burnish-train)")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/mnist"),
                        help="where checkpoints, logs and the model go")
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="an autodiff backend to train on (autodiff+ndarray; e.g. "
                             "autodiff+cuda); the digits are read on the backend it wraps")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak of the cosine schedule")
    parser.add_argument("--limit", type=int, default=None,
                        help="train on this many digits only (a quick smoke run)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    parser.add_argument("--infer-only", action="store_true", help="skip training")
    parser.add_argument("--count", type=int, default=10, help="digits to predict")
    args = parser.parse_args()
    if not args.backend.startswith("autodiff+"):
        parser.error(f"--backend must be an autodiff backend to train, e.g. autodiff+"
                     f"{args.backend}; got {args.backend!r}")
    if not args.infer_only:
        train(args)
    infer(args)


if __name__ == "__main__":
    main()
