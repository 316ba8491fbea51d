"""Quantized tensors: quantize, dequantize, and the ops that read quantized operands (matmul,
linear, conv), all with defaults built on the other ops, so every backend runs them."""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from burnish.backend.base import Primitive
from burnish.dtype import DType, float32, int32, uint8
from burnish.quantization.scheme import (
    PerBlock,
    PerChannel,
    PerTensor,
    QuantScheme,
    channel_axis,
    scales_shape,
)

Dims = Sequence[int]


@dataclass(frozen=True)
class QuantizedPrimitive:
    """A quantized tensor as backends see it: the stored integers, the scales, the zero points
    and the scheme. ``values`` has the tensor's ``shape`` in ``scheme.storage_dtype``, except
    for int4: a 1-d uint8 of ``ceil(numel / 2)`` bytes, two values a byte in row-major order
    (``pack_int4``); ``scales`` (``scheme.scale_dtype``) and ``zero_points``
    (``scheme.zero_point_dtype``, ``None`` in symmetric mode) have the shape
    ``burnish.quantization.scales_shape`` gives: ``()`` per tensor, ``[size of the axis]`` per
    channel, the shape with the block axis divided by the block size per block."""

    values: Primitive
    scales: Primitive
    zero_points: Primitive | None
    scheme: QuantScheme
    shape: tuple[int, ...]


def byte_operands(lhs: Any, rhs: Any, max_inner: int) -> bool:
    """Whether ``lhs @ rhs`` is a product an 8-bit integer kernel takes: two quantized
    operands of int8 or uint8 values, ``rhs`` a ``[K, N]`` matrix with ``0 < K <=
    max_inner``, nothing empty, and the scales factoring out of the sums (``lhs`` per tensor
    or per row, ``rhs`` per tensor or per column). Backends add their own conditions."""
    if not (isinstance(lhs, QuantizedPrimitive) and isinstance(rhs, QuantizedPrimitive)):
        return False
    if lhs.scheme.value not in ("int8", "uint8") or rhs.scheme.value not in ("int8", "uint8"):
        return False
    if len(rhs.shape) != 2 or not 0 < rhs.shape[0] <= max_inner:
        return False
    if any(n == 0 for n in lhs.shape) or rhs.shape[1] == 0:
        return False
    return scaled_along(lhs, len(lhs.shape) - 2) and scaled_along(rhs, 1)


def scaled_along(q: QuantizedPrimitive, axis: int) -> bool:
    """Whether ``q``'s scales are one for the whole tensor or one per index of ``axis`` (what
    an integer product kernel needs to scale its sums once, per row or per column)."""
    granularity = q.scheme.granularity
    if isinstance(granularity, PerTensor):
        return True
    return isinstance(granularity, PerChannel) and channel_axis(granularity, q.shape) == axis


class QuantOps(ABC):  # noqa: B024 (only defaults, by design)
    """Quantization of float tensors and the ops on quantized operands. Arithmetic runs in
    float32 whatever the float dtype (``dtype``) of the inputs and outputs, with the rounding
    ``QuantScheme`` documents. Backends override these for speed (integer kernels), not for
    correctness: an override must give the default's integers exactly (``quantize``) or its
    values to float32's precision (the others)."""

    def quantize_params(self, x: Primitive, scheme: QuantScheme, dtype: DType
                        ) -> tuple[Primitive, Primitive | None]:
        """``(scales, zero_points)`` for the float ``x`` under ``scheme`` from the minimum and
        maximum of each group of values (``zero_points`` is ``None`` in symmetric mode)."""
        qmin, qmax = scheme.range
        xf = x if dtype is float32 else self.cast(x, dtype, float32)
        grouped, axis = _grouped(self, xf, scheme)
        device = self._device_of(x)
        shape = scales_shape(scheme, tuple(x.shape))
        if scheme.mode == "symmetric":
            largest = _reduce(self, self.abs(grouped), axis, self.max)
            scales = _stored_scales(self, self.div_scalar(largest, float(scheme.symmetric_limit),
                                                          float32), scheme)
            return self.reshape(scales, shape), None
        zero = self.full((), 0.0, float32, device)
        low = self.minimum(_reduce(self, grouped, axis, self.min), zero)
        high = self.maximum(_reduce(self, grouped, axis, self.max), zero)
        scales = _stored_scales(
            self, self.div_scalar(self.sub(high, low), float(qmax - qmin), float32), scheme)
        shift = self.round(self.div(low, _to_float32(self, scales, scheme.scale_dtype)))
        points = self.clamp(self.sub(self.full((), float(qmin), float32, device), shift),
                            qmin, qmax, float32)
        points = self.cast(points, float32, scheme.zero_point_dtype)
        return self.reshape(scales, shape), self.reshape(points, shape)

    def quantize(self, x: Primitive, scales: Primitive, zero_points: Primitive | None,
                 scheme: QuantScheme, dtype: DType) -> QuantizedPrimitive:
        """The float ``x`` as integers under ``scheme`` with the given scales and zero points
        (from ``quantize_params`` or a calibration):
        ``clamp(round_half_even(x / scale) + zero_point, qmin, qmax)``; in symmetric mode the
        range is ``zero_point ± scheme.symmetric_limit``."""
        shape = tuple(x.shape)
        qmin, qmax = scheme.range
        xf = x if dtype is float32 else self.cast(x, dtype, float32)
        scale, point = _broadcast_params(self, scales, zero_points, scheme, shape)
        q = self.round(self.div(_blocks(self, xf, scheme), scale))
        if point is not None:
            q = self.add(q, point)
        elif scheme.symmetric_zero:
            q = self.add_scalar(q, float(scheme.symmetric_zero), float32)
        if scheme.mode == "symmetric":
            limit = scheme.symmetric_limit
            qmin, qmax = scheme.symmetric_zero - limit, scheme.symmetric_zero + limit
        q = self.reshape(self.clamp(q, float(qmin), float(qmax), float32), shape)
        values = pack_int4(self, self.cast(q, float32, int32)) if scheme.packed else \
            self.cast(q, float32, scheme.storage_dtype)
        return QuantizedPrimitive(values, scales, zero_points, scheme, shape)

    def dequantize(self, q: QuantizedPrimitive, dtype: DType) -> Primitive:
        """``(values - zero_point) * scale`` as float ``dtype``."""
        scheme = q.scheme
        if scheme.packed:
            values = self.cast(unpack_int4(self, q.values, q.shape), int32, float32)
        else:
            values = self.cast(q.values, scheme.storage_dtype, float32)
        scale, point = _broadcast_params(self, q.scales, q.zero_points, scheme, q.shape)
        values = _blocks(self, values, scheme)
        if point is not None:
            values = self.sub(values, point)
        elif scheme.symmetric_zero:
            values = self.sub_scalar(values, float(scheme.symmetric_zero), float32)
        out = self.reshape(self.mul(values, scale), q.shape)
        return out if dtype is float32 else self.cast(out, float32, dtype)

    def quantized_matmul(self, lhs: Primitive | QuantizedPrimitive,
                         rhs: Primitive | QuantizedPrimitive, dtype: DType) -> Primitive:
        """``lhs @ rhs`` (``matmul``'s shapes and broadcasting) where either operand, or both,
        is quantized and the other is float ``dtype``; the result is float ``dtype``."""
        return self.matmul(_float(self, lhs, dtype), _float(self, rhs, dtype))

    def quantized_linear(self, x: Primitive | QuantizedPrimitive, weight: QuantizedPrimitive,
                         bias: Primitive | None, dtype: DType) -> Primitive:
        """``x @ weight + bias`` with a quantized ``weight`` ``[d_input, d_output]``, ``x``
        ``[..., d_input]`` float ``dtype`` or quantized, ``bias`` ``[d_output]`` float
        ``dtype``."""
        y = self.quantized_matmul(x, weight, dtype)
        return y if bias is None else self.add(y, bias)

    def quantized_conv(self, x: Primitive | QuantizedPrimitive, weight: QuantizedPrimitive,
                       bias: Primitive | None, stride: Dims, padding: Dims, dilation: Dims,
                       groups: int, dtype: DType) -> Primitive:
        """``conv`` (same arguments and shapes) with a quantized ``weight`` and ``x`` float
        ``dtype`` or quantized; the result is float ``dtype``."""
        return self.conv(_float(self, x, dtype), self.dequantize(weight, dtype), bias, stride,
                         padding, dilation, groups)


def pack_int4(b: QuantOps, ints: Primitive) -> Primitive:
    """int32 values in -8..7 as a 1-d uint8 of ``ceil(numel / 2)`` bytes, two values a byte in
    row-major order: the even index in the low nibble, two's complement nibbles; an odd count
    leaves the last byte's high nibble zero."""
    count = 1
    for n in ints.shape:
        count *= n
    device = b._device_of(ints)
    flat = b.reshape(ints, (count,))
    if count % 2:
        flat = b.cat([flat, b.full((1,), 0, int32, device)], 0)
    pairs = b.reshape(b.bitwise_and(flat, b.full((), 15, int32, device)), ((count + 1) // 2, 2))
    half = (count + 1) // 2
    low = b.slice(pairs, ((0, half, 1), (0, 1, 1)))
    high = b.slice(pairs, ((0, half, 1), (1, 2, 1)))
    packed = b.add(low, b.mul_scalar(high, 16, int32))
    return b.cast(b.reshape(packed, (half,)), int32, uint8)


def unpack_int4(b: QuantOps, packed: Primitive, shape: tuple[int, ...]) -> Primitive:
    """The int32 values (-8..7) of ``pack_int4``'s bytes, laid out as ``shape``."""
    half = packed.shape[0]
    device = b._device_of(packed)
    ints = b.reshape(b.cast(packed, uint8, int32), (half, 1))
    low = b.bitwise_and(ints, b.full((), 15, int32, device))
    high = b.div(ints, b.full((), 16, int32, device))
    nibbles = b.reshape(b.cat([low, high], 1), (2 * half,))
    count = 1
    for n in shape:
        count *= n
    if count != 2 * half:
        nibbles = b.slice(nibbles, ((0, count, 1),))
    signed = b.where(b.greater_equal(nibbles, b.full((), 8, int32, device)),
                     b.sub_scalar(nibbles, 16, int32), nibbles)
    return b.reshape(signed, shape)


def _float(b: QuantOps, x: Primitive | QuantizedPrimitive, dtype: DType) -> Primitive:
    return b.dequantize(x, dtype) if isinstance(x, QuantizedPrimitive) else x


def _grouped(b: QuantOps, x: Primitive, scheme: QuantScheme) -> tuple[Primitive, int | None]:
    """``x`` laid out so that each group sharing a scale is one row of the returned dim
    (``None``: the whole tensor is one group)."""
    shape = tuple(x.shape)
    granularity = scheme.granularity
    if isinstance(granularity, PerChannel):
        axis = channel_axis(granularity, shape)
        order = (axis, *(d for d in range(len(shape)) if d != axis))
        rest = 1
        for d in shape[:axis] + shape[axis + 1:]:
            rest *= d
        return b.reshape(b.permute(x, order), (shape[axis], rest)), 1
    if isinstance(granularity, PerBlock):
        return _blocks(b, x, scheme), channel_axis(granularity, shape) + 1
    return x, None


def _reduce(b: QuantOps, x: Primitive, axis: int | None, reduction) -> Primitive:
    """The reduction over ``axis`` (``None``: everything), without the reduced dim."""
    out = reduction(x, axis)
    if axis is None:
        return out
    return b.reshape(out, tuple(n for d, n in enumerate(x.shape) if d != axis))


def _stored_scales(b: QuantOps, scales: Primitive, scheme: QuantScheme) -> Primitive:
    """float32 scales rounded to ``scheme.scale_dtype``, zero (an all-zero group, or a float16
    underflow) replaced by one."""
    stored = scales if scheme.scale_dtype is float32 else \
        b.cast(scales, float32, scheme.scale_dtype)
    device = b._device_of(scales)
    zero = b.equal(stored, b.full((), 0.0, scheme.scale_dtype, device))
    return b.mask_fill(stored, zero, 1.0, scheme.scale_dtype)


def _blocks(b: QuantOps, x: Primitive, scheme: QuantScheme) -> Primitive:
    """``x`` with its block axis split in two, ``[blocks, size]``, for per-block schemes, else
    as it is."""
    granularity = scheme.granularity
    if not isinstance(granularity, PerBlock):
        return x
    shape = tuple(x.shape)
    axis = channel_axis(granularity, shape)
    size = granularity.size
    return b.reshape(x, (*shape[:axis], shape[axis] // size, size, *shape[axis + 1:]))


def _broadcast_params(b: QuantOps, scales: Primitive, zero_points: Primitive | None,
                      scheme: QuantScheme, shape: tuple[int, ...]
                      ) -> tuple[Primitive, Primitive | None]:
    """float32 scales and zero points shaped to broadcast against ``x`` (``_blocks`` of it)."""
    granularity = scheme.granularity
    if isinstance(granularity, PerChannel):
        axis = channel_axis(granularity, shape)
        target = tuple(n if d == axis else 1 for d, n in enumerate(shape))
    elif isinstance(granularity, PerBlock):
        axis = channel_axis(granularity, shape)
        target = (*shape[:axis], shape[axis] // granularity.size, 1, *shape[axis + 1:])
    else:
        target = ()
    scale = b.reshape(_to_float32(b, scales, scheme.scale_dtype), target)
    if zero_points is None:
        return scale, None
    return scale, b.reshape(b.cast(zero_points, scheme.zero_point_dtype, float32), target)


def _to_float32(b: QuantOps, x: Primitive, dtype: DType) -> Primitive:
    return x if dtype is float32 else b.cast(x, dtype, float32)
