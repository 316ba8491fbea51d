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


def measure(run: Callable[[], object], repeat: int, min_time: float) -> tuple[float, int]:
    """The best seconds per call of ``run`` over ``repeat`` runs of as many loops as take at
    least ``min_time`` seconds, and that number of loops."""
    run()  # warm up: first-call costs (imports, allocations, BLAS threads) are not the op's
    timer = timeit.Timer(run)
    loops = 1
    while True:
        elapsed = timer.timeit(loops)
        if elapsed >= min_time:
            break
        loops *= 10 if elapsed < min_time / 10 else 2
    best = min([elapsed] + timer.repeat(repeat - 1, loops)) if repeat > 1 else elapsed
    return best / loops, loops


def within(factor: float, reference: str = "numpy") -> Callable[[dict[str, float]], bool]:
    """A goal: burnish takes at most ``factor`` times as long as ``reference``."""
    return lambda s: reference in s and s["burnish"] <= factor * s[reference]


def at_most(seconds: float) -> Callable[[dict[str, float]], bool]:
    """A goal: burnish takes at most ``seconds`` per call."""
    return lambda s: s["burnish"] <= seconds
