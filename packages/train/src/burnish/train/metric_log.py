"""Metric logs on disk: one CSV file per split and metric, and the epochs' values as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from burnish.record.atomic import atomic_write


class MetricLog:
    """Writes ``logs/<split>/<metric>.csv`` (lines ``epoch,iteration,value``, one per step) and
    ``logs/epochs.json`` (``{split: {metric: [value of epoch 1, ...]}}``) under ``run_dir``."""

    def __init__(self, run_dir: str | Path):
        self.directory = Path(run_dir) / "logs"
        self.epochs: dict[str, dict[str, list[float]]] = {}
        self._files: dict[tuple[str, str], TextIO] = {}

    def log_step(self, split: str, metric: str, epoch: int, iteration: int, value: float) -> None:
        """Append one step's value."""
        key = (split, metric)
        file = self._files.get(key)
        if file is None:
            path = self.directory / split / f"{metric}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            new = not path.exists()
            file = self._files[key] = path.open("a")
            if new:
                file.write("epoch,iteration,value\n")
        file.write(f"{epoch},{iteration},{value!r}\n")

    def log_epoch(self, split: str, values: dict[str, float]) -> None:
        """Record an epoch's values of a split and write ``epochs.json`` atomically."""
        for metric, value in values.items():
            self.epochs.setdefault(split, {}).setdefault(metric, []).append(value)
        self.flush()
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write(self.directory / "epochs.json", json.dumps(self.epochs).encode())

    def flush(self) -> None:
        for file in self._files.values():
            file.flush()

    def close(self) -> None:
        for file in self._files.values():
            file.close()
        self._files.clear()

    def rewind(self, epoch: int, iteration: int, epoch_done: bool) -> None:
        """Forget what was logged after a checkpoint taken at ``iteration`` of ``epoch`` (after
        its validation when ``epoch_done``), so that a resumed run's logs read as one run's."""
        self.close()
        epochs_done = epoch if epoch_done else epoch - 1
        path = self.directory / "epochs.json"
        if path.exists():
            self.epochs = {
                split: {name: values[:epochs_done] for name, values in metrics.items()}
                for split, metrics in json.loads(path.read_text()).items()
            }
        for csv in self.directory.glob("*/*.csv"):
            lines = csv.read_text().splitlines()
            if csv.parent.name == "train" and not epoch_done:
                last: tuple[int, float] = (epoch, iteration)
            else:
                last = (epochs_done, float("inf"))
            kept = [lines[0]] + [line for line in lines[1:] if _position(line) <= last]
            atomic_write(csv, ("\n".join(kept) + "\n").encode())


def _position(line: str) -> tuple[int, int]:
    epoch, iteration = line.split(",")[:2]
    return int(epoch), int(iteration)


def read_metric_log(run_dir: str | Path, split: str, metric: str) -> list[tuple[int, int, float]]:
    """A metric's logged steps: ``(epoch, iteration, value)`` tuples in order."""
    path = Path(run_dir) / "logs" / split / f"{metric}.csv"
    rows = []
    for line in path.read_text().splitlines()[1:]:
        epoch, iteration, value = line.split(",")
        rows.append((int(epoch), int(iteration), float(value)))
    return rows


def read_epochs(run_dir: str | Path) -> dict[str, dict[str, list[float]]]:
    """The epochs' values: ``{split: {metric: [epoch 1, epoch 2, ...]}}``."""
    return json.loads((Path(run_dir) / "logs" / "epochs.json").read_text())
