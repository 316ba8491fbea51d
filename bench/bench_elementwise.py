"""Large elementwise ops: memory bandwidth bound, so burnish should add nothing to NumPy's time."""

from __future__ import annotations

import numpy as np
from timing import Case, within

SIZE = 32 * 1024 * 1024


def cases(ctx) -> list[Case]:
    rng = np.random.default_rng(0)
    x, y = rng.random(SIZE, dtype=np.float32), rng.random(SIZE, dtype=np.float32)
    a, b = ctx.tensor(x), ctx.tensor(y)
    runs = {"burnish": ctx.synced(lambda: a + b), "numpy": lambda: x + y}
    if ctx.torch:
        tx, ty = ctx.torch.from_numpy(x), ctx.torch.from_numpy(y)
        runs["torch"] = lambda: tx + ty
    return [Case("elementwise", "a + b, 32M float32", runs, "within 5% of NumPy", within(1.05))]
