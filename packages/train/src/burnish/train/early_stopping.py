"""Early stopping: end training when a metric has stopped improving."""

from __future__ import annotations

import math
from typing import Any


class EarlyStopping:
    """Stops after ``patience`` epochs without ``metric`` (``"valid/loss"``) improving by more
    than ``min_delta``; ``mode`` is ``"min"``, ``"max"`` or ``"auto"`` (resolved from the
    metric's ``higher_is_better`` by the builder)."""

    def __init__(self, metric: str, patience: int, mode: str = "auto", min_delta: float = 0.0):
        if mode not in ("min", "max", "auto"):
            raise ValueError(f"early stopping mode must be min, max or auto, got {mode!r}")
        if patience < 1:
            raise ValueError(f"patience must be at least 1, got {patience}")
        self.metric = metric
        self.patience = patience
        self.mode = mode
        self.min_delta = min_delta
        self.best: float | None = None
        self.epochs_without_improvement = 0

    def resolve_mode(self, metrics: dict[str, Any]) -> None:
        if self.mode == "auto":
            found = metrics.get(self.metric.split("/", 1)[-1])
            self.mode = "max" if found is not None and found.higher_is_better else "min"

    def update(self, values: dict[str, float]) -> bool:
        """Take an epoch's values (``{"valid/loss": ...}``); True when training should stop."""
        value = values.get(self.metric)
        if value is None or not math.isfinite(value):
            return False
        sign = 1.0 if self.mode == "max" else -1.0
        if self.best is None or sign * (value - self.best) > self.min_delta:
            self.best = value
            self.epochs_without_improvement = 0
        else:
            self.epochs_without_improvement += 1
        return self.epochs_without_improvement >= self.patience

    def state(self) -> dict[str, Any]:
        return {"best": self.best, "epochs_without_improvement": self.epochs_without_improvement}

    def load_state(self, state: dict[str, Any]) -> None:
        self.best = state.get("best")
        self.epochs_without_improvement = state.get("epochs_without_improvement", 0)
