"""Attention on the CPU: per (sample, head), the scores of a block of queries made by BLAS,
masked and softmaxed in place while they are in the cache, then multiplied by the values.

The protocol's default materialises every score, and runs the product, the scaling, each mask,
the softmax and the second product as separate passes over ``[batch, heads, seq_q, seq_k]``.
Here each thread (``burnish.cpu.threads``) takes a run of (sample, head) pairs and walks their
queries in blocks of at most ``BLOCK`` scores: a buffer of its own that stays in the cache, so
memory does not grow with ``seq_q x seq_k``. The backward pass recomputes the block's weights
the same way and adds the keys' and values' gradients block by block. Forbidden scores take the
dtype's most negative finite value (the protocol's rule: a query with no key left gets uniform
weights).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from burnish.jit.codegen.cpu import PARALLEL_HEADER, vector_math_declarations

#: Scores per query block (per thread): 2^16 float32 is 256 KiB.
BLOCK = 1 << 16

SOURCE = PARALLEL_HEADER + r"""
#include <stdint.h>
#include <stdlib.h>
#include <math.h>

#define ATTENTION(NAME, T, I, EXP, LOG, LOW)                                                     \
typedef void (*NAME##_gemm)(int, int, int, I, I, I, T, const T *, I, const T *, I, T, T *, I); \
                                                                                             \
/* Rows [r0, r0 + n) of one (sample, head): s = scale q k^T, forbidden pairs filled, then     \
   softmaxed in place; lse (if given) gets each row's log-sum-exp. */                        \
static void NAME##_weights(NAME##_gemm gemm, const T *q, int64_t ldq, const T *k, int64_t ldk, \
                           int64_t n, int64_t tk, int64_t dk, T scale, const uint8_t *mask,  \
                           const int64_t *ms, int64_t r0, int causal, T fill, T *s, T *lse) {\
    gemm(101, 111, 112, (I)n, (I)tk, (I)dk, scale, q + r0 * ldq, (I)ldq, k, (I)ldk, (T)0, s,    \
         (I)tk);                                                                             \
    for (int64_t i = 0; i < n; i++) {                                                        \
        T *row = s + i * tk;                                                                 \
        /* Keys from limit on are forbidden by the causal flag: their weights are 0, and the \
           loops below stop there (half of a causal block's exps). */                        \
        int64_t limit = causal && r0 + i + 1 < tk ? r0 + i + 1 : tk;                         \
        if (mask) {                                                                          \
            const uint8_t *m = mask + (r0 + i) * ms[2];                                      \
            for (int64_t j = 0; j < limit; j++) if (m[j * ms[3]]) row[j] = fill;             \
        }                                                                                    \
        T top = row[0];                                                                      \
        _Pragma("omp simd reduction(max:top)")                                              \
        for (int64_t j = 1; j < limit; j++) top = row[j] > top ? row[j] : top;               \
        if (top == fill && limit < tk) {                                                     \
            /* No key left: every key weighs the same, the causal ones too (the rule). */    \
            for (int64_t j = limit; j < tk; j++) row[j] = fill;                              \
            limit = tk;                                                                      \
        }                                                                                    \
        T total = 0;                                                                         \
        /* At or below LOW, exp is far under the dtype's epsilon of the row's largest term   \
           (1) and is taken as 0: libm's and libmvec's exp take a slow path for results that \
           underflow, which every forbidden score's would (most of the time of a causal      \
           block went there). Clamped in a loop of its own: with the clamp in the exp's loop \
           the compiler evaluated exp on the unclamped values. NaN passes through. */         \
        for (int64_t j = 0; j < limit; j++) {                                                \
            T x = row[j] - top;                                                              \
            row[j] = x < (T)LOW ? (T)LOW : x;                                                \
        }                                                                                    \
        /* A vector loop (libmvec's exp, where the compiler has it), its sum in lanes. */    \
        _Pragma("omp simd reduction(+:total)")                                              \
        for (int64_t j = 0; j < limit; j++) {                                                \
            T e = EXP(row[j]);                                                               \
            e = row[j] == (T)LOW ? (T)0 : e;                                                 \
            row[j] = e;                                                                      \
            total += e;                                                                      \
        }                                                                                    \
        T inverse = (T)1 / total;                                                            \
        for (int64_t j = 0; j < limit; j++) row[j] *= inverse;                               \
        for (int64_t j = limit; j < tk; j++) row[j] = 0;                                     \
        if (lse) lse[r0 + i] = top + LOG(total);                                             \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* The arguments of a forward or backward pass, shared by its parallel ranges of tasks. */     \
struct NAME##_pass {                                                                         \
    NAME##_gemm gemm;                                                                        \
    int64_t batch, heads, tq, tk, dk, dv, rows;                                              \
    const T *q, *k, *v, *g;                                                                  \
    const int64_t *qs, *ks, *vs, *ms, *gs;                                                   \
    const uint8_t *mask;                                                                     \
    int causal;                                                                              \
    double scale;                                                                            \
    T fill;                                                                                  \
    T *out, *lse, *dq, *dkey, *dval;                                                         \
    int failed;                                                                              \
};                                                                                           \
                                                                                             \
/* Tasks [begin, end) (each a sample and head) of the forward pass, on one scratch block. */  \
static void NAME##_forward_tasks(void *context, int64_t begin, int64_t end) {               \
    const struct NAME##_pass *a = context;                                                   \
    NAME##_gemm gemm = a->gemm;                                                              \
    int64_t heads = a->heads, tq = a->tq, tk = a->tk, dk = a->dk, dv = a->dv;                \
    int64_t rows = a->rows;                                                                  \
    const T *q = a->q, *k = a->k, *v = a->v;                                                 \
    const int64_t *qs = a->qs, *ks = a->ks, *vs = a->vs, *ms = a->ms;                        \
    const uint8_t *mask = a->mask;                                                           \
    int causal = a->causal;                                                                  \
    double scale = a->scale;                                                                 \
    T fill = a->fill, *out = a->out, *lse = a->lse;                                          \
    T *s = malloc(sizeof(T) * rows * tk);                                                    \
    if (!s) {                                                                                \
        __atomic_store_n(&((struct NAME##_pass *)context)->failed, 1, __ATOMIC_RELAXED);      \
        return;                                                                              \
    }                                                                                        \
    for (int64_t task = begin; task < end; task++) {                                        \
        int64_t b = task / heads, h = task % heads;                                          \
        const T *qp = q + b * qs[0] + h * qs[1], *kp = k + b * ks[0] + h * ks[1];            \
        const T *vp = v + b * vs[0] + h * vs[1];                                             \
        const uint8_t *mp = mask ? mask + b * ms[0] + h * ms[1] : NULL;                      \
        for (int64_t r0 = 0; r0 < tq; r0 += rows) {                                          \
            int64_t n = tq - r0 < rows ? tq - r0 : rows;                                     \
            NAME##_weights(gemm, qp, qs[2], kp, ks[2], n, tk, dk, (T)scale, mp, ms, r0,      \
                           causal, fill, s, lse + task * tq);                                \
            gemm(101, 111, 111, (I)n, (I)dv, (I)tk, (T)1, s, (I)tk, vp, (I)vs[2], (T)0,      \
                 out + ((b * tq + r0) * heads + h) * dv, (I)(heads * dv));                   \
        }                                                                                    \
    }                                                                                        \
    free(s);                                                                                 \
}                                                                                            \
                                                                                             \
int NAME##_forward(void *fn, int64_t batch, int64_t heads, int64_t tq, int64_t tk,           \
                   int64_t dk, int64_t dv, const T *q, const int64_t *qs, const T *k,        \
                   const int64_t *ks, const T *v, const int64_t *vs, const uint8_t *mask,    \
                   const int64_t *ms, int causal, double scale, T fill, int64_t rows,         \
                   T *out, T *lse) {                                                         \
    struct NAME##_pass a = {(NAME##_gemm)fn, batch, heads, tq, tk, dk, dv, rows, q, k, v,    \
                            NULL, qs, ks, vs, ms, NULL, mask, causal, scale, fill, out, lse, \
                            NULL, NULL, NULL, 0};                                            \
    int64_t tasks = batch * heads;                                                           \
    burnish_parallel(NAME##_forward_tasks, &a, tasks, burnish_parts(1));                     \
    return a.failed;                                                                         \
}                                                                                            \
                                                                                             \
/* Tasks [begin, end) of the backward pass, on two scratch blocks. */                        \
static void NAME##_backward_tasks(void *context, int64_t begin, int64_t end) {              \
    const struct NAME##_pass *a = context;                                                   \
    NAME##_gemm gemm = a->gemm;                                                              \
    int64_t heads = a->heads, tq = a->tq, tk = a->tk, dk = a->dk, dv = a->dv;                \
    int64_t rows = a->rows;                                                                  \
    const T *q = a->q, *k = a->k, *v = a->v, *g = a->g;                                      \
    const int64_t *qs = a->qs, *ks = a->ks, *vs = a->vs, *ms = a->ms, *gs = a->gs;           \
    const uint8_t *mask = a->mask;                                                           \
    int causal = a->causal;                                                                  \
    double scale = a->scale;                                                                 \
    T fill = a->fill, *dq = a->dq, *dkey = a->dkey, *dval = a->dval;                         \
    T *p = malloc(sizeof(T) * rows * tk), *dp = malloc(sizeof(T) * rows * tk);               \
    if (!p || !dp) {                                                                         \
        free(p);                                                                             \
        free(dp);                                                                            \
        __atomic_store_n(&((struct NAME##_pass *)context)->failed, 1, __ATOMIC_RELAXED);      \
        return;                                                                              \
    }                                                                                        \
    for (int64_t task = begin; task < end; task++) {                                        \
        int64_t b = task / heads, h = task % heads;                                          \
        const T *qp = q + b * qs[0] + h * qs[1], *kp = k + b * ks[0] + h * ks[1];            \
        const T *vp = v + b * vs[0] + h * vs[1], *gp = g + b * gs[0] + h * gs[1];            \
        const uint8_t *mp = mask ? mask + b * ms[0] + h * ms[1] : NULL;                      \
        T *dqp = dq + (b * tq * heads + h) * dk, *dkp = dkey + (b * tk * heads + h) * dk;    \
        T *dvp = dval + (b * tk * heads + h) * dv;                                           \
        for (int64_t r0 = 0; r0 < tq; r0 += rows) {                                          \
            int64_t n = tq - r0 < rows ? tq - r0 : rows;                                     \
            T beta = r0 ? (T)1 : (T)0;                                                       \
            NAME##_weights(gemm, qp, qs[2], kp, ks[2], n, tk, dk, (T)scale, mp, ms, r0,      \
                           causal, fill, p, NULL);                                           \
            const T *gr = gp + r0 * gs[2];                                                   \
            gemm(101, 112, 111, (I)tk, (I)dv, (I)n, (T)1, p, (I)tk, gr, (I)gs[2], beta,       \
                 dvp, (I)(heads * dv));                                                      \
            gemm(101, 111, 112, (I)n, (I)tk, (I)dv, (T)1, gr, (I)gs[2], vp, (I)vs[2],        \
                 (T)0, dp, (I)tk);                                                           \
            for (int64_t i = 0; i < n; i++) {                                                \
                T *w = p + i * tk, *d = dp + i * tk, dot = 0;                                \
                int64_t limit = causal && r0 + i + 1 < tk ? r0 + i + 1 : tk;                 \
                _Pragma("omp simd reduction(+:dot)")                                        \
                for (int64_t j = 0; j < limit; j++) dot += w[j] * d[j];                      \
                const uint8_t *m = mp ? mp + (r0 + i) * ms[2] : NULL;                        \
                for (int64_t j = 0; j < limit; j++) {                                        \
                    int forbidden = m && m[j * ms[3]];                                       \
                    d[j] = forbidden ? (T)0 : w[j] * (d[j] - dot) * (T)scale;                \
                }                                                                            \
                for (int64_t j = limit; j < tk; j++) d[j] = 0;                               \
            }                                                                                \
            gemm(101, 111, 111, (I)n, (I)dk, (I)tk, (T)1, dp, (I)tk, kp, (I)ks[2], (T)0,     \
                 dqp + r0 * heads * dk, (I)(heads * dk));                                    \
            gemm(101, 112, 111, (I)tk, (I)dk, (I)n, (T)1, dp, (I)tk, qp + r0 * qs[2],        \
                 (I)qs[2], beta, dkp, (I)(heads * dk));                                      \
        }                                                                                    \
    }                                                                                        \
    free(p);                                                                                 \
    free(dp);                                                                                \
}                                                                                            \
                                                                                             \
int NAME##_backward(void *fn, int64_t batch, int64_t heads, int64_t tq, int64_t tk,          \
                    int64_t dk, int64_t dv, const T *q, const int64_t *qs, const T *k,       \
                    const int64_t *ks, const T *v, const int64_t *vs, const uint8_t *mask,   \
                    const int64_t *ms, int causal, double scale, T fill, int64_t rows,        \
                    const T *g, const int64_t *gs, T *dq, T *dkey, T *dval) {                \
    struct NAME##_pass a = {(NAME##_gemm)fn, batch, heads, tq, tk, dk, dv, rows, q, k, v, g, \
                            qs, ks, vs, ms, gs, mask, causal, scale, fill, NULL, NULL, dq,   \
                            dkey, dval, 0};                                                  \
    int64_t tasks = batch * heads;                                                           \
    burnish_parallel(NAME##_backward_tasks, &a, tasks, burnish_parts(1));                    \
    return a.failed;                                                                         \
}

ATTENTION(burnish_attention_f32_i64, float, int64_t, expf, logf, -80)
ATTENTION(burnish_attention_f64_i64, double, int64_t, exp, log, -700)
ATTENTION(burnish_attention_f32_i32, float, int32_t, expf, logf, -80)
ATTENTION(burnish_attention_f64_i32, double, int32_t, exp, log, -700)
"""

_I64 = ctypes.c_int64
_P = ctypes.c_void_p


def _strides(a: np.ndarray, ndim: int = 3) -> np.ndarray:
    """The first ``ndim`` strides of ``a`` in elements (zero along dims of one)."""
    return np.array([s // a.itemsize if n > 1 else 0 for n, s in zip(a.shape, a.strides)][:ndim],
                    np.int64)


def interleaved(shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The layout of the outputs and gradients ``[batch, heads, seq, dim]`` of ``SOURCE``: a
    contiguous ``[batch, seq, heads, dim]`` (as the heads are split from and merged back into
    ``[batch, seq, d_model]``, so that the merge and the split of the gradients are views, not
    copies), as the shape of that buffer and the strides of the view."""
    batch, heads, seq, dim = shape
    return (batch, seq, heads, dim), (seq * heads * dim, dim, heads * dim, 1)


def takes(*arrays_strides: tuple[tuple[int, ...], tuple[int, ...]]) -> bool:
    """Whether BLAS can read every ``(shape, strides)`` (element strides) as row-major matrices
    of its last two dims: unit steps along the last dim, rows at least a row apart."""
    for shape, strides in arrays_strides:
        if shape[-1] > 1 and strides[-1] != 1:
            return False
        if shape[-2] > 1 and strides[-2] < max(1, shape[-1]):
            return False
    return True


class NativeAttention:
    """The compiled attention of ``SOURCE`` over ``blas.Gemm``'s BLAS functions."""

    def __init__(self, compiler: Any, gemm: Any) -> None:
        self.entries: dict[str, tuple[Any, Any, int]] = {}
        if not gemm.available:
            return
        # libmvec's vector exp for the softmax rows, where the compiler has it.
        declarations = vector_math_declarations() if compiler.vector_math else ""
        library = compiler.build(SOURCE.replace("#include <math.h>\n",
                                                "#include <math.h>\n" + declarations))
        common = [_P, _I64, _I64, _I64, _I64, _I64, _I64, _P, _P, _P, _P, _P, _P, _P, _P,
                  ctypes.c_int, ctypes.c_double]
        for dtype, (address, wide) in gemm.pointers().items():
            scalar = ctypes.c_float if dtype == "float32" else ctypes.c_double
            name = f"burnish_attention_{'f32' if dtype == 'float32' else 'f64'}_" \
                   f"{'i64' if wide else 'i32'}"
            forward = getattr(library, f"{name}_forward")
            forward.argtypes = common + [scalar, _I64, _P, _P]
            forward.restype = ctypes.c_int
            backward = getattr(library, f"{name}_backward")
            backward.argtypes = common + [scalar, _I64, _P, _P, _P, _P, _P]
            backward.restype = ctypes.c_int
            self.entries[dtype] = (forward, backward, address)
        self.library = library  # kept loaded while the entries may run

    @staticmethod
    def _common(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
                causal: bool, scale: float) -> tuple[list[Any], list[np.ndarray]]:
        batch, heads, tq, dk = q.shape
        tk, dv = k.shape[2], v.shape[3]
        keep = [_strides(q), _strides(k), _strides(v),
                _strides(mask, 4) if mask is not None else np.zeros(4, np.int64)]
        rows = max(1, min(tq, BLOCK // max(1, tk)))
        args = [batch, heads, tq, tk, dk, dv, q.ctypes.data, keep[0].ctypes.data,
                k.ctypes.data, keep[1].ctypes.data, v.ctypes.data, keep[2].ctypes.data,
                None if mask is None else mask.ctypes.data, keep[3].ctypes.data, int(causal),
                scale]
        return args + [float(np.finfo(q.dtype).min), rows], keep

    def forward(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
                out: np.ndarray, lse: np.ndarray, causal: bool, scale: float) -> None:
        """``out`` ``[batch, heads, seq_q, value_dim]`` laid out as a contiguous ``[batch,
        seq_q, heads, value_dim]`` (``interleaved``) and ``lse`` ``[batch, heads, seq_q]``,
        contiguous; ``mask`` (uint8, broadcast to the scores) true where forbidden."""
        self.bind_forward(q, k, v, mask, out, lse, causal, scale)()

    def bind_forward(self, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                     mask: np.ndarray | None, out: np.ndarray, lse: np.ndarray, causal: bool,
                     scale: float) -> Callable[[], None]:
        """``forward`` of these arrays as a call of no arguments (a replay's: its C arguments
        worked out once)."""
        forward, _, gemm = self.entries[out.dtype.name]
        args, keep = self._common(q, k, v, mask, causal, scale)
        call = functools.partial(forward, gemm, *args, out.ctypes.data, lse.ctypes.data)
        arrays = (q, k, v, mask, out, lse)

        def run() -> None:
            if call():
                raise MemoryError("cpu backend: no memory for attention's score blocks")

        run.keep = (keep, arrays)  # type: ignore[attr-defined]  # C reads their memory
        return run

    def backward(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
                 grad: np.ndarray, dq: np.ndarray, dk: np.ndarray, dv: np.ndarray,
                 causal: bool, scale: float) -> None:
        """``dq``, ``dk``, ``dv`` (the shapes of q, k, v, laid out as ``interleaved`` says)
        from ``grad`` of the output, the weights recomputed block by block."""
        _, backward, gemm = self.entries[dq.dtype.name]
        args, keep = self._common(q, k, v, mask, causal, scale)
        grad_strides = _strides(grad)
        if backward(gemm, *args, grad.ctypes.data, grad_strides.ctypes.data, dq.ctypes.data,
                    dk.ctypes.data, dv.ctypes.data):
            raise MemoryError("cpu backend: no memory for attention's score blocks")
        del keep
