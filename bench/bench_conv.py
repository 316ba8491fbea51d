"""A ResNet-sized 2-d convolution; NumPy has none, so PyTorch is the only reference."""

from __future__ import annotations

import numpy as np
from timing import Case

import burnish.functional as F

BATCH, CHANNELS, SIZE, KERNEL = 32, 64, 56, 3


def cases(ctx) -> list[Case]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, CHANNELS, SIZE, SIZE), dtype=np.float32)
    w = rng.standard_normal((CHANNELS, CHANNELS, KERNEL, KERNEL), dtype=np.float32)
    a, b = ctx.tensor(x), ctx.tensor(w)
    runs = {"burnish": ctx.synced(lambda: F.conv2d(a, b, padding=1))}
    if ctx.torch:
        tx, tw = ctx.torch.from_numpy(x), ctx.torch.from_numpy(w)
        runs["torch"] = lambda: ctx.torch.nn.functional.conv2d(tx, tw, padding=1)
    name = f"conv2d {BATCH}x{CHANNELS}x{SIZE}x{SIZE}, {CHANNELS} filters {KERNEL}x{KERNEL}, pad 1"
    return [Case("conv2d", name, runs, note="NumPy has no convolution: PyTorch only")]
