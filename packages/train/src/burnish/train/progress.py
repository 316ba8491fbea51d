"""Progress output as plain lines (a renderer for logs and pipes) and the summary table of a
run."""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from burnish.train.renderer import Renderer, StepProgress


def format_duration(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``12s``."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def format_metrics(values: dict[str, float]) -> str:
    return "  ".join(f"{name} {value:.4g}" for name, value in values.items())


class PlainProgress(Renderer):
    """The renderer for logs and pipes: a line every ``every`` seconds of a split's steps and
    one per epoch and split.

    A line reads ``[train] epoch 2/5  iteration 40/125  loss 0.31  accuracy 90.2  remaining
    1m10s``; the remaining time is the run's, from the time its steps took so far.
    """

    def __init__(self, stream: TextIO | None = None, every: float = 5.0):
        self.stream = stream or sys.stdout
        self.every = every
        self.last = -math.inf

    def start(self, num_epochs: int) -> None:
        self.num_epochs = num_epochs

    def step(self, progress: StepProgress) -> None:
        now = time.monotonic()
        if now - self.last < self.every or progress.iteration == progress.total:
            return  # epoch_end tells the last
        self.last = now
        of = f"/{progress.total}" if progress.total else ""
        self._write(f"[{progress.split}] epoch {progress.epoch}/{progress.num_epochs}  "
                    f"iteration {progress.iteration}{of}  {format_metrics(progress.values)}  "
                    f"remaining {format_duration(progress.remaining)}")

    def epoch_end(self, split: str, epoch: int, values: dict[str, float]) -> None:
        self._write(f"[{split}] epoch {epoch}/{self.num_epochs} done  {format_metrics(values)}")

    def note(self, line: str) -> None:
        self._write(line)

    def finish(self, summary: str) -> None:
        self._write(summary)

    def _write(self, line: str) -> None:
        print(line, file=self.stream, flush=True)


def summary_table(epochs: dict[str, dict[str, list[float]]],
                  higher_is_better: dict[str, bool]) -> str:
    """A table of each split's metrics: the last epoch's value and the best one with its epoch."""
    rows = [("split", "metric", "last", "best", "epoch")]
    for split, metrics in epochs.items():
        for name, values in metrics.items():
            finite = [(v, i) for i, v in enumerate(values, 1) if math.isfinite(v)]
            if not finite:
                continue
            best = max(finite) if higher_is_better.get(name, False) else min(finite)
            rows.append((split, name, f"{values[-1]:.4g}", f"{best[0]:.4g}", str(best[1])))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
