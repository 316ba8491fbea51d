"""Convolutions on the CPU: each sample's patch matrix built and multiplied in one pass.

burnish.jit's way for the CPU was a patch matrix for a whole chunk of the batch, written by one
kernel, then BLAS products over it: the matrix (channels x taps x positions per sample, often
tens of MB) went through memory twice. Here each thread (``burnish.cpu.threads``) takes a
sample (and group) at a time, writes its patch rows into a buffer of its own, which stays in
the cache, and hands them straight to a single-threaded BLAS product (``blas.Gemm``'s function
pointers, on burnish's buffers). A task is a block of output lines of one sample and group, as
many lines as keep its patch rows within ``BLOCK`` elements (so large images split into many
tasks, and the threads share even a batch of one). Weight gradients add the products of one
run of tasks per thread into a buffer of its own; the buffers are summed in order at the end.

Patch rows are made line by line: a line of the output's last dim reads one line of the input
(a run of ``memcpy`` for unit strides), with zeros where taps fall in the padding; transposed
convolutions (input gradients) gather the same way, with a tap landing on the input only where
its position divides by the stride.

Pointwise convolutions (one tap, unit strides, no padding) need no patch rows: BLAS multiplies
the input where it lies. Where a sample has a single position (a squeeze-excite block's 1x1
on 1x1 inputs), the samples are the rows of one product per group: the weights, read for a
handful of multiply-adds each, are read once rather than once per sample. Depthwise
convolutions, and those with a few input channels (an image network's first layer), sum their
taps directly (``burnish.cpu.direct``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from burnish.cpu import direct, winograd
from burnish.jit.codegen.cpu import EPILOGUE_HEADER, PARALLEL_HEADER

SOURCE = PARALLEL_HEADER + EPILOGUE_HEADER + r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Where output position o with tap t reads the input along one dim; 0 where it reads a zero. */
static inline int burnish_coord(int64_t o, int64_t t, int64_t in, int64_t s, int64_t p,
                                int64_t d, int transposed, int64_t *at) {
    if (!transposed) {
        int64_t i = o * s - p + t * d;
        *at = i;
        return i >= 0 && i < in;
    }
    int64_t num = o + p - t * d;
    if (num < 0 || num % s) return 0;
    *at = num / s;
    return *at < in;
}

/* Patch rows of channels [0, channels) of one sample and group, for output lines [l0, l1)
   (a line: the positions along the last dim): cols is [channels * taps, (l1 - l0) * out2]
   (its rows ld apart, where ld is not 0), pad where a tap falls outside the input. */
#define ROWS(NAME, T)                                                                         \
static void NAME##_rows(const T *x, int64_t xsc, const int64_t *g, int transposed,           \
                        int64_t channels, int64_t l0, int64_t l1, T pad, T *cols,            \
                        int64_t ld) {                                                        \
    const int64_t *in = g, *out = g + 3, *k = g + 6, *s = g + 9, *p = g + 12, *d = g + 15;    \
    const int64_t *xs = g + 18;                                                              \
    int64_t width = ld ? ld : (l1 - l0) * out[2], taps = k[0] * k[1] * k[2];                 \
    int line = !transposed || s[2] == 1;                                                     \
    int64_t a = transposed ? 1 : s[2];                                                       \
    for (int64_t c = 0; c < channels; c++)                                                   \
    for (int64_t t0 = 0; t0 < k[0]; t0++)                                                    \
    for (int64_t t1 = 0; t1 < k[1]; t1++)                                                    \
    for (int64_t t2 = 0; t2 < k[2]; t2++) {                                                  \
        T *row = cols + (c * taps + (t0 * k[1] + t1) * k[2] + t2) * width;                   \
        const T *xc = x + c * xsc;                                                           \
        int64_t b = transposed ? p[2] - t2 * d[2] : t2 * d[2] - p[2];                        \
        int64_t lo = 0, hi = 0;                                                              \
        if (line) {                                                                          \
            lo = b >= 0 ? 0 : (-b + a - 1) / a;                                              \
            hi = in[2] - 1 - b < 0 ? 0 : (in[2] - 1 - b) / a + 1;                            \
            if (lo > out[2]) lo = out[2];                                                    \
            if (hi > out[2]) hi = out[2];                                                    \
            if (hi < lo) hi = lo;                                                            \
        }                                                                                    \
        for (int64_t l = l0; l < l1; l++) {                                                  \
            int64_t o0 = l / out[1], o1 = l % out[1], i0 = 0, i1 = 0;                        \
            T *dst = row + (l - l0) * out[2];                                                \
            int valid = burnish_coord(o0, t0, in[0], s[0], p[0], d[0], transposed, &i0)      \
                && burnish_coord(o1, t1, in[1], s[1], p[1], d[1], transposed, &i1);          \
            if (!valid) {                                                                    \
                for (int64_t o = 0; o < out[2]; o++) dst[o] = pad;                           \
                continue;                                                                    \
            }                                                                                \
            const T *src = xc + i0 * xs[0] + i1 * xs[1];                                     \
            if (line) {                                                                      \
                for (int64_t o = 0; o < lo; o++) dst[o] = pad;                               \
                if (a == 1 && xs[2] == 1) {                                                  \
                    memcpy(dst + lo, src + lo + b, sizeof(T) * (hi - lo));                   \
                } else if (a == 2 && xs[2] == 1) { /* a constant stride: vector shuffles */  \
                    for (int64_t o = lo; o < hi; o++) dst[o] = src[2 * o + b];               \
                } else {                                                                     \
                    for (int64_t o = lo; o < hi; o++) dst[o] = src[(o * a + b) * xs[2]];     \
                }                                                                            \
                for (int64_t o = hi; o < out[2]; o++) dst[o] = pad;                          \
            } else {                                                                         \
                for (int64_t o = 0; o < out[2]; o++) {                                       \
                    int64_t i2 = 0;                                                          \
                    int v = burnish_coord(o, t2, in[2], s[2], p[2], d[2], 1, &i2);           \
                    dst[o] = v ? src[i2 * xs[2]] : pad;                                      \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
}

ROWS(burnish_f32, float)
ROWS(burnish_f64, double)
ROWS(burnish_u8, uint8_t)

/* The patch matrices [batch, channels * taps, positions] of 8-bit x (any strides), pad where a
   tap falls in the padding (a quantized input's zero point): one task per (sample, channel). */
struct burnish_patches_args {
    const int64_t *g;
    const uint8_t *x;
    int64_t xsb, xsc, channels, taps, positions, lines;
    uint8_t pad;
    uint8_t *cols;
};

static void burnish_patches_planes(void *context, int64_t begin, int64_t end) {
    const struct burnish_patches_args *a = context;
    for (int64_t plane = begin; plane < end; plane++)
        burnish_u8_rows(a->x + (plane / a->channels) * a->xsb + (plane % a->channels) * a->xsc,
                        a->xsc, a->g, 0, 1, 0, a->lines, a->pad,
                        a->cols + plane * a->taps * a->positions, 0);
}

void burnish_patches_u8(const int64_t *g, const uint8_t *x, int64_t xsb, int64_t xsc,
                        int64_t batch, int64_t channels, uint8_t pad, uint8_t *cols) {
    int64_t positions = g[3] * g[4] * g[5], taps = g[6] * g[7] * g[8], lines = g[3] * g[4];
    int64_t planes = batch * channels;
    struct burnish_patches_args a = {g, x, xsb, xsc, channels, taps, positions, lines, pad,
                                     cols};
    burnish_parallel(burnish_patches_planes, &a, planes,
                     burnish_parts(planes * taps * positions >= 65536));
}

/* Multiply-adds from which a convolution's tasks are shared between the threads. */
#define PARALLEL_MACS (1 << 18)
/* Output channels per task of a convolution of one position per sample, where it has
   PARALLEL_MACS multiply-adds or SAMPLE_ROWS_WEIGHTS weights: with so few multiply-adds per
   weight, a large one is bound by the reading of its weights (cold in a replay), which the
   threads share. */
#define SAMPLE_ROWS_PART 128
#define SAMPLE_ROWS_WEIGHTS (1 << 15)

#define CONV(NAME, ROWS_OF, T, I)                                                            \
typedef void (*NAME##_gemm)(int, int, int, I, I, I, T, const T *, I, const T *, I, T, T *, I); \
                                                                                             \
/* A forward or weight-gradient call's arguments, shared by its parallel ranges. */          \
struct NAME##_args {                                                                         \
    NAME##_gemm gemm;                                                                        \
    const int64_t *g;                                                                        \
    int transposed, pointwise;                                                               \
    const T *x, *w, *bias, *grad;                                                            \
    int64_t xsb, xsc, groups, channels, m, positions, inner, lines, lines_per_block, blocks; \
    int64_t tasks, size, parts;                                                              \
    T *out, **sums;                                                                          \
    int failed;                                                                              \
    int64_t batch;                                                                           \
    const struct burnish_epilogue *epi;                                                      \
};                                                                                           \
                                                                                             \
/* Tasks [begin, end) of a convolution with one output position per sample (a 1x1 on 1x1     \
   inputs: a squeeze-excite block's), one product per task for the whole batch: x's rows the \
   samples (xsb apart, channels contiguous), out [batch, groups * m], a task a group and a   \
   part of its output channels (parts by the shape alone, not by the threads). */            \
static void NAME##_sample_rows(void *context, int64_t begin, int64_t end) {                  \
    struct NAME##_args *a = context;                                                         \
    int64_t m = a->m, inner = a->inner, parts = a->parts, batch = a->batch;                  \
    int64_t width = a->groups * m, lda = batch > 1 ? a->xsb : (inner > 1 ? inner : 1);       \
    for (int64_t task = begin; task < end; task++) {                                         \
        int64_t gi = task / parts, part = task % parts;                                      \
        int64_t m0 = m * part / parts, m1 = m * (part + 1) / parts;                          \
        T *o = a->out + gi * m + m0;                                                         \
        if (m1 <= m0) continue;                                                              \
        if (a->bias)                                                                         \
            for (int64_t n = 0; n < batch; n++)                                              \
                memcpy(o + n * width, a->bias + gi * m + m0, sizeof(T) * (m1 - m0));         \
        a->gemm(101, 111, 112, (I)batch, (I)(m1 - m0), (I)inner, (T)1,                       \
                a->x + gi * a->channels * a->xsc, (I)lda,                                    \
                a->w + (gi * m + m0) * inner, (I)inner, a->bias ? (T)1 : (T)0, o, (I)width); \
        burnish_epilogue_rows(a->epi, o, batch, m1 - m0, width);                             \
    }                                                                                        \
}                                                                                            \
                                                                                             \
                                                                                             \
/* Forward tasks [begin, end), on one patch buffer. */                                       \
static void NAME##_forward_tasks(void *context, int64_t begin, int64_t end) {                \
    struct NAME##_args *a = context;                                                         \
    const int64_t *g = a->g;                                                                 \
    int64_t inner = a->inner, m = a->m, positions = a->positions, lines = a->lines;          \
    int64_t lines_per_block = a->lines_per_block, blocks = a->blocks, groups = a->groups;    \
    int64_t channels = a->channels, xsc = a->xsc;                                            \
    int pointwise = a->pointwise;                                                            \
    T *cols = pointwise ? NULL : malloc(sizeof(T) * inner * lines_per_block * g[5]);         \
    if (!pointwise && !cols) {                                                               \
        __atomic_store_n(&a->failed, 1, __ATOMIC_RELAXED);                                   \
        return;                                                                              \
    }                                                                                        \
    for (int64_t task = begin; task < end; task++) {                                         \
        int64_t plane = task / blocks, block = task % blocks;                                \
        int64_t n = plane / groups, gi = plane % groups;                                     \
        int64_t l0 = block * lines_per_block;                                                \
        int64_t l1 = l0 + lines_per_block < lines ? l0 + lines_per_block : lines;            \
        int64_t width = (l1 - l0) * g[5];                                                    \
        const T *xg = a->x + n * a->xsb + gi * channels * xsc;                               \
        if (!pointwise)                                                                      \
            ROWS_OF##_rows(xg, xsc, g, a->transposed, channels, l0, l1, (T)0, cols, 0);      \
        T *o = a->out + plane * m * positions + l0 * g[5];                                   \
        a->gemm(101, 111, 111, (I)m, (I)width, (I)inner, (T)1, a->w + gi * m * inner,        \
                (I)inner, pointwise ? xg + l0 * g[5] : cols, pointwise ? (I)xsc : (I)width,  \
                (T)0, o, (I)positions);                                                      \
        if (a->bias)                                                                         \
            for (int64_t r = 0; r < m; r++)                                                  \
                for (int64_t q = 0; q < width; q++)                                          \
                    o[r * positions + q] += a->bias[gi * m + r];                             \
        burnish_epilogue_rows(a->epi, o, m, width, positions);                               \
    }                                                                                        \
    free(cols);                                                                              \
}                                                                                            \
                                                                                             \
/* out[n, g] = w[g] x patches(x[n, g]) (+ bias), out contiguous [batch, groups * m, P]: one  \
   task per sample, group and block of lines (a block's patch rows fit in BLOCK elements). */ \
int NAME##_forward(void *fn, const int64_t *g, int transposed, const T *x, int64_t xsb,      \
                   int64_t xsc, int64_t batch, int64_t groups, int64_t channels,             \
                   const T *w, int64_t m, const T *bias, T *out, int64_t lines_per_block,    \
                   const struct burnish_epilogue *epi) {                                     \
    int64_t positions = g[3] * g[4] * g[5], inner = channels * g[6] * g[7] * g[8];           \
    int64_t lines = g[3] * g[4], blocks = (lines + lines_per_block - 1) / lines_per_block;   \
    int64_t tasks = batch * groups * blocks;                                                 \
    /* One tap at unit strides, no padding, positions contiguous: the input is the patch     \
       matrix (its rows the channels, xsc apart), multiplied where it lies. */               \
    int pointwise = g[6] * g[7] * g[8] == 1 && g[9] == 1 && g[10] == 1 && g[11] == 1         \
        && g[12] == 0 && g[13] == 0 && g[14] == 0 && g[20] == 1                              \
        && (g[4] == 1 || g[19] == g[5]) && (g[3] == 1 || g[18] == g[4] * g[5])               \
        && xsc >= positions && !transposed;                                                  \
    /* Small ones (a squeeze-excite block's on 1x1 inputs) on the calling thread: waking     \
       the others costs more than their share, and far more when they wait for a core. */    \
    int64_t macs = batch * groups * m * inner * positions;                                   \
    struct NAME##_args a = {(NAME##_gemm)fn, g, transposed, pointwise, x, w, bias, NULL,     \
                            xsb, xsc, groups, channels, m, positions, inner, lines,          \
                            lines_per_block, blocks, tasks, 0, 0, out, NULL, 0, batch, epi}; \
    /* One position per sample, channels contiguous: one product per group for the whole     \
       batch, so that the weights are read once, not once per sample. */                     \
    if (pointwise && positions == 1 && (channels == 1 || xsc == 1) && inner > 0 && m > 0     \
            && (batch == 1 || xsb >= inner)) {                                               \
        int split = macs >= PARALLEL_MACS || m * inner >= SAMPLE_ROWS_WEIGHTS;               \
        a.parts = split ? (m + SAMPLE_ROWS_PART - 1) / SAMPLE_ROWS_PART : 1;                 \
        burnish_parallel(NAME##_sample_rows, &a, groups * a.parts,                           \
                         burnish_parts(groups * a.parts > 1));                               \
        return 0;                                                                            \
    }                                                                                        \
    burnish_parallel(NAME##_forward_tasks, &a, tasks,                                        \
                     burnish_parts(tasks > 1 && macs >= PARALLEL_MACS));                     \
    return a.failed;                                                                         \
}                                                                                            \
                                                                                             \
/* Weight-gradient parts [begin, end): each sums its run of tasks' products in a buffer of   \
   its own (a->sums[part]; NULL where memory ran out). */                                    \
static void NAME##_weight_grad_parts(void *context, int64_t begin, int64_t end) {            \
    struct NAME##_args *a = context;                                                         \
    const int64_t *g = a->g;                                                                 \
    int64_t inner = a->inner, m = a->m, positions = a->positions, lines = a->lines;          \
    int64_t lines_per_block = a->lines_per_block, blocks = a->blocks, groups = a->groups;    \
    int64_t channels = a->channels, xsc = a->xsc, tasks = a->tasks, parts = a->parts;        \
    for (int64_t part = begin; part < end; part++) {                                         \
        T *cols = malloc(sizeof(T) * inner * lines_per_block * g[5]);                        \
        T *sum = calloc(a->size, sizeof(T));                                                 \
        if (!cols || !sum) {                                                                 \
            free(cols);                                                                      \
            free(sum);                                                                       \
            continue;                                                                        \
        }                                                                                    \
        for (int64_t task = tasks * part / parts; task < tasks * (part + 1) / parts; task++) { \
            int64_t plane = task / blocks, block = task % blocks;                            \
            int64_t n = plane / groups, gi = plane % groups;                                 \
            int64_t l0 = block * lines_per_block;                                            \
            int64_t l1 = l0 + lines_per_block < lines ? l0 + lines_per_block : lines;        \
            int64_t width = (l1 - l0) * g[5];                                                \
            ROWS_OF##_rows(a->x + n * a->xsb + gi * channels * xsc, xsc, g, 0, channels, l0, \
                           l1, (T)0, cols, 0);                                               \
            a->gemm(101, 111, 112, (I)m, (I)inner, (I)width, (T)1,                           \
                    a->grad + plane * m * positions + l0 * g[5], (I)positions, cols,         \
                    (I)width, (T)1, sum + gi * m * inner, (I)inner);                         \
        }                                                                                    \
        free(cols);                                                                          \
        a->sums[part] = sum;                                                                 \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* forward_merged's arguments, shared by the ranges of its two loops. */                   \
struct NAME##_merged_args {                                                                  \
    NAME##_gemm gemm;                                                                        \
    const int64_t *g;                                                                        \
    int transposed;                                                                          \
    const T *x, *w, *bias;                                                                   \
    int64_t xsb, xsc, batch, groups, channels, m, m_parts, positions, inner, lines, width;   \
    T *cols, *prod, *out;                                                                    \
    const struct burnish_epilogue *epi;                                                      \
};                                                                                           \
                                                                                             \
/* Planes (sample, group) [begin, end): their patch rows, side by side in cols. */           \
static void NAME##_merged_rows(void *context, int64_t begin, int64_t end) {                  \
    const struct NAME##_merged_args *a = context;                                            \
    int64_t groups = a->groups, channels = a->channels, width = a->width;                    \
    for (int64_t plane = begin; plane < end; plane++) {                                      \
        int64_t n = plane / groups, gi = plane % groups;                                     \
        ROWS_OF##_rows(a->x + n * a->xsb + gi * channels * a->xsc, a->xsc, a->g,             \
                       a->transposed, channels, 0, a->lines, (T)0,                           \
                       a->cols + gi * a->inner * width + n * a->positions, width);           \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* Tasks (group, part of the output channels) [begin, end): a product each, its rows then    \
   copied to out with the bias. */                                                           \
static void NAME##_merged_products(void *context, int64_t begin, int64_t end) {              \
    const struct NAME##_merged_args *a = context;                                            \
    int64_t m = a->m, m_parts = a->m_parts, inner = a->inner, width = a->width;              \
    int64_t positions = a->positions, batch = a->batch, groups = a->groups;                  \
    for (int64_t task = begin; task < end; task++) {                                         \
        int64_t gi = task / m_parts, part = task % m_parts;                                  \
        int64_t m0 = m * part / m_parts, m1 = m * (part + 1) / m_parts;                      \
        T *pg = a->prod + (gi * m + m0) * width;                                             \
        a->gemm(101, 111, 111, (I)(m1 - m0), (I)width, (I)inner, (T)1,                       \
                a->w + (gi * m + m0) * inner, (I)inner, a->cols + gi * inner * width,        \
                (I)width, (T)0, pg, (I)width);                                               \
        for (int64_t r = m0; r < m1; r++) {                                                  \
            T start = a->bias ? a->bias[gi * m + r] : (T)0;                                  \
            for (int64_t n = 0; n < batch; n++) {                                            \
                const T *src = pg + (r - m0) * width + n * positions;                        \
                T *o = a->out + (n * groups * m + gi * m + r) * positions;                   \
                for (int64_t q = 0; q < positions; q++) o[q] = src[q] + start;               \
            }                                                                                \
        }                                                                                    \
        for (int64_t n = 0; n < batch && a->epi; n++) /* the part's rows: contiguous */      \
            burnish_epilogue(a->epi, a->out + (n * groups * m + gi * m + m0) * positions,    \
                             (m1 - m0) * positions);                                         \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* forward's result for a batch whose samples are one block each (a deep layer's 7x7): the  \
   patch matrices of the whole batch side by side, [channels * taps, batch * P] per group,    \
   built first (a range of samples and groups per part), then multiplied in parts of the     \
   output channels, one part a range, so that each BLAS call has batch * P columns and packs \
   only its part of the weights, and a batch of one still has m_parts tasks; each part's     \
   rows then go to out with the bias. Each task writes rows of its own: the result does not  \
   depend on which thread ran it. */                                                         \
int NAME##_forward_merged(void *fn, const int64_t *g, int transposed, const T *x,            \
                          int64_t xsb, int64_t xsc, int64_t batch, int64_t groups,           \
                          int64_t channels, const T *w, int64_t m, const T *bias, T *out,    \
                          int64_t m_parts, const struct burnish_epilogue *epi) {             \
    int64_t positions = g[3] * g[4] * g[5], inner = channels * g[6] * g[7] * g[8];           \
    int64_t lines = g[3] * g[4], width = batch * positions;                                  \
    int64_t macs = batch * groups * m * inner * positions;                                   \
    T *cols = malloc(sizeof(T) * groups * (inner + m) * width);                              \
    if (!cols) return 1;                                                                     \
    struct NAME##_merged_args a = {(NAME##_gemm)fn, g, transposed, x, w, bias, xsb, xsc,     \
                                   batch, groups, channels, m, m_parts, positions, inner,    \
                                   lines, width, cols, cols + groups * inner * width, out,   \
                                   epi};                                                     \
    int parallel = macs >= PARALLEL_MACS;                                                    \
    int64_t planes = batch * groups, tasks = groups * m_parts;                               \
    burnish_parallel(NAME##_merged_rows, &a, planes, parallel ? planes : 1);                 \
    burnish_parallel(NAME##_merged_products, &a, tasks, parallel ? tasks : 1);               \
    free(cols);                                                                              \
    return 0;                                                                                \
}                                                                                            \
                                                                                             \
/* out[g] (+)= sum over n of grad[n, g] x patches(x[n, g])^T; out contiguous [groups, m,     \
   channels * taps], grad contiguous [batch, groups * m, P]. The tasks are cut into one run  \
   per thread, each summed in a buffer of its own; the buffers are added to out in order,    \
   so the result does not depend on which thread ran which run. */                           \
int NAME##_weight_grad(void *fn, const int64_t *g, const T *x, int64_t xsb, int64_t xsc,     \
                       int64_t batch, int64_t groups, int64_t channels, const T *grad,       \
                       int64_t m, T *out, int accumulate, int64_t lines_per_block) {         \
    int64_t positions = g[3] * g[4] * g[5], inner = channels * g[6] * g[7] * g[8];           \
    int64_t lines = g[3] * g[4], blocks = (lines + lines_per_block - 1) / lines_per_block;   \
    int64_t tasks = batch * groups * blocks, size = groups * m * inner;                      \
    int64_t parts = tasks < burnish_threads ? tasks : burnish_threads;                       \
    if (!accumulate) memset(out, 0, sizeof(T) * size);                                       \
    if (parts < 1) return 0;                                                                 \
    T **sums = calloc(parts, sizeof(T *));                                                   \
    if (!sums) return 1;                                                                     \
    struct NAME##_args a = {(NAME##_gemm)fn, g, 0, 0, x, NULL, NULL, grad, xsb, xsc, groups, \
                            channels, m, positions, inner, lines, lines_per_block, blocks,   \
                            tasks, size, parts, out, sums, 0};                               \
    burnish_parallel(NAME##_weight_grad_parts, &a, parts, parts);                            \
    int failed = 0;                                                                          \
    for (int64_t part = 0; part < parts; part++) {                                           \
        failed |= sums[part] == NULL;                                                        \
        for (int64_t i = 0; i < size && sums[part]; i++) out[i] += sums[part][i];            \
        free(sums[part]);                                                                    \
    }                                                                                        \
    free(sums);                                                                              \
    return failed;                                                                           \
}

CONV(burnish_conv_f32_i64, burnish_f32, float, int64_t)
CONV(burnish_conv_f64_i64, burnish_f64, double, int64_t)
CONV(burnish_conv_f32_i32, burnish_f32, float, int32_t)
CONV(burnish_conv_f64_i32, burnish_f64, double, int32_t)
"""

#: Patch-matrix elements per block (per thread): 2^18 float32 is 1 MiB, about a core's L2.
BLOCK = 1 << 18

#: Forward convolutions whose samples are one block each and fewer than ``MERGE_TASKS`` (a
#: deep layer's 7x7 on a batch of one: one task, one thread) put the batch's patch matrices
#: side by side and multiply them in ``MERGE_PARTS`` parts of the output channels (at least
#: ``MERGE_CHANNELS`` each), so that every thread has work. (A batch of two, two tasks, was
#: no faster merged: bench/RESULTS.md.)
MERGE_TASKS = 2
MERGE_PARTS = 2
MERGE_CHANNELS = 32

#: 3x3 convolutions at unit stride and dilation go through ``burnish.cpu.winograd`` (2.25x
#: fewer multiply-adds) where both sides have at least ``WINOGRAD_CHANNELS`` channels per group
#: and the batch has at least ``WINOGRAD_POSITIONS`` output positions: its weights are
#: transformed on every call (16 values written for 9 read, about 10 ns per kernel on this
#: memory), which the multiply-adds saved (about 5 per position per kernel) pay back only from
#: about 100 positions (ResNet's 512-channel 7x7 layers at batch 2, 98, ran as fast either
#: way; its 14x14 ones at batch 1, 196, 16% faster).
WINOGRAD = True
WINOGRAD_CHANNELS = 16
WINOGRAD_POSITIONS = 128
#: Bytes of a Winograd block's transformed patches and products (per thread), about a core's
#: L2; and the fewest tasks a call is cut into (splitting the output channels if need be).
WINOGRAD_BLOCK = 1 << 20
WINOGRAD_TASKS = 8

_I64 = ctypes.c_int64
_P = ctypes.c_void_p


class Epilogue(ctypes.Structure):
    """``struct burnish_epilogue`` (``burnish.jit.codegen.cpu.EPILOGUE_HEADER``): a flat
    elementwise kernel of one input, run on each block of a convolution's output as it is
    written. ``info`` (the launch's, kept here) must outlive the calls."""

    _fields_ = [("fn", _P), ("info", _P), ("words", _I64), ("shift", _I64), ("group", _I64),
                ("size", _I64)]

    def __init__(self, fn: int, info: np.ndarray, shift: int, group: int, size: int) -> None:
        super().__init__(fn, info.ctypes.data, len(info), shift, group, size)
        self.kept = info


def _lines_per_block(inner: int, words: np.ndarray) -> int:
    """Output lines (positions along the last dim) per block: as many as keep a block's patch
    rows (``inner`` of them) within ``BLOCK`` elements, at least one."""
    return max(1, BLOCK // max(1, inner * int(words[5])))


def _winograd_takes(words: np.ndarray, batch: int, channels: int, m: int,
                    transposed: bool) -> bool:
    """Whether a convolution goes through ``burnish.cpu.winograd``: 2 spatial dims (the
    first of the three geometry dims 1), a 3x3 kernel, unit strides and dilation, not
    transposed, enough channels and positions (``WINOGRAD_CHANNELS``, ``WINOGRAD_POSITIONS``)."""
    return (WINOGRAD and not transposed and words[0] == 1 and words[6] == 1
            and words[7] == 3 and words[8] == 3 and words[10] == 1 and words[11] == 1
            and words[16] == 1 and words[17] == 1 and channels >= WINOGRAD_CHANNELS
            and m >= WINOGRAD_CHANNELS
            and batch * int(words[4]) * int(words[5]) >= WINOGRAD_POSITIONS)


def _winograd_blocks(words: np.ndarray, batch: int, groups: int, channels: int, m: int,
                     itemsize: int) -> tuple[int, int]:
    """Tiles per block (at most as many as keep a block's 16 transformed patches and products
    within ``WINOGRAD_BLOCK`` bytes, at least 16) and the parts the output channels are cut
    into (enough for ``WINOGRAD_TASKS`` tasks, at least 32 channels each), the tasks a
    multiple of ``WINOGRAD_TASKS`` where there are tiles enough, so that threads finish
    together: by the shape alone, so the results do not depend on the thread count."""
    tiles = batch * ((int(words[4]) + 1) // 2) * ((int(words[5]) + 1) // 2)
    tile_block = max(16, WINOGRAD_BLOCK // (16 * (channels + m) * itemsize))
    blocks = -(-tiles // tile_block)
    m_parts = max(1, min(m // 32, -(-WINOGRAD_TASKS // (groups * blocks))))
    per_block = groups * m_parts
    even = -(-blocks * per_block // WINOGRAD_TASKS) * WINOGRAD_TASKS // per_block
    if even * per_block % WINOGRAD_TASKS == 0 and tiles >= 16 * even:
        blocks = even
    return -(-tiles // blocks), m_parts


def geometry(in_size: tuple[int, ...], out_size: tuple[int, ...], kernel: tuple[int, ...],
             stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...],
             x_strides: tuple[int, ...]) -> np.ndarray:
    """The geometry words of a convolution of 1 to 3 spatial dims, as ``SOURCE`` reads them: per
    spatial dim (three, leading ones of size 1 added) the input and output sizes, kernel,
    stride, padding, dilation and the input's stride, field by field."""
    lead = 3 - len(kernel)
    words: list[int] = []
    for values, fill in ((in_size, 1), (out_size, 1), (kernel, 1), (stride, 1), (padding, 0),
                         (dilation, 1), (x_strides, 0)):
        words += [fill] * lead + list(values)
    return np.array(words, np.int64)


class NativeConv:
    """The compiled convolutions of ``SOURCE``, over ``blas.Gemm``'s BLAS functions."""

    def __init__(self, compiler: Any, gemm: Any) -> None:
        self.entries: dict[str, tuple[Any, Any, int]] = {}
        #: ``burnish.cpu.direct``'s depthwise convolutions (one input channel per group), by
        #: dtype.
        self.depthwise: dict[str, Any] = {}
        #: ``burnish.cpu.direct``'s convolutions with few input channels and taps, by dtype.
        self.few: dict[str, Any] = {}
        #: Forward convolutions of one task (a batch of one, one block), in parts of channels.
        self.merged: dict[str, Any] = {}
        #: ``burnish.cpu.winograd``'s 3x3 convolutions over BLAS, by dtype.
        self.winograd: dict[str, tuple[Any, int]] = {}
        library = compiler.build(SOURCE)
        minimal = compiler.build(winograd.SOURCE)
        summed = compiler.build(direct.SOURCE)
        self.patches = library.burnish_patches_u8
        self.patches.argtypes = [_P, _P, _I64, _I64, _I64, _I64, ctypes.c_uint8, _P]
        self.patches.restype = None
        for dtype, (address, wide) in gemm.pointers().items():
            name = f"burnish_conv_{'f32' if dtype == 'float32' else 'f64'}_" \
                   f"{'i64' if wide else 'i32'}"
            forward = getattr(library, f"{name}_forward")
            forward.argtypes = [_P, _P, ctypes.c_int, _P, _I64, _I64, _I64, _I64, _I64, _P, _I64,
                                _P, _P, _I64, _P]
            forward.restype = ctypes.c_int
            merged = getattr(library, f"{name}_forward_merged")
            merged.argtypes = [_P, _P, ctypes.c_int, _P, _I64, _I64, _I64, _I64, _I64, _P, _I64,
                               _P, _P, _I64, _P]
            merged.restype = ctypes.c_int
            self.merged[dtype] = merged
            weight = getattr(library, f"{name}_weight_grad")
            weight.argtypes = [_P, _P, _P, _I64, _I64, _I64, _I64, _I64, _P, _I64, _P,
                               ctypes.c_int, _I64]
            weight.restype = ctypes.c_int
            self.entries[dtype] = (forward, weight, address)
            function = getattr(minimal, f"{name}_winograd")
            function.argtypes = [_P, _P, _P, _I64, _I64, _I64, _I64, _I64, _P, _I64, _P, _P, _I64,
                                 _I64, _P]
            function.restype = ctypes.c_int
            self.winograd[dtype] = (function, address)
        for dtype, suffix in (("float32", "f32"), ("float64", "f64")):
            depthwise = getattr(summed, f"burnish_conv_{suffix}_depthwise")
            depthwise.argtypes = [_P, _P, _I64, _I64, _I64, _I64, _P, _I64, _P, _P, _P]
            depthwise.restype = ctypes.c_int
            self.depthwise[dtype] = depthwise
            few = getattr(summed, f"burnish_conv_{suffix}_few")
            few.argtypes = [_P, _P, _I64, _I64, _I64, _I64, _I64, _P, _I64, _P, _P, _I64, _P]
            few.restype = ctypes.c_int
            self.few[dtype] = few
        self.library = library  # kept loaded while the entries may run
        self.minimal = minimal
        self.summed = summed

    def forward(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
                out: np.ndarray, words: np.ndarray, groups: int, transposed: bool) -> None:
        """``out`` ``[batch, groups * m, *out_size]`` (contiguous) = ``weight`` ``[groups, m,
        channels * taps]`` (contiguous) times the patches of ``x`` (any strides). Depthwise
        convolutions of 1 or 2 spatial dims (one input channel per group, not transposed) and
        those with few input channels and taps (``direct.FEW_INNER``) sum their taps directly
        (``burnish.cpu.direct``); 3x3 ones at unit stride with enough channels and positions
        go through ``burnish.cpu.winograd``; pointwise ones multiply ``x`` where it lies (the
        batch as one product's rows where a sample has one position)."""
        self.bind_forward(x, weight, bias, out, words, groups, transposed)()

    def takes_epilogue(self, x: np.ndarray, weight: np.ndarray, out: np.ndarray,
                       words: np.ndarray, groups: int, transposed: bool) -> bool:
        """Whether ``bind_forward`` runs this convolution with an epilogue: every way but
        Winograd's, whose output comes a tile row of a channel at a time (a run of a few
        dozen elements, each a call: slower than a pass of its own afterwards)."""
        return self._way(x, weight, out, words, groups, transposed) != "winograd"

    def _way(self, x: np.ndarray, weight: np.ndarray, out: np.ndarray, words: np.ndarray,
             groups: int, transposed: bool) -> str:
        """Which of ``SOURCE``'s, ``burnish.cpu.direct``'s and ``burnish.cpu.winograd``'s
        convolutions ``forward`` runs: ``"depthwise"``, ``"few"``, ``"winograd"`` or
        ``"patches"``."""
        batch, channels = x.shape[0], x.shape[1] // groups
        # 1 and 2 spatial dims: the first of the three geometry dims is 1 in size and kernel.
        if (channels == 1 and not transposed and out.dtype.name in self.depthwise
                and words[0] == 1 and words[6] == 1):
            return "depthwise"
        if (not transposed and out.dtype.name in self.few and words[0] == 1 and words[6] == 1
                and 0 < channels * int(words[7]) * int(words[8]) <= direct.FEW_INNER
                and words[7] * words[8] > 1):
            return "few"
        if (out.dtype.name in self.winograd
                and _winograd_takes(words, batch, channels, weight.shape[1], transposed)):
            return "winograd"
        return "patches"

    def bind_forward(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
                     out: np.ndarray, words: np.ndarray, groups: int, transposed: bool,
                     epilogue: Epilogue | None = None) -> Callable[[], None]:
        """``forward`` of these arrays as a call of no arguments, what it hands to C worked
        out once (a replay calls it on arrays that stay where they are). With ``epilogue``
        (every way but Winograd's: ``takes_epilogue``), every block of ``out`` is passed
        through its elementwise kernel as soon as it is written, each element once."""
        size = x.dtype.itemsize
        batch, channels = x.shape[0], x.shape[1] // groups
        bias_address = None if bias is None else bias.ctypes.data
        function: Any
        args: tuple[Any, ...]
        workspace: np.ndarray | None = None
        way = self._way(x, weight, out, words, groups, transposed)
        if epilogue is not None and way == "winograd":
            raise ValueError("cpu backend: Winograd's convolutions take no epilogue")
        if way == "depthwise":
            function, what = self.depthwise[out.dtype.name], \
                "a depthwise convolution's padded input"
            args = (words.ctypes.data, x.ctypes.data, x.strides[0] // size,
                    x.strides[1] // size, batch, groups, weight.ctypes.data, weight.shape[1],
                    bias_address, out.ctypes.data)
        elif way == "few":
            function, what = self.few[out.dtype.name], "a convolution's phase planes"
            m = weight.shape[1]
            args = (words.ctypes.data, x.ctypes.data, x.strides[0] // size,
                    x.strides[1] // size, batch, groups, channels, weight.ctypes.data, m,
                    bias_address, out.ctypes.data, direct.few_rows(words, channels, m))
        elif way == "winograd":
            function, gemm = self.winograd[out.dtype.name]
            what = "a Winograd convolution's transformed tiles"
            m = weight.shape[1]
            # The transformed weights: 16 matrices [m, channels] per group, a cache line apart.
            workspace = np.empty(groups * 16 * (m * channels + 64 // size), out.dtype)
            tile_block, m_parts = _winograd_blocks(words, batch, groups, channels, m, size)
            args = (gemm, words.ctypes.data, x.ctypes.data, x.strides[0] // size,
                    x.strides[1] // size, batch, groups, channels, weight.ctypes.data, m,
                    bias_address, out.ctypes.data, tile_block, m_parts, workspace.ctypes.data)
        else:
            function, _, gemm = self.entries[out.dtype.name]
            what = "a convolution's patch matrix"
            m, lines_per_block = weight.shape[1], _lines_per_block(weight.shape[2], words)
            last = lines_per_block
            if (lines_per_block >= words[3] * words[4] and batch * groups < MERGE_TASKS
                    and m >= 2 * MERGE_CHANNELS):
                # One block per sample and too few of them for the threads.
                function, last = self.merged[out.dtype.name], min(MERGE_PARTS, m // MERGE_CHANNELS)
            args = (gemm, words.ctypes.data, int(transposed), x.ctypes.data,
                    x.strides[0] // size, x.strides[1] // size, batch, groups, channels,
                    weight.ctypes.data, m, bias_address, out.ctypes.data, last)

        if way != "winograd":
            args += (None if epilogue is None else ctypes.addressof(epilogue),)

        def run(words: np.ndarray = words, workspace: np.ndarray | None = workspace,
                epilogue: Epilogue | None = epilogue) -> None:
            # words, the workspace and the epilogue (and its info): C reads their memory
            if function(*args):
                raise MemoryError(f"cpu backend: no memory for {what}")

        return run

    def weight_grad(self, x: np.ndarray, grad: np.ndarray, out: np.ndarray, words: np.ndarray,
                    groups: int, accumulate: bool) -> None:
        """``out`` ``[groups, m, channels * taps]`` (+)= the gradient's products with the
        patches of ``x``, summed over the batch."""
        _, weight, gemm = self.entries[out.dtype.name]
        size = x.dtype.itemsize
        batch, channels = x.shape[0], x.shape[1] // groups
        failed = weight(gemm, words.ctypes.data, x.ctypes.data, x.strides[0] // size,
                        x.strides[1] // size, batch, groups, channels, grad.ctypes.data,
                        out.shape[1], out.ctypes.data, int(accumulate),
                        _lines_per_block(out.shape[2], words))
        if failed:
            raise MemoryError("cpu backend: no memory for a convolution's patch matrix")

    def patch_matrices(self, x: np.ndarray, out: np.ndarray, words: np.ndarray,
                       pad: int) -> None:
        """``out`` ``[batch, channels * taps, positions]`` (contiguous): the patches of the
        8-bit ``x`` (any strides), ``pad`` (a byte) where a tap falls in the padding."""
        self.patches(words.ctypes.data, x.ctypes.data, x.strides[0], x.strides[1], x.shape[0],
                     x.shape[1], pad & 0xFF, out.ctypes.data)
