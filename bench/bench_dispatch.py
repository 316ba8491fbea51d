"""Dispatch overhead: ``a + b`` on 4-element float32 tensors, where the arithmetic costs nothing."""

from __future__ import annotations

import numpy as np
from timing import Case, at_most


def cases(ctx) -> list[Case]:
    x = np.arange(4, dtype=np.float32)
    a, b = ctx.tensor(x), ctx.tensor(x + 1)
    runs = {"burnish": ctx.synced(lambda: a + b), "numpy": lambda: x + x}
    if ctx.torch:
        ta, tb = ctx.torch.from_numpy(x), ctx.torch.from_numpy(x + 1)
        runs["torch"] = lambda: ta + tb
    return [Case("dispatch", "a + b, 4 float32", runs, "<= 1.5 µs per op", at_most(1.5e-6))]
