"""Convolutions that sum their taps directly, without a patch matrix, on the CPU.

``burnish.cpu.conv`` multiplies patch matrices by BLAS. Where a patch matrix would be a poor
operand, these kernels copy the input a task reads into phase planes (the padded input split
by the stride: phase (r0, r1) holds rows r0, r0 + s0, ... and columns r1, r1 + s1, ..., so
that every tap reads one plane at a fixed shift, as at unit strides) and sum the taps into
vector registers: depthwise convolutions (one input channel per group: a patch matrix times a
single row of weights), and those with a few input channels (an image network's first layer:
a patch matrix of a few dozen rows of copies, for products of a few dozen multiply-adds per
output). Tasks are cut by the shape alone, each output computed by one task, so the results
do not depend on the thread count (``burnish.cpu.threads``).
"""

from __future__ import annotations

import numpy as np

from burnish.jit.codegen.cpu import EPILOGUE_HEADER, PARALLEL_HEADER


def _turn_source(name: str, ctype: str, lanes: int) -> str:
    """C of ``name(src, ld_src, dst, ld_dst)``: ``dst[j * ld_dst + i] = src[i * ld_src + j]``
    for a ``lanes`` x ``lanes`` tile (a transpose), in log2(lanes) rounds of two-input vector
    shuffles, each of which swaps one bit of the row index with that bit of the column index;
    element by element where the compiler has no ``__builtin_shufflevector`` (GCC before 12).
    """
    rows = f"{name}_rows"
    lines = [f"typedef {ctype} {rows} __attribute__((vector_size({lanes} * sizeof({ctype}))));",
             f"static inline void {name}(const {ctype} *src, int64_t ld_src, {ctype} *dst,",
             "                          int64_t ld_dst) {",
             "#if defined(__clang__) || __GNUC__ >= 12",
             f"    {rows} r[{lanes}], t[{lanes}];",
             f"    for (int i = 0; i < {lanes}; i++) memcpy(&r[i], src + i * ld_src, sizeof r[i]);"]
    bit = 1
    while bit < lanes:
        low = ", ".join(str(c + lanes - bit if c & bit else c) for c in range(lanes))
        high = ", ".join(str(c + lanes if c & bit else c + bit) for c in range(lanes))
        for row in range(lanes):
            if not row & bit:
                lines.append(f"    t[{row}] = __builtin_shufflevector(r[{row}], r[{row + bit}], "
                             f"{low});")
                lines.append(f"    t[{row + bit}] = __builtin_shufflevector(r[{row}], "
                             f"r[{row + bit}], {high});")
        lines.append("    memcpy(r, t, sizeof r);")
        bit *= 2
    lines += [f"    for (int i = 0; i < {lanes}; i++)",
              "        memcpy(dst + i * ld_dst, &r[i], sizeof r[i]);",
              "#else",
              f"    for (int i = 0; i < {lanes}; i++)",
              f"        for (int j = 0; j < {lanes}; j++)",
              "            dst[j * ld_dst + i] = src[i * ld_src + j];",
              "#endif",
              "}",
              ""]
    return "\n".join(lines)


SOURCE = PARALLEL_HEADER + EPILOGUE_HEADER + r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Multiply-adds from which a convolution's tasks are shared between the threads (as in
   burnish.cpu.conv). */
#define PARALLEL_MACS (1 << 18)

/* Depthwise convolutions (one input channel per group) of 1 or 2 spatial dims: out[n, c] =
   bias[c] + the sum over taps of w[c, tap] times x[n, c / m] at the tap, c over groups * m
   output channels. No patch matrix and no product of one row: one task per (sample, output
   channel) copies its input plane, zero-padded, into a buffer of its own as s0 x s1 phase
   planes (phase (r0, r1) holds the padded input's rows r0, r0 + s0, ... and columns r1,
   r1 + s1, ...), so that every tap reads one phase plane at a fixed offset, as with unit
   strides. Output rows are then computed wq wide (wq: a phase plane's width, a few columns
   more than the output's), as one run over all the rows: VECTORS times LANES outputs at a
   time (their sums in vector registers, VECTORS of them so that the adds of one tap do not
   wait for the last's) take every tap, each a contiguous load, before they are stored; the
   extra columns are dropped when the rows are stored.
   Where the output rows are short (at most LANE_ROWS: a deep layer's 7x7 and 14x14), a row
   of a plane fills a vector or two at most, and copying it in and out costs more than its
   taps: there, with one output channel per group and LANES channels or more, a task takes
   LANES channels of a sample at once, one per vector lane (its phase planes hold LANES
   values per position), so that every vector load and multiply-add does useful work. */
#define LANE_ROWS 16

#define DEPTHWISE(NAME, T, LANES, VECTORS)                                                   \
typedef T NAME##_lanes __attribute__((vector_size(LANES * sizeof(T))));                      \
struct NAME##_depthwise_args {                                                               \
    const int64_t *g, *offsets;                                                              \
    const T *x, *w, *bias;                                                                   \
    int64_t xsb, xsc, groups, m, room;                                                       \
    T *out;                                                                                  \
    int failed;                                                                              \
    int64_t hq, wq, blocks;                                                                  \
    const struct burnish_epilogue *epi;                                                      \
};                                                                                           \
                                                                                             \
/* acc[0, vectors * LANES) = the sum over taps t of wc[t] times from[offsets[t] + ...]:      \
   inlined where vectors is a constant (at most 8), so that the sums stay in registers. */   \
static inline __attribute__((always_inline)) void NAME##_sums(                               \
        const T *from, const int64_t *offsets, const T *wc, int64_t taps, T *acc,            \
        int vectors) {                                                                       \
    NAME##_lanes sum[8] = {{0}}, v;                                                          \
    for (int64_t t = 0; t < taps; t++) {                                                     \
        T weight = wc[t];                                                                    \
        _Pragma("GCC unroll 8")                                                              \
        for (int r = 0; r < vectors; r++) {                                                  \
            memcpy(&v, from + offsets[t] + r * LANES, sizeof v);                             \
            sum[r] += weight * v;                                                            \
        }                                                                                    \
    }                                                                                        \
    memcpy(acc, sum, sizeof(NAME##_lanes) * vectors);                                        \
}                                                                                            \
                                                                                             \
                                                                                             \
/* row[b] = src[(b * s1 + shift) * xs1], b in [lo, hi): a phase plane's row. The strides     \
   are constants where they are 1 or 2, so that the compiler loads whole vectors (and        \
   shuffles them apart at stride 2). */                                                      \
static inline void NAME##_phase_row(T *restrict row, const T *restrict src, int64_t lo,      \
                                    int64_t hi, int64_t s1, int64_t xs1, int64_t shift) {    \
    if (s1 == 1 && xs1 == 1) {                                                               \
        for (int64_t b = lo; b < hi; b++) row[b] = src[b + shift];                           \
    } else if (s1 == 2 && xs1 == 1) {                                                        \
        for (int64_t b = lo; b < hi; b++) row[b] = src[2 * b + shift];                       \
    } else {                                                                                 \
        for (int64_t b = lo; b < hi; b++) row[b] = src[(b * s1 + shift) * xs1];              \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* Planes [begin, end) of a depthwise convolution, on one buffer of phase planes. */         \
static void NAME##_depthwise_planes(void *context, int64_t begin, int64_t end) {             \
    struct NAME##_depthwise_args *da = context;                                              \
    const int64_t *g = da->g, *offsets = da->offsets;                                        \
    const int64_t *in = g + 1, *o = g + 4, *k = g + 7, *s = g + 10, *p = g + 13, *d = g + 16; \
    const int64_t *xs = g + 19;                                                              \
    const T *x = da->x, *w = da->w, *bias = da->bias;                                        \
    int64_t xsb = da->xsb, xsc = da->xsc, groups = da->groups, m = da->m, room = da->room;   \
    T *out = da->out;                                                                        \
    int64_t positions = o[0] * o[1], taps = k[0] * k[1];                                     \
    int64_t hq = o[0] + (k[0] - 1) * d[0] / s[0] + 1, wq = o[1] + (k[1] - 1) * d[1] / s[1] + 1; \
    int64_t phase = (hq + 1) * wq;                                                           \
    T *phases = calloc(room + o[0] * wq + LANES, sizeof(T));                                 \
    if (!phases) {                                                                           \
        __atomic_store_n(&da->failed, 1, __ATOMIC_RELAXED);                                  \
        return;                                                                              \
    }                                                                                        \
    for (int64_t plane = begin; plane < end; plane++) {                                      \
        int64_t c = plane % (groups * m);                                                    \
        const T *xc = x + (plane / (groups * m)) * xsb + (c / m) * xsc;                      \
        const T *wc = w + c * taps;                                                          \
        T *acc = phases + room;                                                              \
        for (int64_t r0 = 0; r0 < s[0]; r0++)                                                \
        for (int64_t r1 = 0; r1 < s[1]; r1++) {                                              \
            T *ph = phases + (r0 * s[1] + r1) * phase;                                       \
            /* only the input's own elements: where the padding falls is the same for        \
               every plane, zero since the buffer was made */                                \
            for (int64_t a = 0; a < hq; a++) {                                               \
                int64_t i0 = a * s[0] + r0 - p[0];                                           \
                if (i0 < 0 || i0 >= in[0]) continue;                                         \
                T *restrict row = ph + a * wq;                                               \
                const T *restrict src = xc + i0 * xs[0];                                     \
                /* columns b with i1 = b * s1 + r1 - p1 in [0, in1): [lo, hi) */             \
                int64_t lo = p[1] - r1 <= 0 ? 0 : (p[1] - r1 + s[1] - 1) / s[1];             \
                int64_t hi = in[1] + p[1] - r1 <= 0 ? 0                                      \
                             : (in[1] + p[1] - r1 - 1) / s[1] + 1;                           \
                if (hi > wq) hi = wq;                                                        \
                NAME##_phase_row(row, src, lo, hi, s[1], xs[1], r1 - p[1]);                  \
            }                                                                                \
        }                                                                                    \
        /* up to VECTORS vectors at a time (as many as are left), their sums in registers,   \
           each tap's weight read once for them all. The last lanes past the rows read the   \
           buffer's slack and are dropped. */                                                \
        for (int64_t i = 0; i < o[0] * wq; i += VECTORS * LANES) {                           \
            int64_t left = (o[0] * wq - i + LANES - 1) / LANES;                              \
            const T *from = phases + i;                                                      \
            switch (left < VECTORS ? left : VECTORS) {                                       \
            case 1: NAME##_sums(from, offsets, wc, taps, acc + i, 1); break;                 \
            case 2: NAME##_sums(from, offsets, wc, taps, acc + i, 2); break;                 \
            case 3: NAME##_sums(from, offsets, wc, taps, acc + i, 3); break;                 \
            case 4: NAME##_sums(from, offsets, wc, taps, acc + i, 4); break;                 \
            case 5: NAME##_sums(from, offsets, wc, taps, acc + i, 5); break;                 \
            case 6: NAME##_sums(from, offsets, wc, taps, acc + i, 6); break;                 \
            case 7: NAME##_sums(from, offsets, wc, taps, acc + i, 7); break;                 \
            default: NAME##_sums(from, offsets, wc, taps, acc + i, 8); break;                \
            }                                                                                \
        }                                                                                    \
        T start = bias ? bias[c] : (T)0;                                                     \
        T *target = out + plane * positions;                                                 \
        for (int64_t a = 0; a < o[0]; a++)                                                   \
            for (int64_t b = 0; b < o[1]; b++)                                               \
                target[a * o[1] + b] = start + acc[a * wq + b];                              \
        burnish_epilogue(da->epi, target, positions);                                        \
    }                                                                                        \
    free(phases);                                                                            \
}                                                                                            \
                                                                                             \
/* acc[r] = start + the sum over taps t of wv[t] times the LANES channels at                 \
   from + (offsets[t] + r) * LANES, r < vectors: inlined where vectors is a constant (at     \
   most 8), so that the sums stay in registers. */                                           \
static inline __attribute__((always_inline)) void NAME##_lane_sums(                          \
        const T *from, const int64_t *offsets, const T *wv, int64_t taps, T start, T *acc,   \
        int vectors) {                                                                       \
    NAME##_lanes sum[8] = {{0}}, v, weight;                                                  \
    for (int64_t t = 0; t < taps; t++) {                                                     \
        const T *at = from + offsets[t] * LANES;                                             \
        memcpy(&weight, wv + t * LANES, sizeof weight);                                      \
        _Pragma("GCC unroll 8")                                                              \
        for (int r = 0; r < vectors; r++) {                                                  \
            memcpy(&v, at + r * LANES, sizeof v);                                            \
            sum[r] += weight * v;                                                            \
        }                                                                                    \
    }                                                                                        \
    for (int r = 0; r < vectors; r++) {                                                      \
        v = start + sum[r];                                                                  \
        memcpy(acc + r * LANES, &v, sizeof v);                                               \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* Blocks [begin, end) of a depthwise convolution of one output channel per group and small  \
   output rows, LANES channels of a sample a block (the last block of a sample its last      \
   LANES channels, of which it stores those the block before did not), a channel a lane:     \
   the block's input is copied into phase planes as the planes' kernel copies one channel,   \
   here with LANES channels side by side per position, then every output position takes      \
   its taps' LANES-wide loads, however short the rows. */                                    \
static void NAME##_depthwise_lanes(void *context, int64_t begin, int64_t end) {              \
    struct NAME##_depthwise_args *da = context;                                              \
    const int64_t *g = da->g, *offsets = da->offsets;                                        \
    const int64_t *in = g + 1, *o = g + 4, *k = g + 7, *s = g + 10, *p = g + 13;             \
    const int64_t *xs = g + 19;                                                              \
    int64_t xsb = da->xsb, xsc = da->xsc, groups = da->groups;                               \
    int64_t positions = o[0] * o[1], taps = k[0] * k[1];                                     \
    int64_t wq = da->wq, hq = da->hq, phase = (hq + 1) * wq, blocks = da->blocks;            \
    T *phases = calloc(s[0] * s[1] * phase * LANES + (taps + positions + LANES) * LANES,     \
                       sizeof(T));                                                           \
    if (!phases) {                                                                           \
        __atomic_store_n(&da->failed, 1, __ATOMIC_RELAXED);                                  \
        return;                                                                              \
    }                                                                                        \
    T *wv = phases + s[0] * s[1] * phase * LANES, *acc = wv + taps * LANES;                  \
    T *tile = acc + positions * LANES; /* LANES x LANES, turned round */                     \
    int contiguous = xs[1] == 1 && (xs[0] == in[1] || in[0] == 1);                           \
    int64_t *columns = malloc(sizeof(int64_t) * (in[1] + 1));                                \
    if (!columns) {                                                                          \
        free(phases);                                                                        \
        __atomic_store_n(&da->failed, 1, __ATOMIC_RELAXED);                                  \
        return;                                                                              \
    }                                                                                        \
    for (int64_t i = 0; i < in[1]; i++) {                                                    \
        int64_t b = (i + p[1]) / s[1];                                                       \
        columns[i] = b < wq ? ((i + p[1]) % s[1]) * phase + b : -1;                          \
    }                                                                                        \
    for (int64_t block = begin; block < end; block++) {                                      \
        int64_t n = block / blocks, first = (block % blocks) * LANES;                        \
        int64_t c0 = first + LANES <= groups ? first : groups - LANES;                       \
        const T *xn = da->x + n * xsb + c0 * xsc;                                            \
        /* a plane's elements in a run (the input contiguous by plane): LANES of the LANES   \
           channels at a time turned round into LANES positions of LANES channels, each      \
           stored in its phase plane (columns[]: a column's phase plane and place there, -1  \
           where no output reads it) */                                                      \
        int64_t size = in[0] * in[1], i0 = 0, i1 = 0, row = 0, rows = 0;                     \
        for (int64_t f = 0; f < size && contiguous; f += LANES) {                            \
            int64_t count = size - f < LANES ? size - f : LANES;                             \
            if (count == LANES) {                                                            \
                NAME##_turn(xn + f, xsc, tile, LANES);                                       \
            } else {                                                                         \
                for (int64_t j = 0; j < count; j++)                                          \
                    for (int lane = 0; lane < LANES; lane++)                                 \
                        tile[j * LANES + lane] = xn[f + j + lane * xsc];                     \
            }                                                                                \
            for (int64_t j = 0; j < count; j++) {                                            \
                if (i1 == 0) { /* a new row: its phase plane and row there */                \
                    int64_t a = (i0 + p[0]) / s[0];                                          \
                    rows = a < hq;                                                           \
                    row = ((i0 + p[0]) % s[0]) * s[1] * phase + a * wq;                      \
                }                                                                            \
                if (rows && columns[i1] >= 0)                                                \
                    memcpy(phases + (row + columns[i1]) * LANES, tile + j * LANES,           \
                           sizeof(T) * LANES);                                               \
                if (++i1 == in[1]) i1 = 0, i0++;                                             \
            }                                                                                \
        }                                                                                    \
        /* else: a gather per position */                                                    \
        for (int64_t r0 = 0; r0 < s[0] && !contiguous; r0++)                                 \
        for (int64_t r1 = 0; r1 < s[1]; r1++) {                                              \
            T *ph = phases + (r0 * s[1] + r1) * phase * LANES;                               \
            int64_t lo = p[1] - r1 <= 0 ? 0 : (p[1] - r1 + s[1] - 1) / s[1];                 \
            int64_t hi = in[1] + p[1] - r1 <= 0 ? 0 : (in[1] + p[1] - r1 - 1) / s[1] + 1;    \
            if (hi > wq) hi = wq;                                                            \
            for (int64_t a = 0; a < hq; a++) {                                               \
                int64_t i0 = a * s[0] + r0 - p[0];                                           \
                if (i0 < 0 || i0 >= in[0]) continue;                                         \
                for (int64_t b = lo; b < hi; b++) {                                          \
                    const T *src = xn + i0 * xs[0] + (b * s[1] + r1 - p[1]) * xs[1];         \
                    T *dst = ph + (a * wq + b) * LANES;                                      \
                    for (int lane = 0; lane < LANES; lane++) dst[lane] = src[lane * xsc];    \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        for (int64_t t = 0; t < taps; t++)                                                   \
            for (int lane = 0; lane < LANES; lane++)                                         \
                wv[t * LANES + lane] = da->w[(c0 + lane) * taps + t];                        \
        for (int64_t a = 0; a < o[0]; a++)                                                   \
            for (int64_t b = 0; b < o[1]; b += 8) {                                          \
                const T *from = phases + (a * wq + b) * LANES;                               \
                T *to = acc + (a * o[1] + b) * LANES;                                        \
                switch (o[1] - b < 8 ? o[1] - b : 8) {                                       \
                case 1: NAME##_lane_sums(from, offsets, wv, taps, 0, to, 1); break;          \
                case 2: NAME##_lane_sums(from, offsets, wv, taps, 0, to, 2); break;          \
                case 3: NAME##_lane_sums(from, offsets, wv, taps, 0, to, 3); break;          \
                case 4: NAME##_lane_sums(from, offsets, wv, taps, 0, to, 4); break;          \
                case 5: NAME##_lane_sums(from, offsets, wv, taps, 0, to, 5); break;          \
                case 6: NAME##_lane_sums(from, offsets, wv, taps, 0, to, 6); break;          \
                case 7: NAME##_lane_sums(from, offsets, wv, taps, 0, to, 7); break;          \
                default: NAME##_lane_sums(from, offsets, wv, taps, 0, to, 8); break;         \
                }                                                                            \
            }                                                                                \
        /* the sums turned round LANES positions at a time, then the last one at a time */   \
        int64_t q0 = positions / LANES * LANES;                                              \
        for (int64_t q = 0; q < q0; q += LANES) {                                            \
            NAME##_turn(acc + q * LANES, LANES, tile, LANES);                                \
            for (int64_t lane = first - c0; lane < LANES; lane++) {                          \
                T start = da->bias ? da->bias[c0 + lane] : (T)0;                             \
                T *target = da->out + (n * groups + c0 + lane) * positions + q;              \
                for (int64_t j = 0; j < LANES; j++)                                          \
                    target[j] = start + tile[lane * LANES + j];                              \
            }                                                                                \
        }                                                                                    \
        for (int64_t lane = first - c0; lane < LANES; lane++) {                              \
            T start = da->bias ? da->bias[c0 + lane] : (T)0;                                 \
            T *target = da->out + (n * groups + c0 + lane) * positions;                      \
            for (int64_t q = q0; q < positions; q++)                                         \
                target[q] = start + acc[q * LANES + lane];                                   \
        }                                                                                    \
        /* the block's channels not stored before: contiguous */                             \
        burnish_epilogue(da->epi, da->out + (n * groups + first) * positions,                \
                         (LANES - (first - c0)) * positions);                                \
    }                                                                                        \
    free(columns);                                                                           \
    free(phases);                                                                            \
}                                                                                            \
                                                                                             \
                                                                                             \
int NAME##_depthwise(const int64_t *g, const T *x, int64_t xsb, int64_t xsc, int64_t batch,  \
                     int64_t groups, const T *w, int64_t m, const T *bias, T *out,           \
                     const struct burnish_epilogue *epi) {                                   \
    const int64_t *in = g + 1, *o = g + 4, *k = g + 7, *s = g + 10, *p = g + 13, *d = g + 16; \
    const int64_t *xs = g + 19;                                                              \
    int64_t positions = o[0] * o[1], taps = k[0] * k[1], planes = batch * groups * m;        \
    int64_t hq = o[0] + (k[0] - 1) * d[0] / s[0] + 1, wq = o[1] + (k[1] - 1) * d[1] / s[1] + 1; \
    int64_t phase = (hq + 1) * wq, room = s[0] * s[1] * phase + LANES;                       \
    int64_t offsets[taps]; /* where each tap reads: its phase plane and shift */             \
    for (int64_t t0 = 0; t0 < k[0]; t0++)                                                    \
        for (int64_t t1 = 0; t1 < k[1]; t1++) {                                              \
            int64_t e0 = t0 * d[0], e1 = t1 * d[1];                                          \
            offsets[t0 * k[1] + t1] = ((e0 % s[0]) * s[1] + e1 % s[1]) * phase               \
                                      + (e0 / s[0]) * wq + e1 / s[1];                        \
        }                                                                                    \
    struct NAME##_depthwise_args da = {g, offsets, x, w, bias, xsb, xsc, groups, m, room,    \
                                       out, 0, hq, wq, (groups + LANES - 1) / LANES, epi};   \
    /* Short output rows (a deep layer's), one output channel per group and channels         \
       enough: LANES channels at a time, a channel a lane. */                                \
    if (m == 1 && groups >= LANES && o[1] <= LANE_ROWS) {                                    \
        burnish_parallel(NAME##_depthwise_lanes, &da, batch * da.blocks,                     \
                         burnish_parts(planes * positions * taps >= 32768));                 \
        return da.failed;                                                                    \
    }                                                                                        \
    burnish_parallel(NAME##_depthwise_planes, &da, planes,                                   \
                     burnish_parts(planes * positions * taps >= 32768));                     \
    return da.failed;                                                                        \
}

/* Convolutions with few input channels per group (an image network's first layer: 3) of 1 or
   2 spatial dims, not transposed: their patch matrix has a few dozen rows, each a strided
   copy of the input that BLAS then packs again, for products of a few dozen multiply-adds per
   output. Here a task takes a block of output rows of one sample and group, copies the input
   rows they read into phase planes per channel (as DEPTHWISE does, zero where the padding
   falls), then computes the block's rows wq wide, LANES outputs at a time for up to 8 output
   channels at once (their sums in registers), every channel and tap of the input a
   contiguous load shared by the 8; the extra columns are dropped as the rows are stored. */
#define FEW(NAME, T, LANES)                                                                  \
typedef T NAME##_few_lanes __attribute__((vector_size(LANES * sizeof(T))));                  \
                                                                                             \
/* acc[j * stride, + LANES) = the sum over q < inner of w[q * 8 + j] times                   \
   from[reads[q], + LANES), j < count: inlined where count is a constant (at most 8), so     \
   that the sums stay in registers. */                                                       \
static inline __attribute__((always_inline)) void NAME##_few_sums(                           \
        const T *from, const int64_t *reads, int64_t inner, const T *w, T *acc,              \
        int64_t stride, int count) {                                                         \
    NAME##_few_lanes sum[8] = {{0}}, v;                                                      \
    for (int64_t q = 0; q < inner; q++) {                                                    \
        memcpy(&v, from + reads[q], sizeof v);                                               \
        _Pragma("GCC unroll 8")                                                              \
        for (int j = 0; j < count; j++) sum[j] += w[q * 8 + j] * v;                          \
    }                                                                                        \
    for (int j = 0; j < count; j++) memcpy(acc + j * stride, &sum[j], sizeof v);             \
}                                                                                            \
                                                                                             \
struct NAME##_few_args {                                                                     \
    const int64_t *g, *reads;                                                                \
    const T *x, *w, *bias;                                                                   \
    int64_t xsb, xsc, groups, channels, m, rows, blocks, wq, phase;                          \
    T *out;                                                                                  \
    int failed;                                                                              \
    const struct burnish_epilogue *epi;                                                      \
};                                                                                           \
                                                                                             \
/* Tasks (sample, group, block of rows output rows) [begin, end), on one buffer. */          \
static void NAME##_few_blocks(void *context, int64_t begin, int64_t end) {                   \
    struct NAME##_few_args *fa = context;                                                    \
    const int64_t *g = fa->g, *reads = fa->reads;                                            \
    const int64_t *in = g + 1, *o = g + 4, *k = g + 7, *s = g + 10, *p = g + 13;             \
    const int64_t *xs = g + 19;                                                              \
    int64_t channels = fa->channels, m = fa->m, rows = fa->rows, wq = fa->wq;                \
    int64_t phase = fa->phase, hb = phase / wq - 1; /* a block's phase rows (and a spare) */ \
    int64_t inner = channels * k[0] * k[1], positions = o[0] * o[1];                         \
    int64_t size = channels * s[0] * s[1] * phase + LANES, stride = rows * wq + LANES;       \
    T *phases = malloc(sizeof(T) * (size + 8 * stride + 8 * inner));                         \
    if (!phases) {                                                                           \
        __atomic_store_n(&fa->failed, 1, __ATOMIC_RELAXED);                                  \
        return;                                                                              \
    }                                                                                        \
    T *acc = phases + size, *packed = acc + 8 * stride; /* 8 channels' weights by tap */     \
    for (int64_t task = begin; task < end; task++) {                                         \
        int64_t plane = task / fa->blocks, a0 = (task % fa->blocks) * rows;                  \
        int64_t gi = plane % fa->groups, a1 = a0 + rows < o[0] ? a0 + rows : o[0];           \
        const T *xg = fa->x + (plane / fa->groups) * fa->xsb + gi * channels * fa->xsc;      \
        memset(phases, 0, sizeof(T) * size);                                                 \
        for (int64_t c = 0; c < channels; c++)                                               \
        for (int64_t r0 = 0; r0 < s[0]; r0++)                                                \
        for (int64_t r1 = 0; r1 < s[1]; r1++) {                                              \
            T *ph = phases + ((c * s[0] + r0) * s[1] + r1) * phase;                          \
            int64_t lo = p[1] - r1 <= 0 ? 0 : (p[1] - r1 + s[1] - 1) / s[1];                 \
            int64_t hi = in[1] + p[1] - r1 <= 0 ? 0 : (in[1] + p[1] - r1 - 1) / s[1] + 1;    \
            if (hi > wq) hi = wq;                                                            \
            for (int64_t a = 0; a < hb; a++) {                                               \
                int64_t i0 = (a0 + a) * s[0] + r0 - p[0];                                    \
                if (i0 < 0 || i0 >= in[0]) continue;                                         \
                T *restrict row = ph + a * wq;                                               \
                const T *restrict src = xg + c * fa->xsc + i0 * xs[0];                       \
                NAME##_phase_row(row, src, lo, hi, s[1], xs[1], r1 - p[1]);                  \
            }                                                                                \
        }                                                                                    \
        for (int64_t j0 = 0; j0 < m; j0 += 8) {                                              \
            const T *wj = packed, *from_w = fa->w + (gi * m + j0) * inner;                   \
            int64_t count = m - j0 < 8 ? m - j0 : 8;                                         \
            for (int64_t q = 0; q < inner; q++)                                              \
                for (int64_t j = 0; j < 8; j++)                                              \
                    packed[q * 8 + j] = j < count ? from_w[j * inner + q] : 0;               \
            for (int64_t i = 0; i < (a1 - a0) * wq; i += LANES) {                            \
                const T *from = phases + i;                                                  \
                switch (count) {                                                             \
                case 1: NAME##_few_sums(from, reads, inner, wj, acc + i, stride, 1); break;  \
                case 2: NAME##_few_sums(from, reads, inner, wj, acc + i, stride, 2); break;  \
                case 3: NAME##_few_sums(from, reads, inner, wj, acc + i, stride, 3); break;  \
                case 4: NAME##_few_sums(from, reads, inner, wj, acc + i, stride, 4); break;  \
                case 5: NAME##_few_sums(from, reads, inner, wj, acc + i, stride, 5); break;  \
                case 6: NAME##_few_sums(from, reads, inner, wj, acc + i, stride, 6); break;  \
                case 7: NAME##_few_sums(from, reads, inner, wj, acc + i, stride, 7); break;  \
                default: NAME##_few_sums(from, reads, inner, wj, acc + i, stride, 8); break; \
                }                                                                            \
            }                                                                                \
            for (int64_t j = 0; j < count; j++) {                                            \
                T start = fa->bias ? fa->bias[gi * m + j0 + j] : (T)0;                       \
                T *target = fa->out + (plane * m + j0 + j) * positions + a0 * o[1];          \
                const T *sums = acc + j * stride;                                            \
                for (int64_t a = 0; a < a1 - a0; a++)                                        \
                    for (int64_t b = 0; b < o[1]; b++)                                       \
                        target[a * o[1] + b] = start + sums[a * wq + b];                     \
                burnish_epilogue(fa->epi, target, (a1 - a0) * o[1]);                         \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
    free(phases);                                                                            \
}                                                                                            \
                                                                                             \
/* out [batch, groups * m, positions] = w [groups, m, channels * taps] times the taps of x   \
   (any strides), in blocks of rows output rows. */                                          \
int NAME##_few(const int64_t *g, const T *x, int64_t xsb, int64_t xsc, int64_t batch,        \
               int64_t groups, int64_t channels, const T *w, int64_t m, const T *bias,       \
               T *out, int64_t rows, const struct burnish_epilogue *epi) {                   \
    const int64_t *o = g + 4, *k = g + 7, *s = g + 10, *d = g + 16;                          \
    int64_t taps = k[0] * k[1], inner = channels * taps, blocks = (o[0] + rows - 1) / rows;  \
    int64_t wq = o[1] + (k[1] - 1) * d[1] / s[1] + 1;                                        \
    int64_t phase = (rows + (k[0] - 1) * d[0] / s[0] + 2) * wq;                              \
    int64_t reads[inner]; /* where each channel and tap reads: its phase plane and shift */  \
    for (int64_t c = 0; c < channels; c++)                                                   \
        for (int64_t t0 = 0; t0 < k[0]; t0++)                                                \
            for (int64_t t1 = 0; t1 < k[1]; t1++) {                                          \
                int64_t e0 = t0 * d[0], e1 = t1 * d[1];                                      \
                reads[(c * k[0] + t0) * k[1] + t1] =                                         \
                    ((c * s[0] + e0 % s[0]) * s[1] + e1 % s[1]) * phase                      \
                    + (e0 / s[0]) * wq + e1 / s[1];                                          \
            }                                                                                \
    struct NAME##_few_args fa = {g, reads, x, w, bias, xsb, xsc, groups, channels, m, rows,  \
                                 blocks, wq, phase, out, 0, epi};                            \
    int64_t tasks = batch * groups * blocks, macs = tasks * m * inner * rows * o[1];         \
    burnish_parallel(NAME##_few_blocks, &fa, tasks,                                          \
                     burnish_parts(tasks > 1 && macs >= PARALLEL_MACS));                     \
    return fa.failed;                                                                        \
}

""" + _turn_source("burnish_conv_f32_turn", "float", 16) + _turn_source(
    "burnish_conv_f64_turn", "double", 8) + r"""
DEPTHWISE(burnish_conv_f32, float, 16, 8)
DEPTHWISE(burnish_conv_f64, double, 8, 8)
FEW(burnish_conv_f32, float, 16)
FEW(burnish_conv_f64, double, 8)
"""

#: Convolutions of 1 or 2 spatial dims with at most ``FEW_INNER`` input channels times taps
#: per group (an image network's first layer: 3 channels, 3x3) and more than one tap go
#: through ``FEW``'s direct kernel, in blocks of output rows whose phase planes and sums take
#: about ``FEW_BLOCK`` elements. (A 1x1's patch matrix is its input, which BLAS multiplies
#: where it lies, as fast or faster: 16 -> 16 channels on 56x56 at batch 2, 21 us against
#: 31 us through ``FEW``.) The 3x3 stride-2 3 -> 16 channels on 224x224: 290 us through the
#: patch matrix, 162 us here at batch 2; 196 and 79 us at batch 1.
FEW_INNER = 32
FEW_BLOCK = 1 << 16


def few_rows(words: np.ndarray, channels: int, m: int) -> int:
    """Output rows per block of ``FEW``'s kernel: as many as keep a block's phase planes and
    sums within ``FEW_BLOCK`` elements, at least one, evened out over the blocks."""
    out_rows, k1, s0, s1, d1 = (int(words[i]) for i in (4, 8, 10, 11, 17))
    wq = int(words[5]) + (k1 - 1) * d1 // s1 + 1
    rows = max(1, min(out_rows, FEW_BLOCK // ((channels * s0 * s1 + min(m, 8)) * wq)))
    blocks = -(-out_rows // rows) if out_rows else 1
    return max(1, -(-out_rows // blocks))
