"""ONNX's linear quantization on burnish tensors: QuantizeLinear and DequantizeLinear (per
tensor, per axis and blocked), the integer and QLinear forms of MatMul and Conv, and the
products of DequantizeLinear outputs (QDQ models) run on their integers."""

from __future__ import annotations

from typing import Any

import burnish as bn
from burnish import Tensor, quantization
from burnish.onnx.ops.core import DTYPES, cast
from burnish.onnx.ops.nn import conv, matmul, window
from burnish.quantization import PerChannel, PerTensor, QuantizedTensor, QuantScheme
from burnish.quantization.scheme import scales_shape

#: The range of each integer type a quantized value saturates into.
RANGES = {name: (int(bn.dtype.iinfo(name).min), int(bn.dtype.iinfo(name).max))
          for name in ("uint8", "int8", "int16", "uint16", "int4", "uint4", "int2", "uint2")}
#: The float types ONNX quantizes to: no rounding, no zero point (it must be zero).
FLOAT_TYPES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
               "float4_e2m1fn")


def _along(value: Tensor, x: Tensor, axis: int, block_size: int = 0) -> Tensor:
    """A scale or zero point shaped to broadcast against ``x``: one value for the whole
    tensor, one per index of ``axis``, or one per block of ``block_size`` indices of it."""
    if value.numel() == 1:
        return value.reshape([1] * x.ndim)
    axis = axis + x.ndim if axis < 0 else axis
    if not block_size:
        shape = [1] * x.ndim
        shape[axis] = value.numel()
        return value.reshape(shape)
    blocks = Tensor.arange(0, x.shape[axis], device=x.device) // block_size
    return value.select(axis, blocks)


def _saturate(q: Tensor, dtype_name: str) -> Tensor:
    low, high = RANGES[dtype_name]
    return q.clamp(min=low, max=high).cast(DTYPES[dtype_name])


def quantize_linear(x: Tensor, scale: Tensor, zero_point: Tensor | None, dtype_name: str,
                    axis: int = 1, block_size: int = 0, saturate: bool = True) -> Tensor:
    """ONNX QuantizeLinear to an integer type: ``saturate(round(x / scale) + zero_point)``,
    rounding half to even, the division in ``x``'s dtype; to a float8 or float4 type:
    ``x / scale`` cast (saturating unless ``saturate`` is off, see ``cast``), the zero point
    (zero by ONNX's rule) left out."""
    if dtype_name in FLOAT_TYPES:
        return cast(x / _along(scale, x, axis, block_size).cast(x.dtype), dtype_name, saturate)
    if x.dtype is bn.float32 and _eight_bits(dtype_name, x, scale, block_size):
        # burnish's own quantize: the same arithmetic (float32 division, half to even, the
        # zero point, then the type's range), in one pass on backends with a kernel for it.
        scheme, scales, points = _linear_scheme(dtype_name, x, scale, zero_point, axis)
        return quantization.quantize(x, scheme, scales=scales, zero_points=points).values
    q = (x / _along(scale, x, axis, block_size).cast(x.dtype)).round().cast(bn.int32)
    if zero_point is not None:
        q = q + _along(zero_point, x, axis, block_size).cast(bn.int32)
    return _saturate(q, dtype_name)


def dequantize_linear(x: Tensor, scale: Tensor, zero_point: Tensor | None = None,
                      axis: int = 1, block_size: int = 0, dtype_name: str | None = None
                      ) -> Tensor:
    """ONNX DequantizeLinear: ``(x - zero_point) * scale`` in float32, then in the scale's
    dtype (or ``dtype_name``); a float8 or float4 ``x``'s zero point is zero by ONNX's rule
    and left out."""
    if dtype_name in (None, "float32") and _eight_bits(x.dtype.name, x, scale, block_size):
        # burnish's own dequantize: the same float32 arithmetic, in one pass on backends with
        # a kernel for it.
        scheme, scales, points = _linear_scheme(x.dtype.name, x, scale, zero_point, axis)
        return QuantizedTensor.from_parts(x, scales, points, scheme, list(x.shape)).dequantize()
    y = x.cast(bn.float32)
    if zero_point is not None and not x.dtype.is_float:
        y = y - _along(zero_point, x, axis, block_size).cast(bn.float32)
    y = y * _along(scale, x, axis, block_size).cast(bn.float32)
    return y.cast(DTYPES[dtype_name] if dtype_name else scale.dtype)


def _eight_bits(value: str, x: Tensor, scale: Tensor, block_size: int) -> bool:
    """Whether burnish's quantized tensors hold ONNX's linear quantization of ``x``: 8-bit
    values, float32 scales, one for the whole tensor or one per index of an axis."""
    return value in ("int8", "uint8") and not block_size and scale.dtype is bn.float32 \
        and x.ndim > 0 and (scale.numel() == 1 or scale.ndim == 1)


def _linear_scheme(value: str, x: Tensor, scale: Tensor, zero_point: Tensor | None,
                   axis: int, symmetric: bool = False
                   ) -> tuple[QuantScheme, Tensor, Tensor | None]:
    """ONNX's 8-bit linear quantization of ``x`` as burnish's scheme, scales and zero points:
    one scale, or one per index of ``axis``; affine, with the zero point (ONNX's default: 0),
    or, with ``symmetric`` and no zero point for int8 values, symmetric (uint8's symmetric
    zero would be 128)."""
    granularity = PerTensor() if scale.numel() == 1 else PerChannel(axis)
    affine = not (symmetric and zero_point is None and value == "int8")
    scheme = QuantScheme(value, granularity, "affine" if affine else "symmetric")
    shape = list(scales_shape(scheme, tuple(x.shape)))
    points = None
    if affine:
        points = (zero_point.cast(scheme.zero_point_dtype).reshape(shape)
                  if zero_point is not None else
                  Tensor.zeros(shape, x.device, scheme.zero_point_dtype))
    return scheme, scale.cast(bn.float32).reshape(shape), points


def _centered(x: Tensor, zero_point: Tensor | None) -> Tensor:
    """An integer tensor less its zero point, as float32 (exact below 2**24, which 8-bit
    products summed over ordinary sizes stay under)."""
    y = x.cast(bn.float32)
    return y if zero_point is None else y - zero_point.cast(bn.float32)


def matmul_integer(a: Tensor, b: Tensor, a_zero_point: Tensor | None = None,
                   b_zero_point: Tensor | None = None) -> Tensor:
    """ONNX MatMulInteger: ``(a - a_zero_point) @ (b - b_zero_point)`` as int32."""
    if a_zero_point is not None and a_zero_point.numel() > 1 and a.ndim >= 2:
        a_zero_point = a_zero_point.reshape([-1, 1])  # one per row of a
    return matmul(_centered(a, a_zero_point), _centered(b, b_zero_point)).cast(bn.int32)


def conv_integer(x: Tensor, w: Tensor, x_zero_point: Tensor | None = None,
                 w_zero_point: Tensor | None = None, **window) -> Tensor:
    """ONNX ConvInteger: Conv of the inputs less their zero points, as int32."""
    if w_zero_point is not None and w_zero_point.numel() > 1:
        w_zero_point = w_zero_point.reshape([-1] + [1] * (w.ndim - 1))  # per output channel
    y = conv(_centered(x, x_zero_point), _centered(w, w_zero_point), **window)
    return y.round().cast(bn.int32)


def qlinear_matmul(a: Tensor, a_scale: Tensor, a_zero_point: Tensor | None, b: Tensor,
                   b_scale: Tensor, b_zero_point: Tensor | None, y_scale: Tensor,
                   y_zero_point: Tensor | None = None) -> Tensor:
    """ONNX QLinearMatMul: the integer product rescaled by ``a_scale * b_scale / y_scale``
    (computed in the scales' dtype), rounded and saturated into ``y_zero_point``'s type."""
    product = matmul(_centered(a, a_zero_point), _centered(b, b_zero_point))
    factor = (a_scale * b_scale / y_scale).cast(bn.float32)
    y = product * factor
    if y_zero_point is not None:
        y = y + y_zero_point.cast(bn.float32)
    target = (y_zero_point if y_zero_point is not None else a).dtype.name
    return _saturate(y.round(), target)


def qlinear_conv(x: Tensor, x_scale: Tensor, x_zero_point: Tensor | None, w: Tensor,
                 w_scale: Tensor, w_zero_point: Tensor | None, y_scale: Tensor,
                 y_zero_point: Tensor | None = None, bias: Tensor | None = None,
                 **window) -> Tensor:
    """ONNX QLinearConv: ConvInteger plus the int32 bias, rescaled by
    ``x_scale * w_scale / y_scale`` (per output channel when ``w_scale`` is), rounded and
    saturated into ``y_zero_point``'s type."""
    if w_zero_point is not None and w_zero_point.numel() > 1:
        w_zero_point = w_zero_point.reshape([-1] + [1] * (w.ndim - 1))
    y = conv(_centered(x, x_zero_point), _centered(w, w_zero_point),
             None if bias is None else bias.cast(bn.float32), **window)
    if w_scale.numel() > 1:
        w_scale = w_scale.reshape([1, -1] + [1] * (w.ndim - 2))
    y = y * (x_scale * w_scale / y_scale).cast(bn.float32)
    if y_zero_point is not None:
        y = y + y_zero_point.cast(bn.float32)
    target = (y_zero_point if y_zero_point is not None else x).dtype.name
    return _saturate(y.round(), target)


# -- QDQ products run on their integers -------------------------------------------------------


def quantized(values: Tensor, scale: Tensor, zero_point: Tensor | None = None
              ) -> QuantizedTensor:
    """An activation's DequantizeLinear operands as a burnish ``QuantizedTensor``: 8-bit
    ``values``, one float ``scale``, and the zero point (None: int8 about zero, symmetric;
    uint8 without one: zero). Nothing is computed: the integers are the stored values."""
    scheme, scales, points = _linear_scheme(values.dtype.name, values, scale, zero_point, 0,
                                            symmetric=True)
    return QuantizedTensor.from_parts(values, scales, points, scheme, list(values.shape))


def quantized_weight(shape: list[int], value: str, axis: int | None, affine: bool,
                     device: Any) -> QuantizedTensor:
    """A placeholder 8-bit weight (zeros; scales one) of ``shape``, one scale for the whole
    tensor (``axis`` None) or one per index of ``axis``, symmetric or ``affine``: the model's
    field that loading its record fills."""
    granularity = PerTensor() if axis is None else PerChannel(axis)
    scheme = QuantScheme(value, granularity, "affine" if affine else "symmetric")
    scales_at = list(scales_shape(scheme, tuple(shape)))
    return QuantizedTensor.from_parts(
        Tensor.zeros(list(shape), device, scheme.storage_dtype),
        Tensor.ones(scales_at, device, bn.float32),
        Tensor.zeros(scales_at, device, scheme.zero_point_dtype) if affine else None,
        scheme, shape)


def _with_bias(y: Tensor, bias: Tensor | None) -> Tensor:
    return y if bias is None else y + bias.cast(y.dtype)


def qdq_matmul(x: Tensor, x_scale: Tensor, x_zero_point: Tensor | None, w: QuantizedTensor,
               bias: Tensor | None = None) -> Tensor:
    """``DequantizeLinear(x) @ DequantizeLinear(w) (+ bias)`` run as burnish's quantized
    product of the integers (exact int32 sums on backends with integer kernels, scaled once):
    ``x`` 8-bit with one scale, ``w`` a quantized ``[K, N]`` matrix."""
    return _with_bias(quantization.matmul(quantized(x, x_scale, x_zero_point), w), bias)


def qdq_conv(x: Tensor, x_scale: Tensor, x_zero_point: Tensor | None, w: QuantizedTensor,
             bias: Tensor | None = None, strides=None, pads=None, dilations=None,
             group: int = 1, auto_pad: str = "NOTSET", pad_value: int = 0,
             kernel_shape=None) -> Tensor:
    """ONNX Conv of ``DequantizeLinear(x)`` and ``DequantizeLinear(w)`` run as burnish's
    quantized convolution of the integers: ``x`` 8-bit with one scale, ``w`` quantized.
    Asymmetric padding pads the integers with ``pad_value`` (the zero point: a real zero)."""
    spatial = x.ndim - 2
    x, strides, begins, dilations = window(x, list(w.shape[2:]), strides, pads, dilations,
                                           auto_pad, pad_value)
    y = quantization.conv(quantized(x, x_scale, x_zero_point), w, None, strides, begins,
                          dilations, group)
    return _with_bias(y, None if bias is None else bias.reshape([1, -1] + [1] * spatial))
