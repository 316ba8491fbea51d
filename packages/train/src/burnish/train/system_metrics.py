"""Metrics of the run rather than the model: learning rate, speed, CPU and memory use."""

from __future__ import annotations

import os
import resource
import time
from typing import Any

from burnish.train.metric import Metric, StepInfo


class LearningRateMetric(Metric):
    """The learning rate of each step; the epoch's value is its mean."""

    name = "learning_rate"

    def measure(self, output: Any, batch: Any, info: StepInfo) -> tuple[float, float]:
        return (float("nan"), 0.0) if info.lr is None else (float(info.lr), 1.0)


class IterationSpeedMetric(Metric):
    """Samples a second: the step's since the previous update, the epoch's since ``clear``."""

    name = "iteration_speed"
    higher_is_better = True

    def clear(self) -> None:
        super().clear()
        self.started = self.last = time.perf_counter()
        self.items = 0

    def measure(self, output: Any, batch: Any, info: StepInfo) -> tuple[float, float]:
        now = time.perf_counter()
        items = int(output.targets.shape[0]) if hasattr(output, "targets") else 1
        step = items / max(now - self.last, 1e-9)
        self.last, self.items = now, self.items + items
        return step, 1.0

    def value(self) -> float:
        if not self.items:
            return float("nan")
        return self.items / max(self.last - self.started, 1e-9)


class CpuUseMetric(Metric):
    """This process's CPU time over wall time since the previous update, in percent of one core
    (so up to ``100 * cores``); from ``os.times``."""

    name = "cpu_use"

    def clear(self) -> None:
        super().clear()
        self.last = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float]:
        times = os.times()
        return times.user + times.system, time.perf_counter()

    def measure(self, output: Any, batch: Any, info: StepInfo) -> tuple[float, float]:
        cpu, wall = self._sample()
        previous_cpu, previous_wall = self.last
        self.last = cpu, wall
        return 100.0 * (cpu - previous_cpu) / max(wall - previous_wall, 1e-9), 1.0


def resident_memory_mib() -> float:
    """This process's resident memory in MiB: /proc/self/statm, else the peak from getrusage."""
    try:
        with open("/proc/self/statm") as file:
            pages = int(file.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if os.uname().sysname == "Darwin" else peak / 2**10


class MemoryUseMetric(Metric):
    """This process's resident memory in MiB at each update; the epoch's value is the mean."""

    name = "memory_use"

    def measure(self, output: Any, batch: Any, info: StepInfo) -> tuple[float, float]:
        return resident_memory_mib(), 1.0
