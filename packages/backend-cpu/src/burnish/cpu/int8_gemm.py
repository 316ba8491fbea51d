"""int8 matrix products in compiled C: 8-bit integers multiplied, summed exactly in int32, scaled
to float32 once per output element.

``C[m, n] = sa[m] * sb[n] * sum_k (a[m, k] - za[m]) * (b[k, n] - zb[n])``, with ``a`` [M, K] and
``b`` [K, N] int8 or uint8 (any strides), per-row and per-column scales and zero points (a
per-tensor value repeated). The sum is exact (int32, as a NumPy int32 product of the same
integers gives it) and the scaling is NumPy's: ``float32(sum) * (sa[m] * sb[n])``.

Where the compiler targets AVX-512 VNNI (``-march=native`` on a CPU that has it), the product is
``vpdpbusd``: 64 multiply-adds of unsigned by signed bytes an instruction (else, with AVX2, the
bytes widened to int16 and ``vpmaddwd``: 16 an instruction). Unsigned ``a`` comes
from int8 values by adding 128 (and uint8 values are taken as they are), signed ``b`` from uint8
values by subtracting 128; the offsets join the zero points and come out in the epilogue through
the columns' sums of ``b`` (made when ``b`` is packed) and the rows' sums of ``a``. Elsewhere a
portable C loop over the same packed layouts computes the same integers (no AVX2 either).

Layouts: ``b`` is packed once (a quantized layer's weights are constant: ``Int8Gemm.pack``'s
result is kept by the caller) into panels of ``NR`` columns, each panel groups of 4 rows, a group
``NR`` columns of 4 consecutive bytes (what one 32-bit lane of ``vpdpbusd`` reads), rows padded
with zeros to a multiple of 4 and columns to a multiple of ``NR``. Each task packs its block of
``a`` (``MC`` rows) the same way, ``MR`` rows a panel, into memory of its own that stays in the
cache while every panel of ``b`` passes; the micro-kernel keeps an ``MR`` x ``NR`` tile of int32
sums in registers over the whole inner dim. Tasks are blocks of rows times chunks of columns,
shared by the thread pool's threads (``burnish.cpu.threads``).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from burnish.jit.codegen.cpu import PARALLEL_HEADER

#: Rows and columns of the micro-kernel's tile, rows of a task's block of ``a``.
MR, NR, MC = 8, 32, 64

#: The longest inner dim the kernel takes: every partial sum, offsets included (at most
#: 255 * 128 a term), and the result (255 * 255 a term, affine uint8 by uint8) stay in int32.
MAX_INNER = 32768

SOURCE = PARALLEL_HEADER + r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* The best instructions the compiler targets; BURNISH_AT_MOST_AVX2 and BURNISH_PORTABLE take
   lesser ones (for tests). */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__) \
    && !defined(BURNISH_AT_MOST_AVX2) && !defined(BURNISH_PORTABLE)
#include <immintrin.h>
#define VNNI 1
#elif defined(__AVX2__) && !defined(BURNISH_PORTABLE)
#include <immintrin.h>
#define AVX2 1
#endif

const char *burnish_int8_gemm_path(void) {
#if defined(VNNI)
    return "avx512-vnni";
#elif defined(AVX2)
    return "avx2";
#else
    return "portable";
#endif
}

struct pack_args {
    int64_t k, n, kp, rs, cs;
    const uint8_t *b;
    int is_signed;
    int8_t *packed;
    int32_t *colsum;
};

static void pack_panels(void *context, int64_t begin, int64_t end) {
    const struct pack_args *args = context;
    int64_t k = args->k, n = args->n, kp = args->kp, rs = args->rs, cs = args->cs;
    const uint8_t *b = args->b;
    int is_signed = args->is_signed;
    int8_t *packed = args->packed;
    int32_t *colsum = args->colsum;
    for (int64_t p = begin; p < end; p++) {
        int8_t *dst = packed + p * kp * NR;
        for (int64_t j = 0; j < NR; j++) {
            int64_t col = p * NR + j;
            int32_t sum = 0;
            for (int64_t r = 0; r < kp; r++) {
                int8_t v = 0;
                if (col < n && r < k) {
                    uint8_t raw = b[r * rs + col * cs];
                    v = is_signed ? (int8_t)raw : (int8_t)(raw - 128);
                }
                dst[(r / 4) * NR * 4 + j * 4 + r % 4] = v;
                sum += v;
            }
            if (col < n) colsum[col] = sum;
        }
    }
}

/* b [k, n] (element strides rs, cs; signed: int8, else uint8 stored as b - 128) into panels
   of NR columns, groups of 4 rows; colsum[n]: the column's sum of the stored signed bytes. */
void burnish_int8_pack_b(int64_t k, int64_t n, const uint8_t *b, int64_t rs, int64_t cs,
                         int is_signed, int8_t *packed, int32_t *colsum) {
    int64_t kp = (k + 3) / 4 * 4, panels = (n + NR - 1) / NR;
    struct pack_args args = {k, n, kp, rs, cs, b, is_signed, packed, colsum};
    burnish_parallel(pack_panels, &args, panels, burnish_parts(1));
}

/* Rows [m0, m0 + rows) of a into MR-row panels of 4-byte groups as unsigned bytes (int8
   values + 128), and each row's sum of those bytes. */
static void pack_a(int64_t k, int64_t kp, const uint8_t *a, int64_t rs, int64_t cs,
                   int is_signed, int64_t m0, int64_t rows, uint8_t *dst, int32_t *rowsum) {
    uint8_t flip = is_signed ? 128 : 0;
    int64_t panels = (rows + MR - 1) / MR;
    for (int64_t p = 0; p < panels; p++) {
        uint8_t *panel = dst + p * kp * MR;
        for (int64_t i = 0; i < MR; i++) {
            int64_t row = p * MR + i;
            int32_t sum = 0;
            if (row < rows) {
                const uint8_t *src = a + (m0 + row) * rs;
                if (cs == 1) {
                    for (int64_t r = 0; r < k; r++) {
                        uint8_t v = src[r] ^ flip;
                        panel[(r / 4) * MR * 4 + i * 4 + r % 4] = v;
                        sum += v;
                    }
                } else {
                    for (int64_t r = 0; r < k; r++) {
                        uint8_t v = src[r * cs] ^ flip;
                        panel[(r / 4) * MR * 4 + i * 4 + r % 4] = v;
                        sum += v;
                    }
                }
                for (int64_t r = k; r < kp; r++) panel[(r / 4) * MR * 4 + i * 4 + r % 4] = 0;
            } else {
                for (int64_t r = 0; r < kp; r++) panel[(r / 4) * MR * 4 + i * 4 + r % 4] = 0;
            }
            rowsum[p * MR + i] = sum;
        }
    }
}

/* tile[i * NR + j] = sum over the groups of ap's row i times bp's column j. */
static void micro(int64_t groups, const uint8_t *restrict ap, const int8_t *restrict bp,
                  int32_t *restrict tile) {
#ifdef VNNI
    __m512i acc[MR][NR / 16];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NR / 16; v++) acc[i][v] = _mm512_setzero_si512();
    for (int64_t g = 0; g < groups; g++) {
        __m512i b[NR / 16];
        for (int v = 0; v < NR / 16; v++) b[v] = _mm512_loadu_si512(bp + 64 * v);
        for (int i = 0; i < MR; i++) {
            int32_t word;
            memcpy(&word, ap + 4 * i, 4);
            __m512i a = _mm512_set1_epi32(word);
            for (int v = 0; v < NR / 16; v++) acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], a, b[v]);
        }
        ap += 4 * MR;
        bp += 4 * NR;
    }
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NR / 16; v++) _mm512_storeu_si512(tile + i * NR + 16 * v, acc[i][v]);
#elif defined(AVX2)
    /* vpmaddubsw would saturate (255 * -128 twice is past int16): bytes widened to int16 and
       multiplied by vpmaddwd, exact. A vector holds 4 columns of a group, 2 sums a column
       (k0 k1 and k2 k3), added at the end; 4 rows by 8 columns a pass, 8 accumulators. */
    for (int i0 = 0; i0 < MR; i0 += 4)
        for (int c0 = 0; c0 < NR; c0 += 8) {
            __m256i acc[4][2];
            for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
            const uint8_t *a = ap + 4 * i0;
            const int8_t *b = bp + 4 * c0;
            for (int64_t g = 0; g < groups; g++) {
                __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b));
                __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16)));
                for (int i = 0; i < 4; i++) {
                    int32_t word;
                    memcpy(&word, a + 4 * i, 4);
                    __m256i w = _mm256_cvtepu8_epi16(_mm_set1_epi32(word));
                    acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(w, b0));
                    acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(w, b1));
                }
                a += 4 * MR;
                b += 4 * NR;
            }
            for (int i = 0; i < 4; i++)
                for (int h = 0; h < 2; h++) {
                    int32_t pairs[8];
                    _mm256_storeu_si256((__m256i *)pairs, acc[i][h]);
                    for (int j = 0; j < 4; j++)
                        tile[(i0 + i) * NR + c0 + 4 * h + j] = pairs[2 * j] + pairs[2 * j + 1];
                }
        }
#else
    int32_t acc[MR][NR];
    memset(acc, 0, sizeof(acc));
    for (int64_t g = 0; g < groups; g++) {
        for (int i = 0; i < MR; i++) {
            const uint8_t *a = ap + 4 * i;
            for (int j = 0; j < NR; j++) {
                const int8_t *b = bp + 4 * j;
                acc[i][j] += a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
            }
        }
        ap += 4 * MR;
        bp += 4 * NR;
    }
    memcpy(tile, acc, sizeof(acc));
#endif
}

/* A product's arguments, shared by its parallel ranges of tasks. */
struct gemm_args {
    int64_t m, n, k, kp, groups, panels, chunks, ars, acs, ldc;
    const uint8_t *a;
    int a_signed, b_signed;
    const int8_t *packed;
    const int32_t *colsum, *za, *zb;
    const float *sa, *sb;
    float *c;
    int failed;
};

/* Tasks [begin, end): blocks of rows times chunks of columns, on one packed block of a. */
static void gemm_tasks(void *context, int64_t begin, int64_t end) {
    struct gemm_args *args = context;
    int64_t m = args->m, n = args->n, k = args->k, kp = args->kp, groups = args->groups;
    int64_t panels = args->panels, chunks = args->chunks, ldc = args->ldc;
    int a_signed = args->a_signed, b_signed = args->b_signed;
    const uint8_t *a = args->a;
    int64_t ars = args->ars, acs = args->acs;
    const int8_t *packed = args->packed;
    const int32_t *colsum = args->colsum, *za = args->za, *zb = args->zb;
    const float *sa = args->sa, *sb = args->sb;
    float *c = args->c;
    uint8_t *ablock = aligned_alloc(64, (size_t)(MC * kp + 64));
    int32_t *rowsum = malloc(sizeof(int32_t) * MC);
    int32_t tile[MR * NR] __attribute__((aligned(64)));
    if (!ablock || !rowsum) {
        free(ablock);
        free(rowsum);
        __atomic_store_n(&args->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t task = begin; task < end; task++) {
        int64_t block = task / chunks, chunk = task % chunks;
        int64_t m0 = block * MC, rows = m - m0 < MC ? m - m0 : MC;
        int64_t p0 = panels * chunk / chunks, p1 = panels * (chunk + 1) / chunks;
        pack_a(k, kp, a, ars, acs, a_signed, m0, rows, ablock, rowsum);
        for (int64_t p = p0; p < p1; p++) {
            const int8_t *bp = packed + p * kp * NR;
            int64_t n0 = p * NR, cols = n - n0 < NR ? n - n0 : NR;
            for (int64_t i0 = 0; i0 < rows; i0 += MR) {
                micro(groups, ablock + i0 * kp, bp, tile);
                int64_t height = rows - i0 < MR ? rows - i0 : MR;
                for (int64_t i = 0; i < height; i++) {
                    int64_t row = m0 + i0 + i;
                    /* sum (au - za')(bs - zb') = S - za' colsum - zb' (rowsum - k za'),
                       with au = a + 128 (int8 a), bs = b - 128 (uint8 b); computed in
                       uint32 (wrapping) since only the exact result fits int32. */
                    uint32_t zar = (uint32_t)za[row] + (a_signed ? 128u : 0u);
                    uint32_t rest = (uint32_t)rowsum[i0 + i] - (uint32_t)k * zar;
                    float scale = sa[row];
                    float *out = c + row * ldc + n0;
                    const int32_t *t = tile + i * NR;
                    for (int64_t j = 0; j < cols; j++) {
                        uint32_t zbr = (uint32_t)zb[n0 + j] - (b_signed ? 0u : 128u);
                        uint32_t sum = (uint32_t)t[j] - zar * (uint32_t)colsum[n0 + j]
                                       - zbr * rest;
                        out[j] = (float)(int32_t)sum * (scale * sb[n0 + j]);
                    }
                }
            }
        }
    }
    free(ablock);
    free(rowsum);
}

/* c [m, n] (rows ldc apart) = sa[i] * sb[j] * sum_k (a - za)(b - zb), a [m, k] (strides ars,
   acs; int8 where a_signed, else uint8), b packed by burnish_int8_pack_b with its colsum; za,
   zb the zero points as stored (ints per row, per column). Returns nonzero when memory ran
   out. */
int burnish_int8_gemm(int64_t m, int64_t n, int64_t k, const uint8_t *a, int64_t ars,
                      int64_t acs, int a_signed, const int8_t *packed, const int32_t *colsum,
                      int b_signed, const int32_t *za, const int32_t *zb, const float *sa,
                      const float *sb, float *c, int64_t ldc) {
    int threads = burnish_threads;
    int64_t kp = (k + 3) / 4 * 4, groups = kp / 4, panels = (n + NR - 1) / NR;
    int64_t blocks = (m + MC - 1) / MC;
    /* Enough tasks for every thread: columns cut in chunks where rows are few. */
    int64_t chunks = 1;
    while (blocks * chunks < 4 * threads && chunks * 2 <= panels) chunks *= 2;
    int64_t tasks = blocks * chunks;
    struct gemm_args args = {m, n, k, kp, groups, panels, chunks, ars, acs, ldc, a, a_signed,
                             b_signed, packed, colsum, za, zb, sa, sb, c, 0};
    burnish_parallel(gemm_tasks, &args, tasks, tasks > 1 && m * n * k > (1 << 18) ? tasks : 1);
    return args.failed;
}
"""


class Int8Gemm:
    """The compiled kernel, on the thread pool (``burnish.cpu.threads``).
    ``at_most``: ``"avx2"`` or ``"portable"`` keeps it from better instructions (for tests)."""

    def __init__(self, compiler: Any, at_most: str | None = None) -> None:
        source = f"#define MR {MR}\n#define NR {NR}\n#define MC {MC}\n" + SOURCE
        if at_most is not None:
            if at_most not in ("avx2", "portable"):
                raise ValueError(f"int8 kernel: at_most is 'avx2' or 'portable', got "
                                 f"{at_most!r}")
            macro = "BURNISH_AT_MOST_AVX2" if at_most == "avx2" else "BURNISH_PORTABLE"
            source = f"#define {macro} 1\n" + source
        library = compiler.build(source)
        self.library = library
        path = library.burnish_int8_gemm_path
        path.restype = ctypes.c_char_p
        #: Which micro-kernel was compiled: ``"avx512-vnni"``, ``"avx2"`` or ``"portable"``.
        self.path: str = path().decode()
        i64, ptr, integer = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
        self._pack = library.burnish_int8_pack_b
        self._pack.argtypes = [i64, i64, ptr, i64, i64, integer, ptr, ptr]
        self._pack.restype = None
        self._gemm = library.burnish_int8_gemm
        self._gemm.argtypes = ([i64, i64, i64, ptr, i64, i64, integer, ptr, ptr, integer]
                               + [ptr] * 5 + [i64])
        self._gemm.restype = integer

    def pack(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``b`` [K, N] (int8 or uint8, any strides) as the kernel reads it: the packed bytes
        and the columns' sums."""
        k, n = b.shape
        kp = -(-k // 4) * 4
        panels = -(-n // NR)
        packed = _aligned(panels * kp * NR, np.int8)
        colsum = np.empty(n, np.int32)
        item = b.itemsize
        self._pack(k, n, b.ctypes.data, b.strides[0] // item, b.strides[1] // item,
                   int(b.dtype == np.int8), packed.ctypes.data, colsum.ctypes.data)
        return packed, colsum

    def product(self, a: np.ndarray, packed: tuple[np.ndarray, np.ndarray], b_signed: bool,
                za: np.ndarray, zb: np.ndarray, sa: np.ndarray, sb: np.ndarray,
                out: np.ndarray) -> None:
        """``out`` [M, N] float32 (rows plain) = the scaled exact product of ``a`` [M, K] and
        the packed ``b``: ``za``/``sa`` int32/float32 per row, ``zb``/``sb`` per column, all
        contiguous."""
        m, k = a.shape
        n = out.shape[1]
        if k > MAX_INNER:
            raise ValueError(f"int8 product: inner dim {k} is longer than the kernel's "
                             f"{MAX_INNER} (int32 sums)")
        b, colsum = packed
        item = a.itemsize
        failed = self._gemm(m, n, k, a.ctypes.data, a.strides[0] // item, a.strides[1] // item,
                            int(a.dtype == np.int8), b.ctypes.data, colsum.ctypes.data,
                            int(b_signed), za.ctypes.data, zb.ctypes.data, sa.ctypes.data,
                            sb.ctypes.data, out.ctypes.data, out.strides[0] // 4)
        if failed:
            raise MemoryError(f"int8 product: no memory for a block of {MC} rows of a "
                              f"[{m}, {k}] operand")


def _aligned(count: int, dtype: Any) -> np.ndarray:
    """``count`` elements of ``dtype`` starting at a 64-byte boundary."""
    raw = np.zeros(count + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + count].view(dtype)
