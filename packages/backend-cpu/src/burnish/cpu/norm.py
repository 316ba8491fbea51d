"""Layer normalisation on the CPU, in compiled C: each row's mean, variance and normalised,
scaled and shifted values in one visit while the row is in the cache.

The protocol's composition is nine passes over the tensor (two means, a subtraction, a square,
the epsilon, a square root and three broadcast products and sums), each a launch; here each
OpenMP thread takes a block of rows, and each row is three vector loops: its sum, the sum of
its squared deviations from the mean (two passes, as the composition: no cancellation), and
``(x - mean) * invstd * weight + bias`` written out.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

SOURCE = r"""
#include <stdint.h>
#include <math.h>

/* out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b over rows of d, x and out plain. */
#define LAYER_NORM(NAME, T, SQRT)                                                            \
void NAME(const T *x, const T *w, const T *b, int64_t rows, int64_t d, T eps, T *out) {      \
    _Pragma("omp parallel for schedule(static) if (rows * d >= 32768)")                     \
    for (int64_t r = 0; r < rows; r++) {                                                     \
        const T *src = x + r * d;                                                            \
        T *dst = out + r * d;                                                                \
        T total = 0, squares = 0;                                                            \
        _Pragma("omp simd reduction(+:total)")                                              \
        for (int64_t j = 0; j < d; j++) total += src[j];                                     \
        T mean = total / (T)d;                                                               \
        _Pragma("omp simd reduction(+:squares)")                                            \
        for (int64_t j = 0; j < d; j++) {                                                    \
            T c = src[j] - mean;                                                             \
            squares += c * c;                                                                \
        }                                                                                    \
        T invstd = (T)1 / SQRT(squares / (T)d + eps);                                        \
        _Pragma("omp simd")                                                                 \
        for (int64_t j = 0; j < d; j++) dst[j] = (src[j] - mean) * invstd * w[j] + b[j];     \
    }                                                                                        \
}

LAYER_NORM(burnish_layer_norm_f32, float, sqrtf)
LAYER_NORM(burnish_layer_norm_f64, double, sqrt)
"""

_I64 = ctypes.c_int64
_P = ctypes.c_void_p


class NativeNorm:
    """The compiled layer normalisation of ``SOURCE``, for float32 and float64."""

    dtypes = frozenset({"float32", "float64"})

    def __init__(self, compiler: Any) -> None:
        library = compiler.build(SOURCE)
        self.entries: dict[str, Any] = {}
        for dtype, suffix, scalar in (("float32", "f32", ctypes.c_float),
                                      ("float64", "f64", ctypes.c_double)):
            function = getattr(library, f"burnish_layer_norm_{suffix}")
            function.argtypes = [_P, _P, _P, _I64, _I64, scalar, _P]
            function.restype = None
            self.entries[dtype] = function
        self.library = library  # kept loaded while the entries may run

    def layer_norm(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray, out: np.ndarray,
                   epsilon: float) -> None:
        """``out`` from ``x`` (both contiguous ``[rows, d]``), ``weight`` and ``bias``
        (contiguous ``[d]``), normalised over each row."""
        rows, d = x.shape
        self.entries[x.dtype.name](x.ctypes.data, weight.ctypes.data, bias.ctypes.data, rows,
                                   d, epsilon, out.ctypes.data)
