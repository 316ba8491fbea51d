"""Max pooling on the CPU in compiled C: the forward pass a chunk of a plane's outputs at a
time, the backward pass one scatter per plane.

The forward pass walks a window's taps in row-major order, each tap over many outputs at once:
the inner loop is a load, a compare and two selects per output, which the compiler vectorizes,
where a loop over each output's own window (the first C version) spent its time in index
arithmetic and mispredicted branches. Where no window reaches the padding or past the input
(the usual pooling), the outputs are a chunk of the whole plane, whatever its lines' lengths
(a 7-wide line fills no AVX-512 vector), and each tap gathers through a table of the outputs'
offsets made once per call; otherwise a line of outputs at a time, with the outputs whose tap
falls in the padding left out. Indices are kept in 32 bits while a chunk is worked on
(``NativePool.max_plane`` elements a plane at most), written out as int64. Without indices
(inference), at stride 2 along contiguous lines (ResNet's stem pooling), each input line is
split once into its even and odd columns, -inf past its ends, so that every tap is a
contiguous run of compares and selects instead of a strided one with index bookkeeping.

The backward pass (the protocol's ``max_pool_backward``) writes each plane of the input's
gradient once: zeros, then each output's gradient added at its max's index, while the plane is
in the cache. The composition it replaces (zeros, then ``scatter_add``, which copies its input
before adding) went through the whole gradient three times.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from burnish.jit.codegen.cpu import PARALLEL_HEADER

SOURCE = PARALLEL_HEADER + r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Max pooling of every (sample, channel) plane, with the flat spatial index of each max (the
   first one, a NaN over any number, the last NaN; a window wholly in the padding gives 0 at
   index 0). g: burnish.cpu.conv.geometry's words. */
#define LINE 64
#define LINE2 (LINE + 16)
#define CHUNK 256

#define MAX_POOL(NAME, T, U)                                                                   \
/* One tap of a window over outputs [lo, hi) of a chunk starting at output c: a strided      \
   load, compares and selects, on arrays of the thread's stack that nothing else aliases. */ \
static inline void NAME##_tap(const T *restrict row, int64_t stride, int64_t step,           \
                              int64_t b, int32_t flat, int64_t c, int64_t lo, int64_t hi,    \
                              T *restrict best, int32_t *restrict where) {                   \
    for (int64_t o = lo; o < hi; o++) {                                                      \
        int64_t i = o * step + b;                                                            \
        T v = row[i * stride], m = best[o - c];                                              \
        int take = (where[o - c] < 0) | (v > m) | (v != v);                                  \
        /* Selected by masks, not branches: the comparisons of random data mispredict. */   \
        U vb, mb, keep = (U)0 - (U)take;                                                     \
        memcpy(&vb, &v, sizeof vb);                                                          \
        memcpy(&mb, &m, sizeof mb);                                                          \
        vb = (vb & keep) | (mb & ~keep);                                                     \
        memcpy(&best[o - c], &vb, sizeof vb);                                                \
        int32_t pick = -take;                                                                \
        where[o - c] = ((flat + (int32_t)i) & pick) | (where[o - c] & ~pick);               \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* The same without indices (the forward pass of inference): best starts as -inf, a NaN    \
   wins and stays. */                                                                        \
static inline void NAME##_tap_value(const T *restrict row, int64_t stride, int64_t step,     \
                                    int64_t b, int64_t c, int64_t lo, int64_t hi,            \
                                    T *restrict best) {                                      \
    for (int64_t o = lo; o < hi; o++) {                                                      \
        T v = row[(o * step + b) * stride], m = best[o - c];                                 \
        best[o - c] = (v > m) | (v != v) ? v : m;                                            \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* One tap over a chunk of n outputs anywhere in the plane: output j reads xp[at[j] + shift]  \
   (a gather) and its index is flat[j] + flat_shift; the first tap only sets. */            \
static inline void NAME##_gather(const T *restrict xp, const int32_t *restrict at,           \
                                 const int32_t *restrict flat, int32_t shift,                \
                                 int32_t flat_shift, int64_t n, int first,                   \
                                 T *restrict best, int32_t *restrict where) {                \
    if (first) {                                                                             \
        for (int64_t j = 0; j < n; j++) {                                                    \
            best[j] = xp[at[j] + shift];                                                     \
            where[j] = flat[j] + flat_shift;                                                 \
        }                                                                                    \
        return;                                                                              \
    }                                                                                        \
    for (int64_t j = 0; j < n; j++) {                                                        \
        T v = xp[at[j] + shift], m = best[j];                                                \
        int take = (v > m) | (v != v);                                                       \
        best[j] = take ? v : m;                                                              \
        where[j] = take ? flat[j] + flat_shift : where[j];                                   \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* A call's arguments, shared by its parallel ranges of planes. */                           \
struct NAME##_args {                                                                         \
    const int64_t *g;                                                                        \
    const T *x;                                                                              \
    int64_t xsb, xsc, channels;                                                              \
    T *out;                                                                                  \
    int64_t *index;                                                                          \
    int32_t *at, *flat;                                                                      \
    int64_t *first, *last;                                                                   \
    const char *covered; /* the general case's: whether any tap of a line reads output o's */ \
    int64_t spread;                                                                          \
    int all_covered, split;                                                                  \
};                                                                                           \
                                                                                             \
/* Planes [begin, end) of NAME##_inside. */                                                  \
static void NAME##_inside_planes(void *context, int64_t begin, int64_t end) {                \
    const struct NAME##_args *a = context;                                                   \
    const int64_t *g = a->g, *in = g, *os = g + 3, *k = g + 6, *d = g + 15, *xs = g + 18;    \
    int64_t positions = os[0] * os[1] * os[2], xsb = a->xsb, xsc = a->xsc;                   \
    int64_t channels = a->channels;                                                          \
    const T *x = a->x;                                                                       \
    T *out = a->out;                                                                         \
    int64_t *index = a->index;                                                               \
    int32_t *at = a->at, *flat = a->flat;                                                    \
    for (int64_t plane = begin; plane < end; plane++) {                                      \
        const T *xp = x + (plane / channels) * xsb + (plane % channels) * xsc;              \
        T best[CHUNK];                                                                       \
        int32_t where[CHUNK];                                                                \
        for (int64_t c = 0; c < positions; c += CHUNK) {                                     \
            int64_t n = positions - c < CHUNK ? positions - c : CHUNK;                       \
            int first = 1;                                                                   \
            for (int64_t t0 = 0; t0 < k[0]; t0++)                                            \
            for (int64_t t1 = 0; t1 < k[1]; t1++)                                            \
            for (int64_t t2 = 0; t2 < k[2]; t2++) {                                          \
                int64_t r0 = t0 * d[0], r1 = t1 * d[1], r2 = t2 * d[2];                      \
                NAME##_gather(xp, at + c, flat + c,                                          \
                              (int32_t)(r0 * xs[0] + r1 * xs[1] + r2 * xs[2]),               \
                              (int32_t)((r0 * in[1] + r1) * in[2] + r2), n, first, best,     \
                              where);                                                        \
                first = 0;                                                                   \
            }                                                                                \
            T *o = out + plane * positions + c;                                              \
            for (int64_t j = 0; j < n; j++) o[j] = best[j];                                  \
            if (index) {                                                                     \
                int64_t *w = index + plane * positions + c;                                  \
                for (int64_t j = 0; j < n; j++) w[j] = where[j];                             \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* Every window inside the input (no padding, no window past the end): the plane's outputs   \
   in chunks of CHUNK, whatever their lines' lengths, each tap a gather at a table of the     \
   outputs' offsets plus the tap's. */                                                       \
static int NAME##_inside(const int64_t *g, const T *x, int64_t xsb, int64_t xsc,             \
                         int64_t planes, int64_t channels, T *out, int64_t *index,           \
                         int64_t work) {                                                     \
    const int64_t *in = g, *os = g + 3, *k = g + 6, *s = g + 9, *d = g + 15, *xs = g + 18;   \
    int64_t positions = os[0] * os[1] * os[2];                                               \
    int32_t *at = malloc(sizeof(int32_t) * 2 * positions), *flat = at + positions;           \
    if (!at) return 1;                                                                       \
    for (int64_t o0 = 0, j = 0; o0 < os[0]; o0++)                                            \
    for (int64_t o1 = 0; o1 < os[1]; o1++)                                                   \
    for (int64_t o2 = 0; o2 < os[2]; o2++, j++) {                                            \
        int64_t q0 = o0 * s[0], q1 = o1 * s[1], q2 = o2 * s[2];                              \
        at[j] = (int32_t)(q0 * xs[0] + q1 * xs[1] + q2 * xs[2]);                             \
        flat[j] = (int32_t)((q0 * in[1] + q1) * in[2] + q2);                                 \
    }                                                                                        \
    struct NAME##_args a = {g, x, xsb, xsc, channels, out, index, at, flat, NULL, NULL};     \
    burnish_parallel(NAME##_inside_planes, &a, planes, burnish_parts(work >= 65536));        \
    free(at);                                                                                \
    return 0;                                                                                \
}                                                                                            \
                                                                                             \
/* Planes [begin, end) of the general case, a line of outputs at a time. */                  \
static void NAME##_line_planes(void *context, int64_t begin, int64_t end) {                  \
    const struct NAME##_args *a = context;                                                   \
    const int64_t *g = a->g, *in = g, *os = g + 3, *k = g + 6, *s = g + 9, *p = g + 12;      \
    const int64_t *d = g + 15, *xs = g + 18;                                                 \
    int64_t positions = os[0] * os[1] * os[2], xsb = a->xsb, xsc = a->xsc;                   \
    int64_t channels = a->channels;                                                          \
    const T *x = a->x;                                                                       \
    T *out = a->out;                                                                         \
    int64_t *index = a->index, *first = a->first, *last = a->last;                          \
    const char *covered = a->covered;                                                        \
    int64_t spread = a->spread;                                                              \
    int all_covered = a->all_covered, split = a->split;                                      \
    for (int64_t plane = begin; plane < end; plane++) {                                      \
        const T *xp = x + (plane / channels) * xsb + (plane % channels) * xsc;              \
        T best[LINE], half[2 * LINE2];                                                       \
        int32_t where[LINE];                                                                 \
        for (int64_t o0 = 0; o0 < os[0]; o0++)                                               \
        for (int64_t o1 = 0; o1 < os[1]; o1++)                                               \
        for (int64_t c = 0; c < os[2]; c += LINE) {                                          \
            int64_t n = os[2] - c < LINE ? os[2] - c : LINE;                                 \
            int seen = 0; /* without indices: whether any tap of the row is inside */         \
            for (int64_t j = 0; j < n; j++) {                                                \
                best[j] = index ? (T)0 : -(T)INFINITY;                                       \
                where[j] = -1;                                                               \
            }                                                                                \
            for (int64_t t0 = 0; t0 < k[0]; t0++) {                                          \
                int64_t q0 = o0 * s[0] - p[0] + t0 * d[0];                                   \
                if (q0 < 0 || q0 >= in[0]) continue;                                         \
                for (int64_t t1 = 0; t1 < k[1]; t1++) {                                      \
                    int64_t q1 = o1 * s[1] - p[1] + t1 * d[1];                               \
                    if (q1 < 0 || q1 >= in[1]) continue;                                     \
                    const T *row = xp + q0 * xs[0] + q1 * xs[1];                             \
                    int64_t flat = (q0 * in[1] + q1) * in[2];                                \
                    if (split) { /* the line's inputs from 2c - p2 on, -inf past its ends, as \
                                    even and odd columns: each tap a contiguous run */       \
                        for (int r = 0; r < 2; r++) {                                        \
                            /* j reads column 2 (c + j) + r - p2: inside for j in [jlo, jhi) */ \
                            int64_t base = 2 * c + r - p[2], jlo = base >= 0 ? 0 : (1 - base) / 2; \
                            int64_t jhi = in[2] - base <= 0 ? 0 : (in[2] - base + 1) / 2;    \
                            T *restrict hr = half + r * LINE2;                               \
                            if (jhi > n + spread) jhi = n + spread;                          \
                            if (jlo > jhi) jlo = jhi;                                        \
                            for (int64_t j = 0; j < jlo; j++) hr[j] = -(T)INFINITY;          \
                            for (int64_t j = jlo; j < jhi; j++) hr[j] = row[2 * j + base];   \
                            for (int64_t j = jhi; j < n + spread; j++) hr[j] = -(T)INFINITY; \
                        }                                                                    \
                    }                                                                        \
                    for (int64_t t2 = 0; t2 < k[2]; t2++) {                                  \
                        int64_t b = t2 * d[2] - p[2];                                        \
                        int64_t lo = first[t2] > c ? first[t2] : c;                          \
                        int64_t hi = last[t2] < c + n ? last[t2] : c + n;                    \
                        if (!index) {                                                        \
                            seen = 1;                                                        \
                            if (split) { /* tap t2 reads half[t2 * d2 % 2] at t2 * d2 / 2 */ \
                                const T *h = half + (t2 * d[2] % 2) * LINE2 + t2 * d[2] / 2; \
                                for (int64_t j = 0; j < n; j++) {                            \
                                    T v = h[j], m = best[j];                                 \
                                    best[j] = (v > m) | (v != v) ? v : m;                    \
                                }                                                            \
                            } else {                                                         \
                                NAME##_tap_value(row, xs[2], s[2], b, c, lo, hi, best);      \
                            }                                                                \
                        } else if (xs[2] == 1 && s[2] == 2)                                  \
                            NAME##_tap(row, 1, 2, b, flat, c, lo, hi, best, where);          \
                        else if (xs[2] == 1)                                                 \
                            NAME##_tap(row, 1, s[2], b, flat, c, lo, hi, best, where);       \
                        else                                                                 \
                            NAME##_tap(row, xs[2], s[2], b, flat, c, lo, hi, best, where);   \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
            int64_t at = (o0 * os[1] + o1) * os[2] + c;                                      \
            T *o = out + plane * positions + at;                                             \
            if (!index && !(seen && all_covered)) /* a window wholly in the padding: 0 */    \
                for (int64_t j = 0; j < n; j++) o[j] = seen && covered[c + j] ? best[j] : 0; \
            else                                                                             \
                for (int64_t j = 0; j < n; j++) o[j] = best[j];                              \
            if (index) {                                                                     \
                int64_t *w = index + plane * positions + at;                                 \
                for (int64_t j = 0; j < n; j++) w[j] = where[j] < 0 ? 0 : where[j];          \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
}                                                                                            \
                                                                                             \
int NAME(const int64_t *g, const T *x, int64_t xsb, int64_t xsc, int64_t batch,              \
         int64_t channels, T *out, int64_t *index) {                                         \
    const int64_t *in = g, *os = g + 3, *k = g + 6, *s = g + 9, *p = g + 12, *d = g + 15;     \
    const int64_t *xs = g + 18;                                                              \
    int64_t positions = os[0] * os[1] * os[2], planes = batch * channels;                    \
    int64_t work = planes * positions * k[0] * k[1] * k[2], reach = 0;                       \
    int inside = positions > 0 && k[0] * k[1] * k[2] > 0;                                    \
    for (int i = 0; i < 3; i++) {                                                            \
        inside &= p[i] == 0 && (os[i] - 1) * s[i] + (k[i] - 1) * d[i] < in[i] && xs[i] >= 0;  \
        reach += (in[i] - 1) * xs[i];                                                        \
    }                                                                                        \
    if (inside && reach <= INT32_MAX)                                                        \
        return NAME##_inside(g, x, xsb, xsc, planes, channels, out, index, work);            \
    /* Per tap of the last dim, the outputs [first, last) that read inside the line:         \
       o * s + b in [0, in) (divisions worked out once, not per line). */                    \
    int64_t *first = malloc(sizeof(int64_t) * 2 * k[2] + os[2]), *last = first + k[2];      \
    if (!first) return 1;                                                                    \
    char *covered = (char *)(last + k[2]); /* whether any tap of the line reads output o's */ \
    memset(covered, 0, os[2]);                                                               \
    for (int64_t t2 = 0; t2 < k[2]; t2++) {                                                  \
        int64_t b = t2 * d[2] - p[2];                                                        \
        first[t2] = b >= 0 ? 0 : (-b + s[2] - 1) / s[2];                                     \
        last[t2] = in[2] - 1 - b < 0 ? 0 : (in[2] - 1 - b) / s[2] + 1;                       \
        for (int64_t o = first[t2]; o < last[t2] && o < os[2]; o++) covered[o] = 1;          \
    }                                                                                        \
    int all_covered = 1;                                                                     \
    for (int64_t o = 0; o < os[2]; o++) all_covered &= covered[o];                           \
    /* Values alone at stride 2 along contiguous lines (a stem's pooling): each line's      \
       inputs split into even and odd columns once, for taps that reach LINE2 - LINE past. */  \
    int64_t spread = (k[2] - 1) * d[2] / 2 + 1;                                              \
    int split = !index && xs[2] == 1 && s[2] == 2 && spread <= LINE2 - LINE;                 \
    struct NAME##_args a = {g, x, xsb, xsc, channels, out, index, NULL, NULL, first, last,  \
                            covered, spread, all_covered, split};                            \
    burnish_parallel(NAME##_line_planes, &a, planes, burnish_parts(work >= 65536));          \
    free(first);                                                                             \
    return 0;                                                                                \
}

/* The input's gradient of max pooling: per plane, zeros with grad[q] added at index[q]
   (grad and index contiguous [planes, positions], out [planes, size]); an index outside the
   plane is skipped. */
#define MAX_POOL_BACKWARD(NAME, T)                                                            \
struct NAME##_args {                                                                         \
    const T *grad;                                                                           \
    const int64_t *index;                                                                    \
    int64_t positions, size;                                                                 \
    T *out;                                                                                  \
};                                                                                           \
                                                                                             \
static void NAME##_planes(void *context, int64_t begin, int64_t end) {                       \
    const struct NAME##_args *a = context;                                                   \
    const T *grad = a->grad;                                                                 \
    const int64_t *index = a->index;                                                         \
    int64_t positions = a->positions, size = a->size;                                        \
    T *out = a->out;                                                                         \
    for (int64_t plane = begin; plane < end; plane++) {                                      \
        T *o = out + plane * size;                                                           \
        const T *gp = grad + plane * positions;                                              \
        const int64_t *at = index + plane * positions;                                       \
        memset(o, 0, sizeof(T) * size);                                                      \
        for (int64_t q = 0; q < positions; q++)                                              \
            if ((uint64_t)at[q] < (uint64_t)size) o[at[q]] += gp[q];                         \
    }                                                                                        \
}                                                                                            \
                                                                                             \
void NAME(const T *grad, const int64_t *index, int64_t planes, int64_t positions,            \
          int64_t size, T *out) {                                                            \
    struct NAME##_args a = {grad, index, positions, size, out};                              \
    burnish_parallel(NAME##_planes, &a, planes, burnish_parts(planes * size >= 65536));      \
}

MAX_POOL(burnish_max_pool_f32, float, uint32_t)
MAX_POOL(burnish_max_pool_f64, double, uint64_t)
MAX_POOL_BACKWARD(burnish_max_pool_backward_f32, float)
MAX_POOL_BACKWARD(burnish_max_pool_backward_f64, double)
"""

_I64 = ctypes.c_int64
_P = ctypes.c_void_p
_SUFFIX = {"float32": "f32", "float64": "f64"}


class NativePool:
    """The compiled max pooling of ``SOURCE``, forward and backward, for float32 and
    float64."""

    dtypes = frozenset(_SUFFIX)
    #: The most elements of an input plane: the forward pass keeps indices in 32 bits.
    max_plane = 2**31 - 1

    def __init__(self, compiler: Any) -> None:
        library = compiler.build(SOURCE)
        self.forwards: dict[str, Any] = {}
        self.backwards: dict[str, Any] = {}
        for dtype, suffix in _SUFFIX.items():
            forward = getattr(library, f"burnish_max_pool_{suffix}")
            forward.argtypes = [_P, _P, _I64, _I64, _I64, _I64, _P, _P]
            forward.restype = ctypes.c_int
            backward = getattr(library, f"burnish_max_pool_backward_{suffix}")
            backward.argtypes = [_P, _P, _I64, _I64, _I64, _P]
            backward.restype = None
            self.forwards[dtype], self.backwards[dtype] = forward, backward
        self.library = library  # kept loaded while the entries may run

    def forward(self, x: np.ndarray, out: np.ndarray, index: np.ndarray | None,
                words: np.ndarray) -> None:
        """``out`` (and ``index``, the int64 flat spatial index of each max), contiguous
        ``[batch, channels, *out_size]``, from ``x`` (any strides); ``words``:
        ``burnish.cpu.conv.geometry``'s."""
        size = x.dtype.itemsize
        failed = self.forwards[out.dtype.name](
            words.ctypes.data, x.ctypes.data, x.strides[0] // size, x.strides[1] // size,
            x.shape[0], x.shape[1], out.ctypes.data,
            None if index is None else index.ctypes.data)
        if failed:
            raise MemoryError("cpu backend: no memory for a max pool's window bounds")

    def backward(self, grad: np.ndarray, index: np.ndarray, out: np.ndarray) -> None:
        """``out`` (contiguous ``[batch, channels, *in_size]``) = zeros with each element of
        ``grad`` added at its ``index`` (both contiguous ``[batch, channels, *out_size]``,
        indices flat over the spatial dims of ``out``)."""
        planes = out.shape[0] * out.shape[1]
        positions = grad.size // max(1, planes)
        self.backwards[out.dtype.name](grad.ctypes.data, index.ctypes.data, planes, positions,
                                       out.size // max(1, planes), out.ctypes.data)
