"""The backward rule of ``interpolate``: resizing is separable and linear, one matrix per dim.

Along each spatial dim the output is ``matrix @ input`` with a ``[out, in]`` matrix holding the
mode's weights (one 1 per row for nearest, two taps for bilinear, four for bicubic, border taps
clamped onto the border element). The matrices are built from the protocol's definition of each
mode, PyTorch's formulas, computed in the same precision as PyTorch computes them, so the taps
agree with any backend that follows the protocol. The gradient is the product with each matrix's
transpose in turn.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from burnish.autodiff.inner_math import along_axis, constant
from burnish.dtype import float64

Dims = tuple[int, ...]

#: The bicubic kernel's parameter (Keys' a, as PyTorch uses).
CUBIC_A = -0.75


def interpolate_backward(b: Any, dtype, g: Any, x_shape: Dims, mode: str,
                         align_corners: bool) -> tuple[Any]:
    """Gradient of ``interpolate(x, size, mode, align_corners)`` with respect to ``x``."""
    opmath = np.dtype(np.float64 if dtype is float64 else np.float32)
    for d, (n, out) in enumerate(zip(x_shape[2:], g.shape[2:])):
        matrix = resize_matrix(n, out, mode, align_corners, opmath)
        g = along_axis(b, g, 2 + d, constant(b, matrix, dtype, g))
    return (g,)


def resize_matrix(size: int, out: int, mode: str, align_corners: bool, opmath: np.dtype
                  ) -> np.ndarray:
    """``[out, size]``: output ``i`` along one dim is row ``i`` times the input."""
    matrix = np.zeros((out, size))
    rows = np.arange(out)
    if mode == "nearest":
        matrix[rows, _nearest(size, out)] = 1.0
        return matrix
    if mode == "bilinear":
        taps = _linear_taps(size, out, align_corners, opmath)
    elif mode == "bicubic":
        taps = _cubic_taps(size, out, align_corners, opmath)
    else:
        raise ValueError(f"interpolate: unknown mode {mode!r}")
    for index, weight in taps:
        np.add.at(matrix, (rows, index), weight.astype(np.float64))
    return matrix


def _nearest(size: int, out: int) -> np.ndarray:
    """PyTorch's legacy nearest: ``min(floor(i * scale), size - 1)``, ``scale = size / out``,
    all in float32."""
    scale = np.float32(size) / np.float32(out)
    source = np.arange(out, dtype=np.float32) * scale
    return np.minimum(np.floor(source).astype(np.int64), size - 1)


def _source(size: int, out: int, align_corners: bool, opmath: np.dtype, cubic: bool
            ) -> np.ndarray:
    """PyTorch's ``area_pixel_compute_source_index`` for each output index."""
    dst = np.arange(out, dtype=opmath)
    if align_corners:
        scale = opmath.type(size - 1) / opmath.type(out - 1) if out > 1 else opmath.type(0)
        return dst * scale
    scale = opmath.type(size) / opmath.type(out)
    half = opmath.type(0.5)
    src = scale * (dst + half) - half
    return src if cubic else np.maximum(src, opmath.type(0))


def _split(src: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The integer part (at most ``size - 1``) and the fraction clamped to [0, 1]."""
    index = np.minimum(np.floor(src).astype(np.int64), size - 1)
    return index, np.clip(src - index.astype(src.dtype), 0, 1)


def _linear_taps(size: int, out: int, align_corners: bool, opmath: np.dtype) -> list:
    index, fraction = _split(_source(size, out, align_corners, opmath, False), size)
    return [(index, 1 - fraction), (np.minimum(index + 1, size - 1), fraction)]


def _cubic_taps(size: int, out: int, align_corners: bool, opmath: np.dtype) -> list:
    index, t = _split(_source(size, out, align_corners, opmath, True), size)
    a = opmath.type(CUBIC_A)
    near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1
    far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    return [(np.clip(index - 1 + j, 0, size - 1), w) for j, w in enumerate(weights)]
