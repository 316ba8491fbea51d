"""Resizing ``[batch, channels, height, width]`` arrays: nearest, bilinear and bicubic, as PyTorch.

Each mode is separable: one dim at a time, the output is a weighted sum of a few gathered input
rows (1 tap for nearest, 2 for bilinear, 4 for bicubic). Source positions and weights are
computed as PyTorch computes them (float32, or float64 for float64 inputs; nearest always in
float32), so the taps chosen match PyTorch's exactly and values agree to rounding.
"""

from __future__ import annotations

import numpy as np

from burnish.backend.interpolation import cubic_taps, linear_taps, nearest_indices
from burnish.ndarray.dtypes import FLOAT32, FLOAT64, quiet, widen
from burnish.ndarray.windows import Dims


class InterpolateOps:
    """The ``interpolate`` op; half floats are blended in float32."""

    @quiet
    def interpolate(self, x: np.ndarray, size: Dims, mode: str, align_corners: bool
                    ) -> np.ndarray:
        if mode == "nearest":
            out = x
            for d, o in enumerate(size):
                out = np.take(out, nearest_indices(x.shape[2 + d], o), axis=2 + d)
            return out
        if mode == "bilinear":
            taps = linear_taps
        elif mode == "bicubic":
            taps = cubic_taps
        else:
            raise ValueError(f"ndarray backend: unknown interpolation mode {mode!r}")
        work = widen(x)
        opmath = FLOAT64 if work.dtype == FLOAT64 else FLOAT32
        # Width first, then height: PyTorch's order of the inner and outer sums.
        for d in reversed(range(len(size))):
            axis = 2 + d
            shape = [1] * work.ndim
            shape[axis] = size[d]
            acc = None
            for index, weight in taps(work.shape[axis], size[d], align_corners, opmath):
                term = np.take(work, index, axis=axis)
                term *= weight.astype(work.dtype).reshape(shape)
                acc = term if acc is None else np.add(acc, term, out=acc)
            work = acc
        return work.astype(x.dtype, copy=False)
