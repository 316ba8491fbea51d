"""The live terminal dashboard (rich): progress, remaining time, metrics and their curves."""

from __future__ import annotations

import math
import time
from collections import deque

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from burnish.train.keys import KeyReader
from burnish.train.progress import format_duration
from burnish.train.renderer import Renderer, StepProgress

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """A curve of ``values`` in block characters, lowest ``▁`` to highest ``█``."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    span = (high - low) or 1.0
    return "".join(BLOCKS[round((v - low) / span * (len(BLOCKS) - 1))] if math.isfinite(v)
                   else " " for v in values)


class Dashboard(Renderer):
    """The renderer for a terminal: redraws, at most ``refresh`` times a second, a panel with
    the epoch's and the run's progress, the remaining time, and each metric's train and valid
    values beside a sparkline of its recent steps. ↑/↓ (or j/k, tab) move between metrics: the
    selected one is marked and its curves are drawn at twice the width with their range. The
    panel is erased on exit (Ctrl-C included) and the summary table is printed in its place."""

    def __init__(self, console: Console | None = None, refresh: float = 8.0, width: int = 40):
        self.console = console or Console()
        self.interval = 1.0 / refresh
        self.width = width
        self.live: Live | None = None
        self.selected = 0
        self.keys = KeyReader(self._move)

    def start(self, num_epochs: int) -> None:
        self.num_epochs = num_epochs
        self.values: dict[str, dict[str, float]] = {"train": {}, "valid": {}}
        self.curves: dict[tuple[str, str], deque[float]] = {}
        self.selected = 0
        self.state: tuple[str, int, int, int | None, float] = ("train", 1, 0, None, math.inf)
        self.started = time.monotonic()
        self.last = -math.inf
        self.live = Live(self._render(), console=self.console, transient=True,
                         auto_refresh=False)
        self.live.start()
        self.keys.start()

    def step(self, progress: StepProgress) -> None:
        split, iteration, total = progress.split, progress.iteration, progress.total
        self.state = (split, progress.epoch, iteration, total, progress.remaining)
        self.values[split].update(progress.values)
        for name, value in progress.values.items():
            self.curves.setdefault((split, name), deque(maxlen=2 * self.width)).append(value)
        now = time.monotonic()
        if now - self.last >= self.interval or iteration == total:
            self.last = now
            self._refresh()

    def epoch_end(self, split: str, epoch: int, values: dict[str, float]) -> None:
        self.values[split].update(values)
        self._refresh()

    def note(self, line: str) -> None:
        """A line said once, before the run, printed above the panel."""
        self.console.print(line, highlight=False)

    def finish(self, summary: str) -> None:
        self.close()
        self.console.print(summary, highlight=False)

    def close(self) -> None:
        self.keys.stop()
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _move(self, step: int) -> None:
        """Select the next (+1) or previous (-1) metric, wrapping around."""
        count = len(self._names())
        if count:
            self.selected = (self.selected + step) % count
            self._refresh()

    def _names(self) -> list[str]:
        return list(dict.fromkeys([*self.values["train"], *self.values["valid"]]))

    def _refresh(self) -> None:
        if self.live is not None:
            self.live.update(self._render(), refresh=True)

    def _render(self) -> Group:
        split, epoch, iteration, total, remaining = self.state
        run_done = (epoch - 1 + (iteration / total if total else 0)) / self.num_epochs
        if split == "valid":
            run_done = epoch / self.num_epochs
        bars = Table.grid(padding=(0, 1))
        of = f"/{total}" if total else ""
        bars.add_row(Text(f"{split} epoch {epoch}/{self.num_epochs}", style="bold"),
                     ProgressBar(total or 1, iteration if total else 0, width=self.width),
                     Text(f"{iteration}{of}"))
        bars.add_row(Text("run"), ProgressBar(1.0, min(run_done, 1.0), width=self.width),
                     Text(f"elapsed {format_duration(time.monotonic() - self.started)}  "
                          f"remaining {format_duration(remaining)}"))
        metrics = Table(box=None, padding=(0, 2), show_edge=False)
        for column in ("metric", "train", "train curve", "valid", "valid curve"):
            metrics.add_column(column, style="bold" if column == "metric" else None)
        names = self._names()
        selected = self.selected % len(names) if names else -1
        for index, name in enumerate(names):
            chosen = index == selected
            row = [f"▶ {name}" if chosen else f"  {name}"]
            for part in ("train", "valid"):
                value = self.values[part].get(name)
                row.append("" if value is None else f"{value:.4g}")
                curve = list(self.curves.get((part, name), []))
                row.append(sparkline(curve if chosen else curve[-self.width:]))
            metrics.add_row(*row, style="reverse" if chosen else None)
        footer = Text("↑/↓ select a metric: its curves widen", style="dim")
        if 0 <= selected:
            finite = [v for part in ("train", "valid")
                      for v in self.curves.get((part, names[selected]), []) if math.isfinite(v)]
            if finite:
                footer = Text(f"{names[selected]}: range {min(finite):.4g} to {max(finite):.4g}"
                              f" over the last {2 * self.width} steps    ↑/↓ select a metric",
                              style="dim")
        return Group(bars, Text(""), metrics, Text(""), footer)
