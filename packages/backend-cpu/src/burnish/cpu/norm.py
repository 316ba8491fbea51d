"""Layer normalisation on the CPU, in compiled C: each row's mean, variance and normalised,
scaled and shifted values in one visit while the row is in the cache.

The protocol's composition is nine passes over the tensor (two means, a subtraction, a square,
the epsilon, a square root and three broadcast products and sums), each a launch; here each
thread (``burnish.cpu.threads``) takes a block of rows, and each row is three vector loops:
its sum, the sum of its squared deviations from the mean (two passes, as the composition: no
cancellation), and ``(x - mean) * invstd * weight + bias`` written out (and the row's
statistics, where autodiff keeps them). The backward is one visit per row too: the row's two
sums for ``dx``, then ``dx``, while the weight's and the bias's gradients gather in per-run
column sums.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from burnish.jit.codegen.cpu import PARALLEL_HEADER

SOURCE = PARALLEL_HEADER + r"""
#include <stdint.h>
#include <stdlib.h>
#include <math.h>

/* out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b over rows of d, x and out plain;
   each row's mean and 1 / sqrt(var + eps) also into means and invstds where given. */
#define LAYER_NORM(NAME, T, SQRT)                                                            \
struct NAME##_args {                                                                         \
    const T *x, *w, *b;                                                                      \
    int64_t d;                                                                               \
    T eps, *out, *means, *invstds;                                                           \
};                                                                                           \
                                                                                             \
static void NAME##_range(void *context, int64_t begin, int64_t end) {                       \
    const struct NAME##_args *a = context;                                                   \
    const T *x = a->x, *w = a->w, *b = a->b;                                                 \
    int64_t d = a->d;                                                                        \
    T eps = a->eps, *out = a->out, *means = a->means, *invstds = a->invstds;                 \
    for (int64_t r = begin; r < end; r++) {                                                  \
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
        if (means) { means[r] = mean; invstds[r] = invstd; }                                 \
        _Pragma("omp simd")                                                                 \
        for (int64_t j = 0; j < d; j++) dst[j] = (src[j] - mean) * invstd * w[j] + b[j];     \
    }                                                                                        \
}                                                                                            \
                                                                                             \
void NAME(const T *x, const T *w, const T *b, int64_t rows, int64_t d, T eps, T *out,        \
          T *means, T *invstds) {                                                            \
    struct NAME##_args a = {x, w, b, d, eps, out, means, invstds};                           \
    burnish_parallel(NAME##_range, &a, rows, burnish_parts(rows * d >= 32768));              \
}

/* The gradients of LAYER_NORM's out contracted with grad, from each row's mean and invstd:
   with xhat = (x - mean) * invstd and g = grad * w, dx = invstd * (g - mean(g) - xhat *
   mean(g * xhat)) row by row; dw and db are the column sums of grad * xhat and grad. The
   rows are cut into CHUNKS runs whatever the thread count (each run's column sums in a
   scratch row of its own, added up in order at the end), so that the sums do not depend
   on the threads. */
#define CHUNKS 16
#define LAYER_NORM_BACKWARD(NAME, T)                                                         \
struct NAME##_args {                                                                         \
    const T *x, *w, *means, *invstds, *grad;                                                 \
    int64_t rows, d, chunks;                                                                 \
    T *dx, *partial;                                                                         \
};                                                                                           \
                                                                                             \
static void NAME##_range(void *context, int64_t begin, int64_t end) {                       \
    const struct NAME##_args *a = context;                                                   \
    const T *x = a->x, *w = a->w, *means = a->means, *invstds = a->invstds, *grad = a->grad; \
    int64_t rows = a->rows, d = a->d, chunks = a->chunks;                                    \
    T *dx = a->dx, *partial = a->partial;                                                    \
    for (int64_t c = begin; c < end; c++) {                                                  \
        T *pw = partial + 2 * c * d, *pb = pw + d;                                           \
        for (int64_t r = rows * c / chunks; r < rows * (c + 1) / chunks; r++) {              \
            const T *xr = x + r * d, *gr = grad + r * d;                                     \
            T *dr = dx + r * d;                                                              \
            T mean = means[r], invstd = invstds[r], sg = 0, sgx = 0;                         \
            _Pragma("omp simd reduction(+:sg, sgx)")                                        \
            for (int64_t j = 0; j < d; j++) {                                                \
                T xhat = (xr[j] - mean) * invstd, g = gr[j] * w[j];                          \
                sg += g;                                                                     \
                sgx += g * xhat;                                                             \
                pw[j] += gr[j] * xhat;                                                       \
                pb[j] += gr[j];                                                              \
            }                                                                                \
            T mg = sg / (T)d, mgx = sgx / (T)d;                                              \
            _Pragma("omp simd")                                                             \
            for (int64_t j = 0; j < d; j++) {                                                \
                T xhat = (xr[j] - mean) * invstd, g = gr[j] * w[j];                          \
                dr[j] = (g - mg - xhat * mgx) * invstd;                                      \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
}                                                                                            \
                                                                                             \
void NAME(const T *x, const T *w, const T *means, const T *invstds, const T *grad,            \
          int64_t rows, int64_t d, T *dx, T *dw, T *db) {                                    \
    int64_t chunks = rows < CHUNKS ? (rows > 0 ? rows : 1) : CHUNKS;                         \
    T *partial = calloc((size_t)(2 * chunks * d), sizeof(T));                                \
    struct NAME##_args a = {x, w, means, invstds, grad, rows, d, chunks, dx, partial};       \
    burnish_parallel(NAME##_range, &a, chunks, burnish_parts(rows * d >= 32768));            \
    for (int64_t j = 0; j < d; j++) {                                                        \
        T sw = 0, sb = 0;                                                                    \
        for (int64_t c = 0; c < chunks; c++) {                                               \
            sw += partial[2 * c * d + j];                                                    \
            sb += partial[2 * c * d + d + j];                                                \
        }                                                                                    \
        dw[j] = sw;                                                                          \
        db[j] = sb;                                                                          \
    }                                                                                        \
    free(partial);                                                                           \
}

LAYER_NORM(burnish_layer_norm_f32, float, sqrtf)
LAYER_NORM(burnish_layer_norm_f64, double, sqrt)
LAYER_NORM_BACKWARD(burnish_layer_norm_backward_f32, float)
LAYER_NORM_BACKWARD(burnish_layer_norm_backward_f64, double)
"""

_I64 = ctypes.c_int64
_P = ctypes.c_void_p


class NativeNorm:
    """The compiled layer normalisation of ``SOURCE`` and its gradients, for float32 and
    float64."""

    dtypes = frozenset({"float32", "float64"})

    def __init__(self, compiler: Any) -> None:
        library = compiler.build(SOURCE)
        self.entries: dict[str, Any] = {}
        self.backward_entries: dict[str, Any] = {}
        for dtype, suffix, scalar in (("float32", "f32", ctypes.c_float),
                                      ("float64", "f64", ctypes.c_double)):
            function = getattr(library, f"burnish_layer_norm_{suffix}")
            function.argtypes = [_P, _P, _P, _I64, _I64, scalar, _P, _P, _P]
            function.restype = None
            self.entries[dtype] = function
            function = getattr(library, f"burnish_layer_norm_backward_{suffix}")
            function.argtypes = [_P] * 5 + [_I64, _I64] + [_P] * 3
            function.restype = None
            self.backward_entries[dtype] = function
        self.library = library  # kept loaded while the entries may run

    def layer_norm(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray, out: np.ndarray,
                   epsilon: float, mean: np.ndarray | None = None,
                   invstd: np.ndarray | None = None) -> None:
        """``out`` from ``x`` (both contiguous ``[rows, d]``), ``weight`` and ``bias``
        (contiguous ``[d]``), normalised over each row; each row's mean and ``1 / sqrt(var +
        epsilon)`` into ``mean`` and ``invstd`` (contiguous, ``rows`` elements) where given."""
        self.bind_layer_norm(x, weight, bias, out, epsilon, mean, invstd)()

    def bind_layer_norm(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray,
                        out: np.ndarray, epsilon: float, mean: np.ndarray | None = None,
                        invstd: np.ndarray | None = None) -> Callable[[], None]:
        """``layer_norm`` of these arrays as a call of no arguments (a replay's: its C
        arguments converted once)."""
        rows, d = x.shape
        stats = (None, None) if mean is None or invstd is None else (mean.ctypes.data,
                                                                      invstd.ctypes.data)
        call = functools.partial(self.entries[x.dtype.name], x.ctypes.data, weight.ctypes.data,
                                 bias.ctypes.data, rows, d, epsilon, out.ctypes.data, *stats)
        call.keep = (x, weight, bias, out, mean, invstd)  # type: ignore[attr-defined]
        return call

    def layer_norm_backward(self, x: np.ndarray, weight: np.ndarray, mean: np.ndarray,
                            invstd: np.ndarray, grad: np.ndarray, dx: np.ndarray,
                            dweight: np.ndarray, dbias: np.ndarray) -> None:
        """``dx`` (``[rows, d]``), ``dweight`` and ``dbias`` (``[d]``) of ``layer_norm``'s
        output contracted with ``grad``, from ``x``, ``weight`` and the row statistics it
        gave; every array contiguous."""
        rows, d = x.shape
        self.backward_entries[x.dtype.name](
            x.ctypes.data, weight.ctypes.data, mean.ctypes.data, invstd.ctypes.data,
            grad.ctypes.data, rows, d, dx.ctypes.data, dweight.ctypes.data, dbias.ctypes.data)
