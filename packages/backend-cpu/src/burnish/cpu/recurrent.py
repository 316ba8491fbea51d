"""Recurrent layers on the CPU: a whole LSTM or GRU layer (every time step) in one call.

The protocol's default runs a layer as a product and a cell kernel per time step: two launches
and their bookkeeping per step, which for the small products of a recurrent layer cost more
than the arithmetic. Here one C function walks the steps: each OpenMP thread owns a block of
hidden units, multiplies the previous hidden state by its units' columns of the recurrent
weights (every gate's, single-threaded BLAS calls) and applies the cell to its units at once,
while the products are in the cache; the threads meet once per step, for the next hidden state.
Layers whose steps are small run on one thread (a meeting would cost more than the step).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from burnish.jit.codegen.cpu import vector_math_declarations

#: Multiply-adds per step below which a layer runs on one thread: the threads meet once per
#: step, and a meeting costs more than a step's product below a few million multiply-adds
#: (measured: an LSTM layer of 128 units, batch 8, 32 steps took 0.7 ms on one thread and
#: 9 ms on two).
MIN_PARALLEL_MACS = 1 << 23

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <omp.h>

#define RECURRENT(NAME, T, I, EXP, TANH)                                                      \
typedef void (*NAME##_gemm)(int, int, int, I, I, I, T, const T *, I, const T *, I, T, T *, I); \
                                                                                             \
/* Rows of a [batch, hidden] state with strides ss into contiguous dst. */                   \
static void NAME##_gather(const T *src, const int64_t *ss, int64_t batch, int64_t hidden,    \
                          T *dst) {                                                          \
    for (int64_t b = 0; b < batch; b++)                                                      \
        for (int64_t j = 0; j < hidden; j++) dst[b * hidden + j] = src[b * ss[0] + j * ss[1]]; \
}                                                                                            \
                                                                                             \
/* gates = 4 (LSTM) or 3 (GRU). x [seq, batch, gates * hidden] (strides xs), w [hidden,       \
   gates * hidden] (row-major with rows ldw apart, or transposed: tw), bias [gates * hidden]   \
   (stride bs) or NULL (GRU only), h0/c0 [batch, hidden] (strides hs/cs; c0 LSTM only); out    \
   [seq, batch, hidden], last_h and last_c [batch, hidden], all contiguous. Each thread owns   \
   the units [j0, j1): its columns of every gate are packed side by side ([hidden, gates *     \
   width]), so that a step is one product per thread, then the cell over its units. Returns   \
   nonzero when memory ran out. */                                                           \
int NAME##_layer(void *fn, int gates, int64_t seq, int64_t batch, int64_t hidden,            \
                 const T *x, const int64_t *xs, const T *w, int64_t ldw, int tw,             \
                 const T *bias, int64_t bs, const T *h0, const int64_t *hs, const T *c0,      \
                 const int64_t *cs, int reverse, int threads, T *out, T *last_h,              \
                 T *last_c) {                                                                \
    NAME##_gemm gemm = (NAME##_gemm)fn;                                                      \
    int64_t size = batch * hidden, width_all = gates * hidden;                               \
    T *first = malloc(sizeof(T) * (size ? size : 1));                                        \
    T *cell = malloc(sizeof(T) * (size ? size : 1));                                         \
    T *work = malloc(sizeof(T) * (size ? size * gates : 1));                                 \
    T *packed = malloc(sizeof(T) * (hidden * width_all ? hidden * width_all : 1));            \
    if (!first || !cell || !work || !packed) {                                               \
        free(first); free(cell); free(work); free(packed);                                   \
        return 1;                                                                            \
    }                                                                                        \
    NAME##_gather(h0, hs, batch, hidden, first);                                             \
    if (c0) NAME##_gather(c0, cs, batch, hidden, cell);                                      \
    _Pragma("omp parallel num_threads(threads)")                                            \
    {                                                                                        \
        int id = omp_get_thread_num(), team = omp_get_num_threads();                         \
        int64_t j0 = hidden * id / team, j1 = hidden * (id + 1) / team, width = j1 - j0;      \
        int64_t gw = gates * width;                                                          \
        T *g = work + batch * gates * j0;     /* [batch, gates * width] */                   \
        T *wp = packed + hidden * gates * j0; /* [hidden, gates * width] */                  \
        for (int64_t r = 0; r < hidden; r++)                                                 \
            for (int q = 0; q < gates; q++)                                                  \
                for (int64_t u = 0; u < width; u++) {                                        \
                    int64_t col = q * hidden + j0 + u;                                       \
                    wp[r * gw + q * width + u] = tw ? w[col * ldw + r] : w[r * ldw + col];   \
                }                                                                            \
        T bh[3 * (width ? width : 1)];                                                      \
        for (int q = 0; q < 3 && gates == 3; q++)                                            \
            for (int64_t u = 0; u < width; u++)                                              \
                bh[q * width + u] = bias ? bias[(q * hidden + j0 + u) * bs] : (T)0;          \
        for (int64_t s = 0; s < seq; s++) {                                                  \
            int64_t t = reverse ? seq - 1 - s : s;                                           \
            int64_t before = reverse ? t + 1 : t - 1;                                        \
            const T *h = s ? out + before * size : first;                                    \
            T *y = out + t * size;                                                           \
            if (width > 0)                                                                   \
                gemm(101, 111, 111, (I)batch, (I)gw, (I)hidden, (T)1, h, (I)hidden, wp,       \
                     (I)gw, (T)0, g, (I)gw);                                                 \
            for (int64_t b = 0; b < batch && width > 0; b++) {                              \
                const T *xb = x + t * xs[0] + b * xs[1] + j0 * xs[2];                        \
                const T *gb = g + b * gw;                                                    \
                int64_t at = b * hidden + j0, x2 = xs[2];                                    \
                T *cb = cell + at, *yb = y + at;                                             \
                const T *hb = h + at;                                                        \
                if (gates == 4) {                                                            \
                    _Pragma("omp simd")                                                     \
                    for (int64_t u = 0; u < width; u++) {                                    \
                        T i = (T)1 / ((T)1 + EXP(-(gb[u] + xb[u * x2])));                    \
                        T f = (T)1 / ((T)1 + EXP(-(gb[width + u] +                           \
                                                  xb[(hidden + u) * x2])));                  \
                        T c = TANH(gb[2 * width + u] + xb[(2 * hidden + u) * x2]);           \
                        T o = (T)1 / ((T)1 + EXP(-(gb[3 * width + u] +                       \
                                                  xb[(3 * hidden + u) * x2])));              \
                        T next = f * cb[u] + i * c;                                          \
                        cb[u] = next;                                                        \
                        yb[u] = o * TANH(next);                                              \
                    }                                                                        \
                } else {                                                                     \
                    _Pragma("omp simd")                                                     \
                    for (int64_t u = 0; u < width; u++) {                                    \
                        T r = (T)1 / ((T)1 + EXP(-(xb[u * x2] + gb[u] + bh[u])));            \
                        T z = (T)1 / ((T)1 + EXP(-(xb[(hidden + u) * x2] + gb[width + u] +   \
                                                  bh[width + u])));                          \
                        T n = TANH(xb[(2 * hidden + u) * x2] +                               \
                                   r * (gb[2 * width + u] + bh[2 * width + u]));             \
                        yb[u] = n + z * (hb[u] - n);                                         \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
            _Pragma("omp barrier")                                                          \
        }                                                                                    \
    }                                                                                        \
    int64_t final = reverse ? 0 : seq - 1;                                                   \
    memcpy(last_h, seq ? out + final * size : first, sizeof(T) * size);                      \
    if (last_c) memcpy(last_c, cell, sizeof(T) * size);                                      \
    free(first);                                                                             \
    free(cell);                                                                              \
    free(work);                                                                              \
    free(packed);                                                                            \
    return 0;                                                                                \
}

RECURRENT(burnish_recurrent_f32_i64, float, int64_t, expf, tanhf)
RECURRENT(burnish_recurrent_f64_i64, double, int64_t, exp, tanh)
RECURRENT(burnish_recurrent_f32_i32, float, int32_t, expf, tanhf)
RECURRENT(burnish_recurrent_f64_i32, double, int32_t, exp, tanh)
"""

_I64 = ctypes.c_int64
_P = ctypes.c_void_p
_INT = ctypes.c_int


def _strides(a: np.ndarray) -> np.ndarray:
    return np.array([s // a.itemsize for s in a.strides], np.int64)


def weight_layout(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, bool] | None:
    """How BLAS reads a ``[hidden, gates * hidden]`` weight with element ``strides``: its
    leading dimension and whether it is stored transposed; None where it cannot."""
    rows, cols = shape
    if (cols <= 1 or strides[1] == 1) and strides[0] >= max(1, cols):
        return max(1, strides[0], cols), False
    if (rows <= 1 or strides[0] == 1) and strides[1] >= max(1, rows):
        return max(1, strides[1], rows), True
    return None


class NativeRecurrent:
    """The compiled LSTM and GRU layers of ``SOURCE`` over ``blas.Gemm``'s BLAS functions."""

    def __init__(self, compiler: Any, gemm: Any, threads: int) -> None:
        self.entries: dict[str, tuple[Any, int]] = {}
        self.threads = threads
        if not compiler.openmp or not gemm.available:
            return
        # libmvec's vector exp and tanh for the cell loops, where the compiler has them.
        declarations = vector_math_declarations() if compiler.vector_math else ""
        library = compiler.build(SOURCE.replace("#include <omp.h>\n",
                                                "#include <omp.h>\n" + declarations))
        for dtype, (address, wide) in gemm.pointers().items():
            name = f"burnish_recurrent_{'f32' if dtype == 'float32' else 'f64'}_" \
                   f"{'i64' if wide else 'i32'}_layer"
            layer = getattr(library, name)
            layer.argtypes = [_P, _INT, _I64, _I64, _I64, _P, _P, _P, _I64, _INT, _P, _I64, _P,
                              _P, _P, _P, _INT, _INT, _P, _P, _P]
            layer.restype = ctypes.c_int
            self.entries[dtype] = (layer, address)
        self.library = library  # kept loaded while the entries may run

    def layer(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
              h0: np.ndarray, c0: np.ndarray | None, out: np.ndarray, last_h: np.ndarray,
              last_c: np.ndarray | None, reverse: bool) -> None:
        """An LSTM layer (``c0`` given) or a GRU layer (``c0`` None) over ``x`` ``[seq, batch,
        gates * hidden]``; ``out``, ``last_h``, ``last_c`` contiguous."""
        layer, gemm = self.entries[out.dtype.name]
        seq, batch, width = x.shape
        hidden = h0.shape[1]
        gates = 4 if c0 is not None else 3
        ldw, transposed = weight_layout(weight.shape, _strides(weight))  # type: ignore[misc]
        keep = [_strides(x), _strides(h0), _strides(c0) if c0 is not None else None]
        threads = self.threads if batch * width * hidden >= MIN_PARALLEL_MACS else 1
        threads = max(1, min(threads, hidden))
        failed = layer(gemm, gates, seq, batch, hidden, x.ctypes.data, keep[0].ctypes.data,
                       weight.ctypes.data, ldw, int(transposed),
                       None if bias is None else bias.ctypes.data,
                       0 if bias is None else bias.strides[0] // bias.itemsize,
                       h0.ctypes.data, keep[1].ctypes.data,
                       None if c0 is None else c0.ctypes.data,
                       None if keep[2] is None else keep[2].ctypes.data, int(reverse), threads,
                       out.ctypes.data, last_h.ctypes.data,
                       None if last_c is None else last_c.ctypes.data)
        if failed:
            raise MemoryError("cpu backend: no memory for a recurrent layer's state")
        del keep
