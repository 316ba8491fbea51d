"""Matrix products of square float32 matrices; NumPy's time is its BLAS library's."""

from __future__ import annotations

import numpy as np
from timing import Case, within

SIZES = (512, 1024, 2048)


def cases(ctx) -> list[Case]:
    rng = np.random.default_rng(0)
    found = []
    for n in SIZES:
        x, y = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
        a, b = ctx.tensor(x), ctx.tensor(y)
        runs = {"burnish": ctx.synced(lambda a=a, b=b: a @ b), "numpy": lambda x=x, y=y: x @ y}
        if ctx.torch:
            tx, ty = ctx.torch.from_numpy(x), ctx.torch.from_numpy(y)
            runs["torch"] = lambda tx=tx, ty=ty: tx @ ty
        goal = ("within 5% of NumPy", within(1.05)) if n == 1024 else ("", None)
        found.append(Case("matmul", f"{n}x{n} @ {n}x{n} float32", runs, *goal))
    return found
