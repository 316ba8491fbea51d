"""Products through NumPy's BLAS, on burnish's threads.

NumPy's OpenBLAS keeps a pool of threads of its own. Its parallel products are jobs that wait
on each other's packed blocks in spin loops, and after each call its threads spin on for about
0.1 s: beside burnish's kernels (or any other busy process) on few cores, a thread spins
while the one it waits for has no core, and interleaved products and kernels ran 3x slower than
either alone (bench/RESULTS.md). So burnish keeps OpenBLAS on one thread while its work calls it
(``OneBlasThread``) and parallelizes products itself: ``Gemm`` splits a product, or a batch of
them, into independent single-threaded BLAS calls run on the kernels' thread pool
(``burnish.cpu.threads``); the threads meet only at the end. ``cblas_sgemm``/``cblas_dgemm``
are called straight on burnish's buffers from C, in whichever of the two layouts each operand
has (no copies).

Found through threadpoolctl; where there is no OpenBLAS, products stay with NumPy's ``matmul``.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from typing import Any

import numpy as np

from burnish.jit.codegen.cpu import PARALLEL_HEADER

#: One product per task: ``count`` products (or, accumulating, one sum of them), each split in
#: ``parts_m`` row blocks and ``parts_n`` column blocks. Addresses come as three int64 arrays.
#: With ``bias`` (a vector of ``n``), each task first writes its block of the output as the
#: bias, broadcast over the rows, and BLAS adds the product to it: the bias pass runs on every
#: thread, on a block that is in the cache when BLAS reads it.
GEMM_SOURCE = PARALLEL_HEADER + r"""
#include <stdint.h>
#include <string.h>

#define SMALL_ROWS 4
#define SMALL_COLUMNS 512
#define SMALL_AHEAD 16
#define SMALL_DEPTH 8
#define GEMM(NAME, T, I)                                                                      \
typedef void (*NAME##_fn)(int, int, int, I, I, I, T, const T *, I, const T *, I, T, T *, I); \
typedef T NAME##_vec __attribute__((vector_size(64)));                                       \
enum { NAME##_lanes = 64 / sizeof(T) };                                                      \
                                                                                             \
/* s[r][u] += the terms of rows [0, d) of b (bi, ldb apart) for the q vectors of columns     \
   and rows r < M of a (a[r * sa + e * ka]), each sum adding them in order; b's rows          \
   SMALL_AHEAD on prefetched where ahead is set. M and d constants where inlined. */         \
static inline __attribute__((always_inline)) void NAME##_depth(                              \
        const int M, const int64_t d, int64_t q, const T *a, int64_t sa, int64_t ka,         \
        const T *bi, int64_t ldb, int ahead, NAME##_vec s[][SMALL_COLUMNS / NAME##_lanes]) { \
    const int64_t L = NAME##_lanes;                                                          \
    T x[SMALL_ROWS][SMALL_DEPTH];                                                            \
    for (int r = 0; r < M; r++)                                                              \
        for (int64_t e = 0; e < d; e++) x[r][e] = a[r * sa + e * ka];                        \
    for (int64_t u = 0; u < q; u++) {                                                        \
        NAME##_vec v[SMALL_DEPTH];                                                           \
        for (int64_t e = 0; e < d; e++) memcpy(&v[e], bi + e * ldb + u * L, sizeof v[e]);   \
        if (ahead)                                                                           \
            for (int64_t e = 0; e < d; e++)                                                  \
                __builtin_prefetch(bi + (SMALL_AHEAD + e) * ldb + u * L);                    \
        for (int r = 0; r < M; r++) {                                                        \
            NAME##_vec t = s[r][u];                                                          \
            for (int64_t e = 0; e < d; e++) t += x[r][e] * v[e];                             \
            s[r][u] = t;                                                                     \
        }                                                                                    \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* Rows r < M of c = beta * c + a @ b, b's rows streamed: the columns in blocks of          \
   SMALL_COLUMNS, each block's sums in s (M x SMALL_COLUMNS, in the L1 cache), b's rows read  \
   SMALL_DEPTH at a time, each a run of contiguous memory the prefetcher follows (a block of  \
   vectors of columns down all of k read b a few cache lines a page, which the prefetcher     \
   could not keep ahead of: a classifier's weights from memory 2.5x slower). Each sum still    \
   adds its terms in the order of k from zero, then beta * c. M a constant where inlined. */ \
static inline __attribute__((always_inline)) void NAME##_rows(                               \
        const int M, int64_t n, int64_t k, const T *a, int64_t sa, int64_t ka, const T *b,   \
        int64_t ldb, T beta, T *c, int64_t ldc) {                                            \
    const int64_t L = NAME##_lanes, D = SMALL_DEPTH;                                         \
    NAME##_vec s[SMALL_ROWS][SMALL_COLUMNS / NAME##_lanes];                                  \
    for (int64_t j0 = 0; j0 < n; j0 += SMALL_COLUMNS) {                                      \
        int64_t w = n - j0 < SMALL_COLUMNS ? n - j0 : SMALL_COLUMNS, q = w / L;              \
        T tail[SMALL_ROWS][NAME##_lanes];                                                    \
        for (int r = 0; r < M; r++) {                                                        \
            for (int64_t u = 0; u < q; u++) s[r][u] = (NAME##_vec){0};                       \
            for (int64_t j = q * L; j < w; j++) tail[r][j - q * L] = 0;                      \
        }                                                                                    \
        for (int64_t i0 = 0; i0 < k; i0 += D) {                                              \
            int64_t d = k - i0 < D ? k - i0 : D;                                             \
            const T *bi = b + i0 * ldb + j0;                                                 \
            if (d == D)                                                                      \
                NAME##_depth(M, D, q, a + i0 * ka, sa, ka, bi, ldb,                          \
                             i0 + SMALL_AHEAD + D <= k, s);                                  \
            else                                                                             \
                NAME##_depth(M, d, q, a + i0 * ka, sa, ka, bi, ldb, 0, s);                   \
            for (int64_t e = 0; e < d; e++)                                                  \
                for (int64_t j = q * L; j < w; j++)                                          \
                    for (int r = 0; r < M; r++)                                              \
                        tail[r][j - q * L] += a[r * sa + (i0 + e) * ka] * bi[e * ldb + j];   \
        }                                                                                    \
        for (int r = 0; r < M; r++) {                                                        \
            T *cr = c + r * ldc + j0;                                                        \
            for (int64_t u = 0; u < q; u++) {                                                \
                if (beta == (T)0) {                                                          \
                    memcpy(cr + u * L, &s[r][u], sizeof s[r][u]);                            \
                } else {                                                                     \
                    NAME##_vec old;                                                          \
                    memcpy(&old, cr + u * L, sizeof old);                                    \
                    old = beta * old + s[r][u];                                              \
                    memcpy(cr + u * L, &old, sizeof old);                                    \
                }                                                                            \
            }                                                                                \
            for (int64_t j = q * L; j < w; j++)                                              \
                cr[j] = beta == (T)0 ? tail[r][j - q * L] : beta * cr[j] + tail[r][j - q * L]; \
        }                                                                                    \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* c[r, :n] = beta * c[r, :n] + a[r, :] @ b for r < m <= SMALL_ROWS (c not read where beta   \
   is 0), b's rows streamed once for all the rows of a. For so few rows BLAS's gemm packs all \
   of b first (a copy as long as the product) and its gemv reads b once per row: where b is   \
   too large for the cache (STREAM_BYTES) this reads it once. Each sum runs in the order of k  \
   alone, whatever the split between threads. */                                            \
static void NAME##_small(int ta, int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,  \
                         const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {               \
    const int64_t sa = ta ? 1 : lda, ka = ta ? lda : 1;                                      \
    switch (m) {                                                                             \
    case 1: NAME##_rows(1, n, k, a, sa, ka, b, ldb, beta, c, ldc); break;                    \
    case 2: NAME##_rows(2, n, k, a, sa, ka, b, ldb, beta, c, ldc); break;                    \
    case 3: NAME##_rows(3, n, k, a, sa, ka, b, ldb, beta, c, ldc); break;                    \
    default: NAME##_rows(4, n, k, a, sa, ka, b, ldb, beta, c, ldc); break;                   \
    }                                                                                        \
}                                                                                            \
struct NAME##_args {                                                                         \
    NAME##_fn gemm;                                                                          \
    int ta, tb, accumulate;                                                                  \
    int64_t m, n, k, count, lda, ldb, ldc, parts_m, parts_n;                                 \
    const int64_t *as, *bs, *cs;                                                             \
    T beta;                                                                                  \
    const T *bias;                                                                           \
    int64_t small_bytes;                                                                     \
};                                                                                           \
static void NAME##_tasks(void *context, int64_t begin, int64_t end) {                       \
    const struct NAME##_args *g = context;                                                   \
    int64_t m = g->m, n = g->n, lda = g->lda, ldb = g->ldb, ldc = g->ldc;                    \
    int64_t parts_m = g->parts_m, parts_n = g->parts_n, parts = parts_m * parts_n;          \
    int ta = g->ta, tb = g->tb, accumulate = g->accumulate;                                  \
    /* Decided for the whole product, and its column blocks split at whole vectors, so that  \
       a column is summed the same way whatever the split. */                                \
    int small = !tb && m <= SMALL_ROWS && g->k * n * (int64_t)sizeof(T) >= g->small_bytes;   \
    int64_t align = small ? NAME##_lanes : 1;                                                \
    for (int64_t task = begin; task < end; task++) {                                        \
        int64_t part = task % parts, pm = part / parts_n, pn = part % parts_n;               \
        int64_t r0 = m * pm / parts_m, r1 = m * (pm + 1) / parts_m;                          \
        int64_t c0 = n * pn / parts_n / align * align;                                       \
        int64_t c1 = pn + 1 == parts_n ? n : n * (pn + 1) / parts_n / align * align;         \
        if (r1 <= r0 || c1 <= c0) continue;                                                  \
        int64_t first = accumulate ? 0 : task / parts;                                       \
        int64_t last = accumulate ? g->count : first + 1;                                    \
        for (int64_t i = first; i < last; i++) {                                            \
            const T *a = (const T *)g->as[i] + r0 * (ta ? 1 : lda);                          \
            const T *b = (const T *)g->bs[i] + c0 * (tb ? ldb : 1);                          \
            T *c = (T *)g->cs[i] + r0 * ldc + c0;                                            \
            T scale = (accumulate && i) ? (T)1 : g->beta;                                    \
            if (g->bias && scale == (T)0) {                                                  \
                for (int64_t r = 0; r < r1 - r0; r++)                                        \
                    memcpy(c + r * ldc, g->bias + c0, sizeof(T) * (size_t)(c1 - c0));        \
                scale = (T)1;                                                                \
            }                                                                                \
            if (small)                                                                       \
                NAME##_small(ta, r1 - r0, c1 - c0, g->k, a, lda, b, ldb, scale, c, ldc);      \
            else                                                                             \
                g->gemm(101, ta ? 112 : 111, tb ? 112 : 111, (I)(r1 - r0), (I)(c1 - c0),      \
                        (I)g->k, (T)1, a, (I)lda, b, (I)ldb, scale, c, (I)ldc);              \
        }                                                                                    \
    }                                                                                        \
}                                                                                            \
void NAME(void *fn, int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t count,          \
          const int64_t *as, const int64_t *bs, const int64_t *cs, int64_t lda, int64_t ldb, \
          int64_t ldc, int accumulate, T beta, const T *bias, int64_t parts_m,               \
          int64_t parts_n, int64_t small_bytes) {                                            \
    struct NAME##_args g = {(NAME##_fn)fn, ta, tb, accumulate, m, n, k, count, lda, ldb,     \
                            ldc, parts_m, parts_n, as, bs, cs, beta, bias, small_bytes};     \
    int64_t parts = parts_m * parts_n, tasks = accumulate ? parts : count * parts;          \
    burnish_parallel(NAME##_tasks, &g, tasks, tasks);                                        \
}

GEMM(burnish_gemm_f32_i64, float, int64_t)
GEMM(burnish_gemm_f64_i64, double, int64_t)
GEMM(burnish_gemm_f32_i32, float, int32_t)
GEMM(burnish_gemm_f64_i32, double, int32_t)
"""

#: Multiply-adds below which a product is not split (the threads' start costs more).
MIN_SPLIT_MACS = 1 << 20

#: A product of at most 4 rows (a linear layer on a batch of 1 to 4) whose right operand
#: (rows of it, as it lies) takes at least this many bytes is summed by
#: ``GEMM_SOURCE``'s own loop, that operand read once, rather than by BLAS, whose gemm packs
#: all of it first: a classifier's [2, 1024] @ [1024, 1000] 95 -> 53 us a thread (in the cache),
#: 237 -> 106 us in mobilenet_v3_small's replay (from memory, since rows are read in runs).
STREAM_BYTES = 512 * 1024


def _openblas_libraries() -> list[Any]:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - a dependency; kept optional for vendored NumPy
        return []
    return ThreadpoolController().select(user_api="blas").lib_controllers


def _symbol(library: ctypes.CDLL, name: str) -> tuple[Any, bool] | None:
    """``name`` in ``library`` under the affixes of OpenBLAS's builds (``scipy_``, ``64_``),
    and whether its integers are 64-bit."""
    for prefix, suffix in itertools.product(("", "scipy_"), ("", "64_", "_64")):
        found = getattr(library, f"{prefix}{name}{suffix}", None)
        if found is not None:
            return found, bool(suffix)
    return None


class OneBlasThread:
    """NumPy's BLAS on the calling thread alone while it runs, its thread count restored after."""

    def __init__(self, libraries: list[Any]) -> None:
        self.libraries = libraries
        self.saved: list[int] = []

    def __enter__(self) -> None:
        self.saved = [library.get_num_threads() for library in self.libraries]
        for library, threads in zip(self.libraries, self.saved):
            if threads != 1:
                library.set_num_threads(1)

    def __exit__(self, *exc: Any) -> None:
        for library, threads in zip(self.libraries, self.saved):
            if threads != 1:
                library.set_num_threads(threads)


class Gemm:
    """NumPy's OpenBLAS called from burnish's threads (``available`` False where there is no
    OpenBLAS: ``product`` then returns False and the caller uses NumPy)."""

    def __init__(self, compiler: Any, threads: int) -> None:
        libraries = _openblas_libraries()
        self.guard = OneBlasThread(libraries)
        self.threads = threads
        self.functions: dict[str, tuple[Any, int, bool]] = {}
        openblas = [lib for lib in libraries if lib.internal_api == "openblas"]
        if len(openblas) != 1:
            return
        compiled = compiler.build(GEMM_SOURCE)
        for dtype, name in (("float32", "cblas_sgemm"), ("float64", "cblas_dgemm")):
            found = _symbol(openblas[0].dynlib, name)
            if found is None:
                return
            function, wide = found
            entry = getattr(compiled, f"burnish_gemm_{'f32' if dtype == 'float32' else 'f64'}"
                                      f"_{'i64' if wide else 'i32'}")
            scalar = ctypes.c_float if dtype == "float32" else ctypes.c_double
            entry.argtypes = ([ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
                              + [ctypes.c_int64] * 4 + [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3
                              + [ctypes.c_int, scalar, ctypes.c_void_p, ctypes.c_int64,
                                 ctypes.c_int64, ctypes.c_int64])
            entry.restype = None
            self.functions[dtype] = (entry, ctypes.cast(function, ctypes.c_void_p).value or 0,
                                     wide)
        self.library = compiled  # kept loaded while the entries may run

    @property
    def available(self) -> bool:
        return len(self.functions) == 2

    def pointers(self) -> dict[str, tuple[int, bool]]:
        """Per dtype, the address of BLAS's ``gemm`` and whether its integers are 64-bit (for
        other C code that calls it)."""
        return {dtype: (address, wide) for dtype, (_, address, wide) in self.functions.items()}

    def product(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, accumulate: bool = False,
                beta: float = 0.0, bias: np.ndarray | None = None) -> bool:
        """``out = beta * out + a @ b`` (batched, broadcast); ``accumulate``: ``out`` is one
        matrix and receives the sum of every product of the batch; ``bias`` (a contiguous
        vector of ``out``'s last dim, with ``beta`` 0): ``out = bias + a @ b``, the bias
        broadcast over the rows. False where a layout is not one BLAS takes, or for one product
        too small to split and no bias (NumPy's ``matmul`` is then the shorter way): the caller
        then does it some other way."""
        call = self._call(a, b, out, accumulate, beta, bias, bound=False)
        if call is None:
            return False
        call()
        return True

    def bind(self, a: np.ndarray, b: np.ndarray, out: np.ndarray,
             bias: np.ndarray | None = None) -> Any:
        """``product(a, b, out, bias=bias)`` of these arrays as a call of no arguments, its C
        arguments worked out once (a replay calls it on the same memory every time), or None
        where ``product`` would return False or there is nothing to multiply."""
        return self._call(a, b, out, False, 0.0, bias, bound=True)

    def _call(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, accumulate: bool,
              beta: float, bias: np.ndarray | None, bound: bool) -> Any:
        """The product as a call of no arguments, or None (``product``'s False)."""
        entry = self.functions.get(out.dtype.name)
        if entry is None or a.dtype != out.dtype or b.dtype != out.dtype:
            return None
        if bias is not None and (bias.dtype != out.dtype or bias.shape != out.shape[-1:]
                                 or not bias.flags.c_contiguous or beta != 0):
            return None
        plan = _plan(a.shape, a.strides, b.shape, b.strides, out.shape, out.strides,
                     out.dtype.itemsize, accumulate, self.threads)
        if plan is None:
            return None
        (ta, tb, m, n, k, lda, ldb, ldc, a_offsets, b_offsets, c_offsets, parts_m,
         parts_n) = plan
        count = len(a_offsets)
        if (count == 1 and parts_m * parts_n == 1 and not accumulate and beta == 0
                and bias is None and not bound):
            return None  # one small product: NumPy's matmul calls BLAS with less Python
        if m == 0 or n == 0 or k == 0 or count == 0:
            if bound:
                return None
            return functools.partial(_empty_sum, out, beta, bias, m == 0 or n == 0)
        addresses = [offsets + array.ctypes.data for offsets, array in
                     ((a_offsets, a), (b_offsets, b), (c_offsets, out))]
        function, gemm, _ = entry
        call = functools.partial(function, gemm, ta, tb, m, n, k, count,
                                 *[x.ctypes.data for x in addresses], lda, ldb, ldc,
                                 int(accumulate), beta,
                                 None if bias is None else bias.ctypes.data, parts_m, parts_n,
                                 STREAM_BYTES)
        call.keep = (addresses, a, b, out, bias)  # type: ignore[attr-defined]  # C reads them
        return call


def _empty_sum(out: np.ndarray, beta: float, bias: np.ndarray | None, empty: bool) -> None:
    """A product with nothing to add up (``k`` or the batch 0): ``beta * out`` (plus the
    bias); nothing at all where ``out`` is empty."""
    if empty:
        return
    if bias is not None:
        out[...] = bias
    elif beta == 0:
        out[...] = 0
    else:
        out *= beta


def _matrix(shape: tuple[int, ...], strides: tuple[int, ...], size: int
            ) -> tuple[int, int] | None:
    """``(transposed, leading dimension)`` of the last two dims as BLAS reads them (row-major
    ``rows x cols``), or None where they are in neither layout."""
    rows, cols = shape[-2:]
    if rows == 0 or cols == 0:
        return 0, max(1, cols)  # nothing is read (NumPy gives empty arrays zero strides)
    rs, cs = strides[-2:]
    if rs % size or cs % size:
        return None
    rs, cs = rs // size, cs // size
    if (cs == 1 or cols == 1) and (rs >= max(1, cols) or rows == 1):
        return 0, max(rs if rows > 1 else cols, cols, 1)
    if (rs == 1 or rows == 1) and (cs >= max(1, rows) or cols == 1):
        return 1, max(cs if cols > 1 else rows, rows, 1)
    return None


@functools.lru_cache(maxsize=4096)
def _plan(a_shape: tuple[int, ...], a_strides: tuple[int, ...], b_shape: tuple[int, ...],
          b_strides: tuple[int, ...], c_shape: tuple[int, ...], c_strides: tuple[int, ...],
          size: int, accumulate: bool, threads: int) -> tuple | None:
    """The BLAS calls of one product layout: operand layouts, batch offsets and the split."""
    if len(a_shape) < 2 or len(b_shape) < 2 or len(c_shape) < 2:
        return None
    m, k = a_shape[-2:]
    n = b_shape[-1]
    if b_shape[-2] != k or c_shape[-2:] != (m, n):
        return None
    layouts = [_matrix(a_shape, a_strides, size), _matrix(b_shape, b_strides, size)]
    out_layout = _matrix(c_shape, c_strides, size)
    if None in layouts or out_layout is None or out_layout[0]:
        return None
    (ta, lda), (tb, ldb), (_, ldc) = layouts[0], layouts[1], out_layout  # type: ignore[misc]
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2], () if accumulate else c_shape[:-2])
    if not accumulate and batch != c_shape[:-2]:
        return None
    if accumulate and len(c_shape) != 2:
        return None

    def offsets(shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
        """Each product's offset in bytes from the operand's start, in batch order."""
        found = np.zeros(shape, np.int64)
        for d, (extent, stride) in enumerate(zip(shape, strides)):
            found += (np.arange(extent, dtype=np.int64) * stride).reshape(
                (extent,) + (1,) * (len(shape) - d - 1))
        return np.ascontiguousarray(np.broadcast_to(found, batch)).reshape(-1)

    a_off = offsets(a_shape[:-2], a_strides[:-2])
    b_off = offsets(b_shape[:-2], b_strides[:-2])
    c_off = (np.zeros(a_off.size, np.int64) if accumulate
             else offsets(c_shape[:-2], c_strides[:-2]))
    count = a_off.size
    if (count > 1 and not accumulate and not ta and np.all(b_off == b_off[0])
            and _even(a_off, m * lda * size) and _even(c_off, m * ldc * size)):
        # One matrix times a batch whose rows follow on evenly (a weight shared by a batch of
        # sequences): one product of every row, split between the threads, instead of
        # ``count`` small ones.
        m, count = m * count, 1
        a_off, b_off, c_off = a_off[:1], b_off[:1], c_off[:1]
    parts_m = parts_n = 1
    work = m * n * k
    tasks = 1 if accumulate else count
    if threads > 1 and tasks < threads and work >= MIN_SPLIT_MACS:
        parts = -(-threads // tasks)
        if m >= n:
            parts_m = max(1, min(parts, m))
        else:
            parts_n = max(1, min(parts, n))
    return (ta, tb, m, n, k, lda, ldb, ldc, a_off, b_off, c_off, parts_m, parts_n)


def _even(offsets: np.ndarray, step: int) -> bool:
    """Whether ``offsets`` go up from the first by ``step`` each."""
    return bool(np.all(offsets == offsets[0] + step * np.arange(offsets.size, dtype=np.int64)))
