"""Train the MNIST example's CNN with the Learner and a renderer of one's own: a text bar chart
of the metrics after each epoch, and a CSV file of every step's loss."""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from pathlib import Path
from typing import TextIO

import burnish as bn
from burnish import optim
from burnish.data import DataLoader, MnistBatcher, MnistDataset, PartialDataset
from burnish.train import (
    AccuracyMetric,
    LearnerBuilder,
    LossMetric,
    Renderer,
    StepProgress,
)

# The model of examples/mnist, imported from its folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mnist"))
from model import CnnConfig  # noqa: E402

EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: float, scale: float, width: int) -> str:
    """``value`` as a bar of ``width`` cells, full at ``scale``, in eighths of a cell."""
    filled = 0.0 if not math.isfinite(value) or scale <= 0 else min(value / scale, 1.0)
    eighths = round(filled * width * 8)
    whole, part = divmod(eighths, 8)
    return ("█" * whole + (EIGHTHS[part] if part else "")).ljust(width)


def seconds(value: float) -> str:
    """``95`` as ``1m35s``; ``?`` when not known yet (``inf``)."""
    if not math.isfinite(value):
        return "?"
    minutes, value = divmod(round(value), 60)
    return f"{minutes}m{value:02d}s" if minutes else f"{value}s"


class BarChartRenderer(Renderer):
    """After each epoch, a line per metric: its train and valid values beside bars (full at
    ``scales[name]``, e.g. 100 for a percentage, else at the metric's largest value so far, so
    a falling loss shows as shrinking bars). Every step's loss goes to ``csv_path``
    (``split,epoch,iteration,loss``). Between epochs: a line redrawn in place on a terminal,
    else a line every ``every`` seconds."""

    def __init__(self, csv_path: Path, scales: dict[str, float] | None = None, width: int = 24,
                 stream: TextIO | None = None, every: float = 10.0):
        self.csv_path = csv_path
        self.scales = scales or {}
        self.width = width
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty()
        self.every = every

    def note(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def start(self, num_epochs: int) -> None:
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        self.file = self.csv_path.open("w", newline="")
        self.rows = csv.writer(self.file)
        self.rows.writerow(["split", "epoch", "iteration", "loss"])
        self.epoch_values: dict[str, dict[str, float]] = {}
        self.largest: dict[str, float] = {}
        self.num_epochs = num_epochs
        self.started = self.last = time.monotonic()

    def step(self, progress: StepProgress) -> None:
        self.rows.writerow([progress.split, progress.epoch, progress.iteration,
                            f"{progress.step_values['loss']:.6g}"])
        now = time.monotonic()
        if not self.live and now - self.last < self.every:
            return
        self.last = now
        of = f"/{progress.total}" if progress.total else ""
        line = (f"  [{progress.split}] epoch {progress.epoch}/{progress.num_epochs}  "
                f"batch {progress.iteration}{of}  loss {progress.values['loss']:.4f}  "
                f"remaining {seconds(progress.remaining)}")
        if self.live:  # one line, redrawn in place
            print(f"\r{line}\x1b[K", end="", file=self.stream, flush=True)
        else:
            print(line, file=self.stream, flush=True)

    def epoch_end(self, split: str, epoch: int, values: dict[str, float]) -> None:
        self.epoch_values[split] = values
        for name, value in values.items():
            if math.isfinite(value):
                self.largest[name] = max(self.largest.get(name, 0.0), value)
        if split != "valid":  # the chart comes once both splits are in
            return
        if self.live:
            print("\r\x1b[K", end="", file=self.stream)
        lines = [f"epoch {epoch}/{self.num_epochs}  ({seconds(time.monotonic() - self.started)})"]
        names = list(dict.fromkeys(name for part in self.epoch_values.values() for name in part))
        for name in names:
            scale = self.scales.get(name, self.largest.get(name, 0.0))
            cells = [f"  {name:<9}"]
            for part in ("train", "valid"):
                value = self.epoch_values.get(part, {}).get(name, math.nan)
                cells.append(f"{part} {value:7.3f} │{bar(value, scale, self.width)}│")
            lines.append("  ".join(cells))
        print("\n".join(lines), file=self.stream, flush=True)
        self.epoch_values = {}

    def close(self) -> None:
        self.file.close()
        if self.live:
            print("\r\x1b[K", end="", file=self.stream, flush=True)

    def finish(self, summary: str) -> None:
        print(f"every step's loss: {self.csv_path}", file=self.stream, flush=True)


def datasets(data: Path | None) -> tuple:
    """MNIST's training and test sets when the folder holds its training files, else the first
    8,000 and the last 2,000 digits of its test set (from the folder, or without one from the
    copy shipped in burnish-train). Nothing is downloaded."""
    if data is not None and any(data.glob("train-images-idx3-ubyte*")):
        return MnistDataset("train", root=data), MnistDataset("test", root=data)
    test = MnistDataset("test", root=data, embedded=data is None)
    return PartialDataset(test, 0, 8000), PartialDataset(test, 8000, 10000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST IDX files (default: $BURNISH_MNIST_DIR, else "
                             "the test set shipped with burnish-train; never downloads)")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/custom-renderer"),
                        help="where the Learner's logs, steps.csv and the model go")
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="an autodiff backend to train on (autodiff+ndarray; e.g. "
                             "autodiff+wgpu)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak of the cosine schedule")
    parser.add_argument("--limit", type=int, default=None,
                        help="train on this many digits only (a quick smoke run)")
    args = parser.parse_args()
    if not args.backend.startswith("autodiff+"):
        parser.error(f"--backend must be an autodiff backend to train, e.g. autodiff+"
                     f"{args.backend}; got {args.backend!r}")

    train_set, valid_set = datasets(args.data)
    if args.limit:
        train_set = PartialDataset(train_set, 0, min(args.limit, len(train_set)))
        valid_set = PartialDataset(valid_set, 0, min(max(args.limit // 4, 1), len(valid_set)))
    bn.seed(0)
    model = CnnConfig().init(bn.backend(args.backend).default_device())
    # Batches on the device each step runs on: the Learner's captured steps then move nothing.
    train_loader = DataLoader(train_set, MnistBatcher(), args.batch_size, shuffle=True,
                              device=model.conv1.weight.device)
    valid_loader = DataLoader(valid_set, MnistBatcher(), 500,
                              device=model.valid().conv1.weight.device)
    steps = args.epochs * len(train_loader)
    renderer = BarChartRenderer(args.run_dir / "steps.csv", scales={"accuracy": 100.0})
    learner = (LearnerBuilder(args.run_dir)
               .metrics(LossMetric(), AccuracyMetric())
               .num_epochs(args.epochs)
               .renderer(renderer)
               .build(model, optim.Adam(),
                      optim.CosineAnnealingLr(args.lr, steps, warmup_iters=min(50, steps // 10))))
    print(f"training on {len(train_set):,} digits, validating on {len(valid_set):,}", flush=True)
    model = learner.fit(train_loader, valid_loader)
    path = model.valid().save(args.run_dir / "model.safetensors")
    print(f"validation accuracy {learner.valid_metrics[1].value():.2f}%; model saved to {path}")


if __name__ == "__main__":
    main()
