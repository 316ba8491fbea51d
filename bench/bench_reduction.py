"""Reductions over a large float32 tensor: everything at once, and along one dim."""

from __future__ import annotations

import numpy as np
from timing import Case

SHAPE = (4096, 4096)


def cases(ctx) -> list[Case]:
    x = np.random.default_rng(0).random(SHAPE, dtype=np.float32)
    a = ctx.tensor(x)
    t = ctx.torch.from_numpy(x) if ctx.torch else None
    label = "x".join(map(str, SHAPE))
    found = []
    for name, ours, theirs, torch_run in [
        ("sum()", lambda: a.sum(), lambda: x.sum(), lambda: t.sum()),
        ("mean()", lambda: a.mean(), lambda: x.mean(), lambda: t.mean()),
        ("sum(dim=1)", lambda: a.sum(dim=1), lambda: x.sum(axis=1), lambda: t.sum(dim=1)),
        ("max(dim=0)", lambda: a.max(dim=0), lambda: x.max(axis=0), lambda: t.amax(dim=0)),
    ]:
        runs = {"burnish": ctx.synced(ours), "numpy": theirs}
        if t is not None:
            runs["torch"] = torch_run
        found.append(Case("reduction", f"{name}, {label} float32", runs))
    return found
