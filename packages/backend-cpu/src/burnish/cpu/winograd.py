"""3x3 convolutions at unit stride as Winograd's F(2x2, 3x3): 16 products instead of 36 per tile.

Lavin and Gray's minimal filtering: each 2x2 block of outputs (a tile) of a 3x3 convolution is
``A^T [(G g G^T) * (B^T d B)] A``, where ``d`` is the tile's 4x4 input patch, ``g`` the kernel,
``*`` the element-wise product. Summed over input channels, the 16 element-wise products of a
tile become 16 independent matrix products, ``U[e] [m, channels]`` (the transformed weights)
times ``V[e] [channels, tiles]`` (the transformed patches): 16 multiply-adds per channel per
tile of 4 outputs against the direct form's 36, 2.25x fewer. The transforms (additions and
halvings only) run in C, the products through single-threaded BLAS calls on the cpu backend's
thread pool (``burnish.cpu.threads``; ``blas.Gemm``'s function pointers), as the patch-matrix
path does.

The weights are transformed first, on every call (a parallel loop of its own, into a workspace
the caller keeps, ``burnish.cpu.conv``'s bound call). Then a task is a block of tiles of one group,
numbered over the batch, row by row, and a part of its output channels: its patches are
transformed into a buffer of the range's own, multiplied, and transformed back straight into the
output with the bias, while the block is in the cache. Blocks and parts are cut by the shape
alone (``burnish.cpu.conv._winograd_blocks``: BLAS rounds a block's sums by its width), so
the result does not depend on how many threads run. Tiles on the bottom and right edges (odd
output sizes) read zeros past the input and store only the outputs that exist.

Rounding: the transforms add at most 4 terms per stage with weights 1 and 1/2, so each output
is the exact sum's value within a few float32 ulps of the sum of the terms' magnitudes, as the
direct form's is (checked against float64 references in the conformance suite).
"""

from __future__ import annotations

from burnish.jit.codegen.cpu import PARALLEL_HEADER

SOURCE = PARALLEL_HEADER + r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* B^T d B of the patches of tiles k, k + 1, ... (as many as V holds: a vector type or a
   scalar): row i of a tile's patch is ev[i][k], od[i][k], ev[i][k + 1], od[i][k + 1]; the 16
   results go to dst, step apart. */
#define WG_INPUT(V, k)                                                                        \
    {                                                                                        \
        V r[4][4], s[4][4];                                                                  \
        for (int i = 0; i < 4; i++) {                                                        \
            memcpy(&r[i][0], ev[i] + (k), sizeof(V));                                        \
            memcpy(&r[i][1], od[i] + (k), sizeof(V));                                        \
            memcpy(&r[i][2], ev[i] + (k) + 1, sizeof(V));                                    \
            memcpy(&r[i][3], od[i] + (k) + 1, sizeof(V));                                    \
        }                                                                                    \
        for (int j = 0; j < 4; j++) {                                                        \
            s[0][j] = r[0][j] - r[2][j];                                                     \
            s[1][j] = r[1][j] + r[2][j];                                                     \
            s[2][j] = r[2][j] - r[1][j];                                                     \
            s[3][j] = r[1][j] - r[3][j];                                                     \
        }                                                                                    \
        for (int i = 0; i < 4; i++) {                                                        \
            V z[4] = {s[i][0] - s[i][2], s[i][1] + s[i][2], s[i][2] - s[i][1],               \
                      s[i][1] - s[i][3]};                                                    \
            for (int j = 0; j < 4; j++)                                                      \
                memcpy(dst + (i * 4 + j) * step + (k), &z[j], sizeof(V));                    \
        }                                                                                    \
    }

/* A^T M A + start of tiles k, k + 1, ... (V as above): the 16 products are src's, step
   apart; each tile's four outputs go to rows[0..3] (top left, top right, bottom left,
   bottom right). */
#define WG_OUTPUT(V, k)                                                                       \
    {                                                                                        \
        V p[16], s0[4], s1[4];                                                               \
        for (int e = 0; e < 16; e++) memcpy(&p[e], src + e * step + (k), sizeof(V));         \
        for (int j = 0; j < 4; j++) {                                                        \
            s0[j] = p[j] + p[4 + j] + p[8 + j];                                              \
            s1[j] = p[4 + j] - p[8 + j] - p[12 + j];                                         \
        }                                                                                    \
        V y[4] = {start + (s0[0] + s0[1] + s0[2]), start + (s0[1] - s0[2] - s0[3]),          \
                  start + (s1[0] + s1[1] + s1[2]), start + (s1[1] - s1[2] - s1[3])};         \
        for (int q = 0; q < 4; q++) memcpy(rows[q] + (k), &y[q], sizeof(V));                 \
    }

#define WINOGRAD(NAME, T, I, LANES)                                                           \
typedef void (*NAME##_wgemm)(int, int, int, I, I, I, T, const T *, I, const T *, I, T, T *, I); \
typedef T NAME##_vec __attribute__((vector_size(LANES * sizeof(T))));                        \
                                                                                             \
/* A call's arguments, shared by the ranges of its two loops. */                            \
struct NAME##_args {                                                                         \
    NAME##_wgemm gemm;                                                                       \
    const int64_t *g;                                                                        \
    const T *x, *w, *bias;                                                                   \
    int64_t xsb, xsc, groups, channels, m, m_parts, tiles, blocks, size, vstep, pstep, ustep; \
    T *out, *u;                                                                              \
    int failed;                                                                              \
};                                                                                           \
                                                                                             \
/* Rows [begin, end) of u [groups, 16, m, channels] (the 16 matrices ustep apart) = G g G^T   \
   of w [groups, m, channels, 3, 3] (contiguous), a row per (group, output, input channel). */ \
static void NAME##_weights(void *context, int64_t begin, int64_t end) {                      \
    const struct NAME##_args *a = context;                                                   \
    const T *w = a->w;                                                                       \
    int64_t m = a->m, channels = a->channels, ustep = a->ustep;                              \
    T *u = a->u;                                                                             \
    for (int64_t i = begin; i < end; i++) {                                                  \
        int64_t gi = i / (m * channels), r = i % (m * channels);                             \
        const T *k = w + i * 9;                                                              \
        T t[4][3], v[16];                                                                    \
        for (int j = 0; j < 3; j++) {                                                        \
            t[0][j] = k[j];                                                                  \
            t[1][j] = (k[j] + k[3 + j] + k[6 + j]) * (T)0.5;                                 \
            t[2][j] = (k[j] - k[3 + j] + k[6 + j]) * (T)0.5;                                 \
            t[3][j] = k[6 + j];                                                              \
        }                                                                                    \
        for (int a = 0; a < 4; a++) {                                                        \
            v[a * 4 + 0] = t[a][0];                                                          \
            v[a * 4 + 1] = (t[a][0] + t[a][1] + t[a][2]) * (T)0.5;                           \
            v[a * 4 + 2] = (t[a][0] - t[a][1] + t[a][2]) * (T)0.5;                           \
            v[a * 4 + 3] = t[a][2];                                                          \
        }                                                                                    \
        T *dst = u + gi * 16 * ustep + r;                                                    \
        for (int e = 0; e < 16; e++) dst[e * ustep] = v[e];                                  \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* Tasks [begin, end) of NAME##_winograd, on one buffer of transformed patches and products: \
   a task is a block of tiles of one group and a part of its output channels, the tiles      \
   transformed, multiplied and transformed back straight into the output, with the bias. */  \
static void NAME##_tiles(void *context, int64_t begin, int64_t end) {                        \
    struct NAME##_args *a = context;                                                         \
    NAME##_wgemm gemm = a->gemm;                                                             \
    const int64_t *g = a->g;                                                                 \
    const T *x = a->x, *bias = a->bias, *u = a->u;                                           \
    int64_t h = g[1], wd = g[2], oh = g[4], ow = g[5], p0 = g[13], p1 = g[14];               \
    int64_t xs0 = g[19], xs1 = g[20], xsb = a->xsb, xsc = a->xsc;                            \
    int64_t th = (oh + 1) / 2, tw = (ow + 1) / 2, per_sample = th * tw, positions = oh * ow; \
    int64_t groups = a->groups, channels = a->channels, m = a->m, m_parts = a->m_parts;      \
    int64_t tiles = a->tiles, blocks = a->blocks, size = a->size;                            \
    int64_t vstep = a->vstep, pstep = a->pstep, ustep = a->ustep;                            \
    T *out = a->out;                                                                         \
    int64_t pad_width = (tw < size ? tw : size) + 1 + 16;                                    \
    T *v = malloc(sizeof(T) * (16 * (vstep + pstep) + 8 * pad_width));                       \
    if (!v) {                                                                                \
        __atomic_store_n(&a->failed, 1, __ATOMIC_RELAXED);                                   \
        return;                                                                              \
    }                                                                                        \
    T *prod = v + 16 * vstep, *pad = prod + 16 * pstep;                                      \
    T *rows[4] = {pad, pad + 2 * pad_width, pad + 4 * pad_width, pad + 6 * pad_width};       \
    for (int64_t task = begin; task < end; task++) {                                         \
        int64_t gi = task / (blocks * m_parts), part = task % m_parts;                       \
        int64_t t0 = (task / m_parts % blocks) * size;                                       \
        int64_t m0 = m * part / m_parts, m1 = m * (part + 1) / m_parts;                      \
        int64_t t1 = t0 + size < tiles ? t0 + size : tiles, nt = t1 - t0;                    \
        /* V[e][c][t] = B^T d B of each tile's 4x4 patch, a run of tiles along a row of       \
           tiles at a time: its 4 input rows copied, zero-padded and split into even and        \
           odd columns, into pad, so that the transform reads 16 contiguous runs with no        \
           bounds checks (a loop the compiler vectorizes). */                                   \
        for (int64_t t = 0; t < nt;) {                                                       \
            int64_t tile = t0 + t, n = tile / per_sample, q = tile % per_sample;             \
            int64_t ty = q / tw, tx0 = q % tw;                                               \
            int64_t len = tw - tx0 < nt - t ? tw - tx0 : nt - t, c0 = 2 * tx0 - p1;          \
            /* column parity r: pad's q reads the input's column c0 + 2q + r, in it for      \
               q in [lo[r], hi[r]) */                                                         \
            int64_t lo[2], hi[2];                                                            \
            for (int r = 0; r < 2; r++) {                                                    \
                int64_t first = -c0 - r, last = wd - 1 - c0 - r;                             \
                lo[r] = first <= 0 ? 0 : (first + 1) / 2;                                    \
                hi[r] = last < 0 ? 0 : last / 2 + 1;                                         \
                if (hi[r] > len + 1) hi[r] = len + 1;                                        \
                if (lo[r] > hi[r]) lo[r] = hi[r];                                            \
            }                                                                                \
            for (int64_t c = 0; c < channels; c++) {                                         \
                const T *xc = x + n * xsb + (gi * channels + c) * xsc;                       \
                for (int i = 0; i < 4; i++) {                                                \
                    int64_t a = 2 * ty - p0 + i;                                             \
                    for (int r = 0; r < 2; r++) {                                            \
                        T *restrict row = pad + (2 * i + r) * pad_width;                     \
                        if (a < 0 || a >= h) {                                               \
                            memset(row, 0, sizeof(T) * (len + 1));                           \
                            continue;                                                        \
                        }                                                                    \
                        const T *restrict src = xc + a * xs0 + (c0 + r) * xs1;               \
                        int64_t stride = 2 * xs1;                                            \
                        for (int64_t j = 0; j < lo[r]; j++) row[j] = 0;                      \
                        for (int64_t j = lo[r]; j < hi[r]; j++) row[j] = src[j * stride];     \
                        for (int64_t j = hi[r]; j <= len; j++) row[j] = 0;                   \
                    }                                                                        \
                }                                                                            \
                const T *ev[4] = {pad, pad + 2 * pad_width, pad + 4 * pad_width,             \
                                  pad + 6 * pad_width};                                      \
                const T *od[4] = {ev[0] + pad_width, ev[1] + pad_width,                      \
                                  ev[2] + pad_width, ev[3] + pad_width};                     \
                T *dst = v + c * size + t;                                                   \
                int64_t step = vstep, k = 0;                                                 \
                for (; k + LANES <= len; k += LANES) WG_INPUT(NAME##_vec, k)                 \
                for (; k < len; k++) WG_INPUT(T, k)                                          \
            }                                                                                \
            t += len;                                                                        \
        }                                                                                    \
        for (int e = 0; e < 16; e++)                                                         \
            gemm(101, 111, 111, (I)(m1 - m0), (I)nt, (I)channels, (T)1,                      \
                 u + (gi * 16 + e) * ustep + m0 * channels, (I)channels,                     \
                 v + e * vstep, (I)size, (T)0, prod + e * pstep, (I)size);                    \
        /* out = A^T M A (+ bias), the outputs that exist: a run of tiles along a row of      \
           tiles at a time, its last tile alone where the output's width is odd */           \
        for (int64_t t = 0; t < nt;) {                                                       \
            int64_t tile = t0 + t, n = tile / per_sample, q = tile % per_sample;             \
            int64_t ty = q / tw, tx0 = q % tw;                                               \
            int64_t len = tw - tx0 < nt - t ? tw - tx0 : nt - t;                             \
            int64_t whole = tx0 + len == tw && ow % 2 ? len - 1 : len;                       \
            int second = 2 * ty + 1 < oh;                                                    \
            int64_t step = pstep;                                                            \
            for (int64_t r = m0; r < m1; r++) {                                              \
                T start = bias ? bias[gi * m + r] : (T)0;                                    \
                const T *src = prod + (r - m0) * size + t;                                   \
                T *y0 = out + (n * groups * m + gi * m + r) * positions             \
                                 + 2 * ty * ow + 2 * tx0;                                    \
                T *y1 = y0 + ow;                                                             \
                int64_t k = 0;                                                               \
                for (; k + LANES <= len; k += LANES) WG_OUTPUT(NAME##_vec, k)                \
                for (; k < len; k++) WG_OUTPUT(T, k)                                         \
                for (int64_t k = 0; k < whole; k++) {                                        \
                    y0[2 * k] = rows[0][k];                                                  \
                    y0[2 * k + 1] = rows[1][k];                                              \
                }                                                                            \
                if (whole < len) y0[2 * whole] = rows[0][whole];                             \
                if (second) {                                                                \
                    for (int64_t k = 0; k < whole; k++) {                                    \
                        y1[2 * k] = rows[2][k];                                              \
                        y1[2 * k + 1] = rows[3][k];                                          \
                    }                                                                        \
                    if (whole < len) y1[2 * whole] = rows[2][whole];                         \
                }                                                                            \
            }                                                                                \
            t += len;                                                                        \
        }                                                                                    \
    }                                                                                        \
    free(v);                                                                                 \
}                                                                                            \
                                                                                             \
/* out [batch, groups * m, oh, ow] (contiguous) = the 3x3 convolution (unit stride and       \
   dilation, padding p0, p1) of x (any strides) with w [groups, m, channels * 9], plus bias. \
   Tiles are blocked tile_block at a time; u holds the transformed weights, groups * 16 *    \
   (m * channels + 64 / sizeof(T)) elements. The weights are transformed first (a loop of    \
   their own: every task reads all of them), then the tasks, a range each, as they come:     \
   each writes outputs of its own, so the result does not depend on which thread ran it.     \
   Returns nonzero where memory ran out. */                                                  \
int NAME##_winograd(void *fn, const int64_t *g, const T *x, int64_t xsb, int64_t xsc,        \
                    int64_t batch, int64_t groups, int64_t channels, const T *w, int64_t m,  \
                    const T *bias, T *out, int64_t tile_block, int64_t m_parts, T *u) {      \
    int64_t tiles = batch * ((g[4] + 1) / 2) * ((g[5] + 1) / 2);                             \
    int64_t blocks = (tiles + tile_block - 1) / tile_block;                                  \
    int64_t size = (tiles + blocks - 1) / blocks; /* even blocks, by the shape alone */      \
    int64_t tasks = groups * blocks * m_parts, count = groups * m * channels;                \
    /* the 16 matrices of a block a cache line more than their size apart: at a power of two \
       apart, the 16 streams of a transform fall in the same cache sets */                   \
    int64_t vstep = channels * size + 64 / sizeof(T), pstep = m * size + 64 / sizeof(T);     \
    int64_t ustep = m * channels + 64 / sizeof(T);                                           \
    struct NAME##_args a = {(NAME##_wgemm)fn, g, x, w, bias, xsb, xsc, groups, channels, m,  \
                            m_parts, tiles, blocks, size, vstep, pstep, ustep, out, u, 0};   \
    burnish_parallel(NAME##_weights, &a, count, burnish_parts(count >= 4096));               \
    burnish_parallel(NAME##_tiles, &a, tasks, tasks);                                        \
    return a.failed;                                                                         \
}

WINOGRAD(burnish_conv_f32_i64, float, int64_t, 16)
WINOGRAD(burnish_conv_f64_i64, double, int64_t, 8)
WINOGRAD(burnish_conv_f32_i32, float, int32_t, 16)
WINOGRAD(burnish_conv_f64_i32, double, int32_t, 8)
"""
