"""Learning-rate schedules: each ``step()`` returns the rate of the next iteration."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from burnish import record
from burnish.errors import RecordError


class LrScheduler:
    """A schedule: the ``i``-th call of ``step()`` (from 0) returns ``lr(i)`` (Burn's
    ``LrScheduler``). ``iteration`` is how many steps were taken, its whole state: ``save`` and
    ``load`` (or ``into_record``/``load_record``) keep it, so a resumed run gets the same rates.
    """

    def __init__(self) -> None:
        self.iteration = 0

    def lr(self, iteration: int) -> float:
        raise NotImplementedError

    def step(self) -> float:
        rate = self.lr(self.iteration)
        self.iteration += 1
        return rate

    # -- records ------------------------------------------------------------------------------

    def into_record(self) -> dict[str, Any]:
        """The state as a record: ``{"iteration": int64 tensor [1]}``."""
        return {"iteration": np.array([self.iteration], np.int64)}

    def load_record(self, tree: dict[str, Any] | record.Record) -> None:
        """Take the iteration of a record (``into_record``'s form)."""
        if isinstance(tree, record.Record):
            tree = tree.tensors
        value = tree.get("iteration") if isinstance(tree, dict) else None
        values = None if value is None else np.asarray(
            value.to_numpy() if hasattr(value, "to_numpy") else value)
        if values is None or values.shape != (1,) or values.dtype.kind not in "iu" \
                or values[0] < 0:
            raise RecordError(f"a schedule's record holds one non-negative int 'iteration', "
                              f"got {tree!r}"[:200])
        self.iteration = int(values[0])

    def save(self, path: str | os.PathLike[str], format: str | None = None) -> Path:
        """Write the state to ``path`` through ``burnish.record``."""
        return record.save(self.into_record(), path, format,
                           metadata={"scheduler": type(self).__name__})

    def load(self, path: str | os.PathLike[str], format: str | None = None) -> None:
        """Take the state saved at ``path``; RecordError when it is another schedule's."""
        loaded = record.load(path, format)
        kind = loaded.metadata.user.get("scheduler")
        if kind not in (None, type(self).__name__):
            raise RecordError(f"{path} holds the state of {kind}, not of {type(self).__name__}")
        self.load_record(loaded)


class ConstantLr(LrScheduler):
    def __init__(self, rate: float):
        super().__init__()
        self.rate = rate

    def lr(self, iteration: int) -> float:
        return self.rate


class LinearLr(LrScheduler):
    """From ``initial`` to ``final`` over ``num_iters`` steps, then ``final``."""

    def __init__(self, initial: float, final: float, num_iters: int):
        super().__init__()
        self.initial, self.final, self.num_iters = initial, final, num_iters

    def lr(self, iteration: int) -> float:
        done = min(iteration, self.num_iters) / self.num_iters
        return self.initial + (self.final - self.initial) * done


class CosineAnnealingLr(LrScheduler):
    """A linear warmup from 0 over ``warmup_iters``, then a half cosine from ``initial`` to
    ``min_lr`` over ``num_iters``, then ``min_lr``."""

    def __init__(self, initial: float, num_iters: int, min_lr: float = 0.0,
                 warmup_iters: int = 0):
        super().__init__()
        self.initial, self.num_iters, self.min_lr = initial, num_iters, min_lr
        self.warmup_iters = warmup_iters

    def lr(self, iteration: int) -> float:
        if iteration < self.warmup_iters:
            return self.initial * (iteration + 1) / self.warmup_iters
        done = min(iteration - self.warmup_iters, self.num_iters) / self.num_iters
        return self.min_lr + (self.initial - self.min_lr) * (1 + math.cos(math.pi * done)) / 2


class ExponentialLr(LrScheduler):
    """``initial * gamma ** iteration``."""

    def __init__(self, initial: float, gamma: float):
        super().__init__()
        self.initial, self.gamma = initial, gamma

    def lr(self, iteration: int) -> float:
        return self.initial * self.gamma**iteration


class StepLr(LrScheduler):
    """``initial * gamma ** (iteration // step_size)``."""

    def __init__(self, initial: float, step_size: int, gamma: float = 0.1):
        super().__init__()
        self.initial, self.step_size, self.gamma = initial, step_size, gamma

    def lr(self, iteration: int) -> float:
        return self.initial * self.gamma ** (iteration // self.step_size)


class NoamLr(LrScheduler):
    """The Transformer's: ``initial * d_model^-0.5 * min(n^-0.5, n * warmup_steps^-1.5)``,
    ``n = iteration + 1``."""

    def __init__(self, initial: float, warmup_steps: int, d_model: int):
        super().__init__()
        self.initial, self.warmup_steps, self.d_model = initial, warmup_steps, d_model

    def lr(self, iteration: int) -> float:
        n = iteration + 1
        return self.initial * self.d_model**-0.5 * min(n**-0.5, n * self.warmup_steps**-1.5)


class SequentialLr(LrScheduler):
    """Schedules one after another: ``(schedule, iterations)`` pairs, the last running on;
    each starts from its own iteration 0."""

    def __init__(self, parts: Sequence[tuple[LrScheduler, int]]):
        super().__init__()
        if not parts:
            raise ValueError("SequentialLr needs at least one schedule")
        self.parts = list(parts)

    def lr(self, iteration: int) -> float:
        for schedule, length in self.parts[:-1]:
            if iteration < length:
                return schedule.lr(iteration)
            iteration -= length
        return self.parts[-1][0].lr(iteration)


class ComposedLr(LrScheduler):
    """Several schedules at once, combined by ``"prod"``, ``"sum"`` or ``"avg"``."""

    def __init__(self, schedules: Sequence[LrScheduler], reduction: str = "prod"):
        super().__init__()
        if reduction not in ("prod", "sum", "avg"):
            raise ValueError(f"reduction must be 'prod', 'sum' or 'avg', got {reduction!r}")
        self.schedules, self.reduction = list(schedules), reduction

    def lr(self, iteration: int) -> float:
        rates = [schedule.lr(iteration) for schedule in self.schedules]
        if self.reduction == "prod":
            return math.prod(rates)
        total = sum(rates)
        return total if self.reduction == "sum" else total / len(rates)
