"""The metric protocol and the running average that every metric keeps over an epoch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepInfo:
    """What a metric may need beyond the step's output: where the run is and its learning rate."""

    epoch: int = 1
    iteration: int = 1
    lr: float | None = None


class Metric:
    """A metric (Burn's ``Metric``): ``update(output, batch)`` returns the step's value and adds
    it to the epoch's running average, ``value()`` is that average, ``clear()`` starts an epoch.

    ``name`` names its log file and column; ``higher_is_better`` tells the checkpointer and early
    stopping which way is better. Subclasses implement ``measure(output, batch, info) -> (value,
    weight)``; the epoch's value is the weighted mean (weights are batch sizes by default).
    """

    name = "metric"
    higher_is_better = False

    def __init__(self) -> None:
        self.clear()

    def measure(self, output: Any, batch: Any, info: StepInfo) -> tuple[float, float]:
        raise NotImplementedError

    def update(self, output: Any, batch: Any = None, info: StepInfo | None = None) -> float:
        """Measure one step, add it to the epoch's average and return the step's value."""
        value, weight = self.measure(output, batch, info or StepInfo())
        self.total += value * weight
        self.weight += weight
        return value

    def value(self) -> float:
        """The epoch's running average (nan before the first update)."""
        return self.total / self.weight if self.weight else float("nan")

    def clear(self) -> None:
        """Forget the epoch's values."""
        self.total = 0.0
        self.weight = 0.0

    def state(self) -> dict[str, Any]:
        """The epoch's running state as JSON values (checkpoints keep it mid-epoch)."""
        return {"total": self.total, "weight": self.weight}

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue the epoch from a ``state()``."""
        self.total, self.weight = float(state["total"]), float(state["weight"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
