"""Sums and means of float tensors along one dim (or all) on the CPU, in compiled C.

burnish.jit's reduction kernels give each output an invocation that walks its run: where the
reduced dim is not the last (a bias's gradient: the sum over the rows of ``[rows, features]``),
each invocation reads one element per row, strided, and the vector lanes gather. Here a plain
tensor is seen as ``[outer, n, inner]`` (``n`` the reduced dim): with ``inner`` of 1, each
row is summed by a vector loop; otherwise a block of ``inner`` columns is summed row after
row, each row's block a vector add, the sums kept in a buffer of the thread's own; where
there are fewer such blocks than threads (one bias's gradient), their rows are split between
the threads and the parts' sums added at the end.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from burnish.jit.codegen.cpu import PARALLEL_HEADER

SOURCE = PARALLEL_HEADER + r"""
#include <stdint.h>
#include <stdlib.h>

/* Columns per block of the strided case: their sums stay in registers and L1. */
#define COLUMNS 256

/* Sums of rows [r0, r1) of columns [c0, c0 + width) of x[o] into sums. */
#define COLUMN_SUMS(NAME, T)                                                                  \
static void NAME(const T *x, int64_t n, int64_t inner, int64_t o, int64_t c0, int64_t width, \
                 int64_t r0, int64_t r1, T *sums) {                                          \
    for (int64_t j = 0; j < width; j++) sums[j] = 0;                                         \
    for (int64_t r = r0; r < r1; r++) {                                                      \
        const T *src = x + (o * n + r) * inner + c0;                                         \
        _Pragma("omp simd")                                                                 \
        for (int64_t j = 0; j < width; j++) sums[j] += src[j];                               \
    }                                                                                        \
}

/* out[o, i] = scale * sum over r of x[o, r, i], x contiguous [outer, n, inner]: each thread
   a block of rows (inner of 1) or of (outer, column block) pairs; where those are fewer than
   the threads, each pair's rows split in parts, summed apart and then together. Float sums in
   the dtype, added in lanes. */
#define SUM(NAME, T)                                                                          \
COLUMN_SUMS(NAME##_columns, T)                                                               \
struct NAME##_args {                                                                         \
    const T *x;                                                                              \
    int64_t n, inner, blocks, parts;                                                         \
    T scale, *out, *partial;                                                                 \
};                                                                                           \
                                                                                             \
/* Rows [begin, end) of an inner of 1, each summed in lanes. */                              \
static void NAME##_rows(void *context, int64_t begin, int64_t end) {                        \
    const struct NAME##_args *a = context;                                                   \
    const T *x = a->x;                                                                       \
    int64_t n = a->n;                                                                        \
    for (int64_t o = begin; o < end; o++) {                                                  \
        const T *row = x + o * n;                                                            \
        T total = 0;                                                                         \
        _Pragma("omp simd reduction(+:total)")                                              \
        for (int64_t r = 0; r < n; r++) total += row[r];                                     \
        a->out[o] = total * a->scale;                                                        \
    }                                                                                        \
}                                                                                            \
                                                                                             \
/* Jobs [begin, end): each a part of the rows of an (outer, column block) pair. */           \
static void NAME##_jobs(void *context, int64_t begin, int64_t end) {                        \
    const struct NAME##_args *a = context;                                                   \
    int64_t n = a->n, inner = a->inner, blocks = a->blocks, parts = a->parts;               \
    T *partial = a->partial;                                                                 \
    for (int64_t job = begin; job < end; job++) {                                           \
        int64_t task = job / parts, part = job % parts;                                      \
        int64_t o = task / blocks, c0 = task % blocks * COLUMNS;                             \
        int64_t width = inner - c0 < COLUMNS ? inner - c0 : COLUMNS;                         \
        T sums[COLUMNS];                                                                     \
        NAME##_columns(a->x, n, inner, o, c0, width, n * part / parts,                       \
                       n * (part + 1) / parts, partial ? partial + job * COLUMNS : sums);    \
        if (partial) continue;                                                               \
        T *dst = a->out + o * inner + c0;                                                    \
        for (int64_t j = 0; j < width; j++) dst[j] = sums[j] * a->scale;                     \
    }                                                                                        \
}                                                                                            \
                                                                                             \
int NAME(const T *x, int64_t outer, int64_t n, int64_t inner, T scale, T *out) {             \
    struct NAME##_args a = {x, n, inner, 1, 1, scale, out, NULL};                            \
    if (inner == 1) {                                                                        \
        burnish_parallel(NAME##_rows, &a, outer, burnish_parts(outer * n >= 32768));         \
        return 0;                                                                            \
    }                                                                                        \
    int64_t blocks = (inner + COLUMNS - 1) / COLUMNS, tasks = outer * blocks;                \
    int64_t threads = burnish_threads, parts = 1;                                            \
    if (tasks < threads && outer * n * inner >= 32768) {                                     \
        parts = (threads + tasks - 1) / tasks;                                               \
        if (parts > n / 16) parts = n / 16 > 1 ? n / 16 : 1;                                 \
    }                                                                                        \
    T *partial = parts > 1 ? malloc(sizeof(T) * parts * tasks * COLUMNS) : NULL;             \
    if (parts > 1 && !partial) return 1;                                                     \
    a.blocks = blocks, a.parts = parts, a.partial = partial;                                 \
    burnish_parallel(NAME##_jobs, &a, tasks * parts,                                         \
                     burnish_parts(outer * n * inner >= 32768));                             \
    if (partial) {                                                                           \
        for (int64_t task = 0; task < tasks; task++) {                                      \
            int64_t o = task / blocks, c0 = task % blocks * COLUMNS;                         \
            int64_t width = inner - c0 < COLUMNS ? inner - c0 : COLUMNS;                     \
            T *dst = out + o * inner + c0, *first = partial + task * parts * COLUMNS;        \
            for (int64_t j = 0; j < width; j++) dst[j] = first[j];                           \
            for (int64_t part = 1; part < parts; part++)                                     \
                for (int64_t j = 0; j < width; j++) dst[j] += first[part * COLUMNS + j];     \
            for (int64_t j = 0; j < width; j++) dst[j] *= scale;                             \
        }                                                                                    \
        free(partial);                                                                       \
    }                                                                                        \
    return 0;                                                                                \
}

SUM(burnish_sum_f32, float)
SUM(burnish_sum_f64, double)
"""

_I64 = ctypes.c_int64
_P = ctypes.c_void_p


class NativeReduce:
    """The compiled sums of ``SOURCE``, for float32 and float64."""

    dtypes = frozenset({"float32", "float64"})

    def __init__(self, compiler: Any) -> None:
        library = compiler.build(SOURCE)
        self.sums: dict[str, Any] = {}
        for dtype, suffix, scalar in (("float32", "f32", ctypes.c_float),
                                      ("float64", "f64", ctypes.c_double)):
            function = getattr(library, f"burnish_sum_{suffix}")
            function.argtypes = [_P, _I64, _I64, _I64, scalar, _P]
            function.restype = ctypes.c_int
            self.sums[dtype] = function
        self.library = library  # kept loaded while the entries may run

    def sum(self, x: np.ndarray, out: np.ndarray, outer: int, n: int, inner: int,
            mean: bool) -> None:
        """``out`` (contiguous, ``outer * inner`` elements) = the sums (``mean``: the means)
        over ``n`` of ``x`` (contiguous, ``[outer, n, inner]``)."""
        function, args = self._call(x, out, outer, n, inner, mean)
        _check(function(*args))

    def bind_sum(self, x: np.ndarray, out: np.ndarray, outer: int, n: int, inner: int,
                 mean: bool) -> Callable[[], None]:
        """``sum`` of these arrays as a call of no arguments, its C arguments worked out once
        (a replay calls it on arrays that stay where they are)."""
        function, args = self._call(x, out, outer, n, inner, mean)

        def run(x: np.ndarray = x, out: np.ndarray = out) -> None:  # their memory: C's
            _check(function(*args))

        return run

    def _call(self, x: np.ndarray, out: np.ndarray, outer: int, n: int, inner: int,
              mean: bool) -> tuple[Any, tuple]:
        scale = (1.0 / n if n else float("nan")) if mean else 1.0
        return self.sums[out.dtype.name], (x.ctypes.data, outer, n, inner, scale,
                                           out.ctypes.data)


def _check(failed: int) -> None:
    if failed:
        raise MemoryError("cpu backend: no memory for a sum's partial sums")
