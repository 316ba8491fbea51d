"""Padding and sliding windows over the spatial dims of ``[batch, channels, *spatial]`` arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

Dims = tuple[int, ...]


def output_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                ceil_mode: bool = False) -> int:
    """How many windows fit along one dim (PyTorch's rule, ``ceil_mode`` included: the last
    window must start inside the input or its left padding)."""
    span = dilation * (kernel - 1) + 1
    room = size + 2 * padding - span
    steps = -(-room // stride) if ceil_mode else room // stride
    out = steps + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def pad(x: np.ndarray, widths: Sequence[tuple[int, int]], value: float = 0.0) -> np.ndarray:
    """``x`` with ``(before, after)`` elements of ``value`` around each spatial dim; ``x`` itself
    when there is nothing to add."""
    if all(before == 0 and after == 0 for before, after in widths):
        return x
    shape = x.shape[:2] + tuple(n + b + a for n, (b, a) in zip(x.shape[2:], widths))
    out = np.full(shape, value, x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(b, b + n) for n, (b, _) in
                                           zip(x.shape[2:], widths))] = x
    return out


def windows(x: np.ndarray, kernel: Dims, stride: Dims, dilation: Dims, out: Dims) -> np.ndarray:
    """A read-only view ``[batch, channels, *out, *kernel]`` of the windows of the (already
    padded) ``x``: element ``[..., o, k]`` is ``x[..., o * stride + k * dilation]``."""
    strides = x.strides
    spatial = strides[2:]
    shape = x.shape[:2] + tuple(out) + tuple(kernel)
    view_strides = (strides[:2] + tuple(s * st for s, st in zip(spatial, stride))
                    + tuple(s * d for s, d in zip(spatial, dilation)))
    return as_strided(x, shape, view_strides, writeable=False)


def tap(x: np.ndarray, offset: Dims, stride: Dims, out: Dims) -> np.ndarray:
    """The view ``x[..., offset + o * stride]`` over the last ``len(offset)`` dims, for every
    output position ``o`` (a strided slice: one kernel tap of every window at once)."""
    return x[(slice(None),) * (x.ndim - len(offset)) + tuple(
        slice(b, b + (n - 1) * s + 1, s) for b, s, n in zip(offset, stride, out))]
