"""Timing in timeit's way: enough loops to fill a measurable interval, the best of several runs."""

from __future__ import annotations

import timeit
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Case:
    """One measurement: the same work done by burnish and by each reference library.

    ``runs`` maps an implementation ("burnish", "numpy", "torch") to a callable that does the
    work once; ``goal`` says what burnish should reach, and ``met`` tells from the measured
    seconds per call of each implementation whether it did.
    """

    benchmark: str
    name: str
    runs: dict[str, Callable[[], object]]
    goal: str = ""
    met: Callable[[dict[str, float]], bool] | None = None
    note: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    loops: dict[str, int] = field(default_factory=dict)

    def goal_met(self) -> bool | None:
        """Whether burnish met the goal; None when there is no goal or nothing to judge."""
        if self.met is None or "burnish" not in self.seconds:
            return None
        return self.met(self.seconds)


def measure(runs: dict[str, Callable[[], object]], repeat: int, min_time: float
            ) -> tuple[dict[str, float], dict[str, int]]:
    """The best seconds per call of each of ``runs`` over ``repeat`` timed runs, each of as many
    loops as last at least ``min_time`` seconds, and those numbers of loops.

    The implementations take turns, run by run, so that a slow spell of a shared machine falls on
    all of them alike instead of on whichever was being timed.
    """
    timers = {name: timeit.Timer(run) for name, run in runs.items()}
    loops = {name: _loops(timer, min_time) for name, timer in timers.items()}
    best = dict.fromkeys(timers, float("inf"))
    for _ in range(repeat):
        for name, timer in timers.items():
            best[name] = min(best[name], timer.timeit(loops[name]) / loops[name])
    return best, loops


def _loops(timer: timeit.Timer, min_time: float) -> int:
    """How many calls take at least ``min_time`` seconds, after one call to warm up (imports,
    allocations, starting BLAS threads are not the op's cost)."""
    timer.timeit(1)
    loops = 1
    while (elapsed := timer.timeit(loops)) < min_time:
        loops *= 10 if elapsed < min_time / 10 else 2
    return loops


def within(factor: float, reference: str = "numpy") -> Callable[[dict[str, float]], bool]:
    """A goal: burnish takes at most ``factor`` times as long as ``reference``."""
    return lambda s: reference in s and s["burnish"] <= factor * s[reference]


def at_most(seconds: float) -> Callable[[dict[str, float]], bool]:
    """A goal: burnish takes at most ``seconds`` per call."""
    return lambda s: s["burnish"] <= seconds
