"""Quantizing float32 tensors to int8 or uint8, and dequantizing them back, in one compiled pass
each (the protocol's defaults are a kernel per step: divide, round, add the zero point, clamp,
cast; cast, subtract, multiply).

The arithmetic is the default's, step for step in float32: ``clamp(rint(x / scale) + zero_point,
low, high)`` (``rint`` rounds halves to even, as NumPy's), so the integers are the same; and
``(float(q) - zero_point) * scale``, the same floats.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from burnish.jit.codegen.cpu import PARALLEL_HEADER

SOURCE = PARALLEL_HEADER + r"""
#include <stdint.h>
#include <math.h>

/* A call's arguments, shared by its parallel ranges: x or q in, out out. */
struct quantize_args {
    int64_t channels, inner;
    const void *in;
    const float *scales, *points;
    float offset, low, high;
    void *out;
};

/* x [outer, channels, inner] (plain) to out (int8 where to_signed, else uint8): per channel
   (channels > 1, or one scale) scales[c] and points[c] (NULL: offset for every value). */
#define QUANTIZE(NAME, T)                                                                    \
static void NAME##_flat(void *context, int64_t begin, int64_t end) {                        \
    const struct quantize_args *a = context;                                                 \
    const float *x = a->in;                                                                  \
    T *out = a->out;                                                                         \
    float s = a->scales[0], z = a->points ? a->points[0] : a->offset;                        \
    float low = a->low, high = a->high;                                                      \
    for (int64_t i = begin; i < end; i++) {                                                  \
        float q = rintf(x[i] / s) + z;                                                       \
        out[i] = (T)(q < low ? low : (q > high ? high : q));                                 \
    }                                                                                        \
}                                                                                            \
                                                                                             \
static void NAME##_rows(void *context, int64_t begin, int64_t end) {                        \
    const struct quantize_args *a = context;                                                 \
    int64_t channels = a->channels, inner = a->inner;                                        \
    float low = a->low, high = a->high;                                                      \
    for (int64_t r = begin; r < end; r++) {                                                  \
        int64_t c = r % channels;                                                            \
        float s = a->scales[c], z = a->points ? a->points[c] : a->offset;                    \
        const float *src = (const float *)a->in + r * inner;                                 \
        T *dst = (T *)a->out + r * inner;                                                    \
        for (int64_t i = 0; i < inner; i++) {                                                \
            float q = rintf(src[i] / s) + z;                                                 \
            dst[i] = (T)(q < low ? low : (q > high ? high : q));                             \
        }                                                                                    \
    }                                                                                        \
}                                                                                            \
                                                                                             \
static void NAME(int64_t rows, int64_t channels, int64_t inner, const float *x,             \
                 const float *scales, const float *points, float offset, float low,         \
                 float high, T *out) {                                                       \
    struct quantize_args a = {channels, inner, x, scales, points, offset, low, high, out};  \
    if (channels == 1) {                                                                     \
        int64_t total = rows * inner;                                                        \
        burnish_parallel(NAME##_flat, &a, total, burnish_parts(total > (1 << 16)));          \
        return;                                                                              \
    }                                                                                        \
    burnish_parallel(NAME##_rows, &a, rows * channels,                                       \
                     burnish_parts(rows * channels * inner > (1 << 16)));                    \
}

QUANTIZE(quantize_s8, int8_t)
QUANTIZE(quantize_u8, uint8_t)

/* out [outer, channels, inner] (float32) = (q - point) * scale, per channel as QUANTIZE. */
#define DEQUANTIZE(NAME, T)                                                                  \
static void NAME##_rows(void *context, int64_t begin, int64_t end) {                        \
    const struct quantize_args *a = context;                                                 \
    int64_t channels = a->channels, inner = a->inner;                                        \
    for (int64_t r = begin; r < end; r++) {                                                  \
        int64_t c = channels == 1 ? 0 : r % channels;                                        \
        float s = a->scales[c], z = a->points ? a->points[c] : a->offset;                    \
        const T *src = (const T *)a->in + r * inner;                                         \
        float *dst = (float *)a->out + r * inner;                                            \
        for (int64_t i = 0; i < inner; i++) dst[i] = ((float)src[i] - z) * s;               \
    }                                                                                        \
}                                                                                            \
                                                                                             \
static void NAME(int64_t rows, int64_t channels, int64_t inner, const T *q,                 \
                 const float *scales, const float *points, float offset, float *out) {      \
    struct quantize_args a = {channels, inner, q, scales, points, offset, 0, 0, out};        \
    burnish_parallel(NAME##_rows, &a, rows * channels,                                       \
                     burnish_parts(rows * channels * inner > (1 << 16)));                    \
}

DEQUANTIZE(dequantize_s8, int8_t)
DEQUANTIZE(dequantize_u8, uint8_t)

void burnish_dequantize_f32(int64_t rows, int64_t channels, int64_t inner, const void *q,
                            const float *scales, const float *points, float offset,
                            int from_signed, float *out) {
    if (from_signed)
        dequantize_s8(rows, channels, inner, q, scales, points, offset, out);
    else
        dequantize_u8(rows, channels, inner, q, scales, points, offset, out);
}

void burnish_quantize_f32(int64_t rows, int64_t channels, int64_t inner, const float *x,
                          const float *scales, const float *points, float offset, float low,
                          float high, int to_signed, void *out) {
    if (to_signed)
        quantize_s8(rows, channels, inner, x, scales, points, offset, low, high, out);
    else
        quantize_u8(rows, channels, inner, x, scales, points, offset, low, high, out);
}
"""


class Int8Quantize:
    """The compiled pass, on the thread pool (``burnish.cpu.threads``)."""

    def __init__(self, compiler: Any) -> None:
        self.library = compiler.build(SOURCE)
        function = self.library.burnish_quantize_f32
        i64, ptr, real = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
        function.argtypes = [i64, i64, i64, ptr, ptr, ptr, real, real, real, ctypes.c_int, ptr]
        function.restype = None
        self.function = function
        back = self.library.burnish_dequantize_f32
        back.argtypes = [i64, i64, i64, ptr, ptr, ptr, real, ctypes.c_int, ptr]
        back.restype = None
        self.back = back

    def __call__(self, x: np.ndarray, channel_axis: int | None, scales: np.ndarray,
                 points: np.ndarray | None, offset: float, low: float, high: float,
                 out: np.ndarray) -> None:
        """``out`` (int8 or uint8, plain) = ``x`` (float32, plain) quantized with ``scales``
        and ``points`` (float32, one, or one per index of ``channel_axis``; ``points`` None:
        ``offset`` for every value), clamped to ``[low, high]``."""
        shape = x.shape
        rows, channels, inner = _split(shape, channel_axis)
        self.function(rows, channels, inner, x.ctypes.data, scales.ctypes.data,
                      None if points is None else points.ctypes.data, offset, low, high,
                      int(out.dtype == np.int8), out.ctypes.data)

    def dequantize(self, q: np.ndarray, channel_axis: int | None, scales: np.ndarray,
                   points: np.ndarray | None, offset: float, out: np.ndarray) -> None:
        """``out`` (float32, plain) = ``(q - points) * scales`` for ``q`` (int8 or uint8,
        plain), parameters as ``__call__`` takes them."""
        rows, channels, inner = _split(q.shape, channel_axis)
        self.back(rows, channels, inner, q.ctypes.data, scales.ctypes.data,
                  None if points is None else points.ctypes.data, offset,
                  int(q.dtype == np.int8), out.ctypes.data)


def _split(shape: tuple[int, ...], channel_axis: int | None) -> tuple[int, int, int]:
    """(rows, channels, inner) of a plain array of ``shape`` scaled along ``channel_axis``."""
    if channel_axis is None:
        return 1, 1, int(np.prod(shape))
    return (int(np.prod(shape[:channel_axis])), shape[channel_axis],
            int(np.prod(shape[channel_axis + 1:])))
