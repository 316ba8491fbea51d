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
from burnish.backend.interpolation import taps
from burnish.dtype import float64

Dims = tuple[int, ...]


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
    for index, weight in taps(mode, size, out, align_corners, opmath):
        np.add.at(matrix, (rows, index), weight.astype(np.float64))
    return matrix
