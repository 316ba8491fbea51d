"""Quantized tensors on the CPU: two 8-bit operands multiplied by ``burnish.cpu.int8_gemm``,
float32 tensors quantized to 8 bits by ``burnish.cpu.int8_quantize``.

``quantized_matmul`` of two quantized operands (hence ``quantized_linear`` too; 2-d
``quantized_conv`` too, as the weights times each sample's patch matrix) runs the integer
kernel where the scales factor out of the sums: ``lhs`` ``[..., M, K]`` int8 or uint8 per
tensor or per row (a channel axis of ``-2``), ``rhs`` ``[K, N]`` int8 or uint8 per tensor or
per column (axis 1), symmetric or affine, ``K`` up to ``int8_gemm.MAX_INNER``. Everything else
(a float operand, int4, per-block scales, a batched ``rhs``) is the protocol's default:
dequantize, then the float op.

The weights (``rhs``) are packed for the kernel at their first product and the packing kept as
long as their buffer lives: a quantized layer's weights are constants (burnish writes no
tensor's buffer in place).

``quantize`` of float32 to int8 or uint8, per tensor or per channel, is one compiled pass with
the default's arithmetic (the same integers); int4, per-block schemes and other float dtypes
take the default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from burnish.backend.quant_ops import QuantizedPrimitive, QuantOps, byte_operands
from burnish.cpu.conv import geometry
from burnish.cpu.int8_gemm import MAX_INNER, Int8Gemm
from burnish.dtype import DType, float32
from burnish.jit.kernels.elementwise import plain
from burnish.jit.tensor import JitTensor, per_buffer
from burnish.quantization.scheme import PerChannel, PerTensor, QuantScheme, channel_axis

if TYPE_CHECKING:
    from burnish.cpu.runtime import CpuRuntime

_BYTES = frozenset({"int8", "uint8"})


class PackedWeights:
    """A ``[K, N]`` operand as ``Int8Gemm`` reads it (its packed bytes and columns' sums)."""

    __slots__ = ("packed", "signed")

    def __init__(self, packed: tuple[np.ndarray, np.ndarray], signed: bool):
        self.packed = packed
        self.signed = signed


class CpuQuantOps(QuantOps):
    """``quantized_matmul`` of two 8-bit operands through the compiled int8 kernel, and
    ``quantize`` to 8 bits in one pass."""

    cast: Callable[..., Any]  # the backend's (JitBackend)
    _new: Callable[..., JitTensor]  # the backend's (JitBase)

    def quantized_matmul(self, lhs: Any, rhs: Any, dtype: DType) -> Any:
        if not _takes(lhs, rhs):
            return super().quantized_matmul(lhs, rhs, dtype)
        values: JitTensor = lhs.values
        runtime = cast("CpuRuntime", values.runtime)
        gemm: Int8Gemm = runtime.int8_gemm
        weights = _packed(gemm, rhs)
        k, n = rhs.shape
        rows = 1
        for d in lhs.shape[:-1]:
            rows *= d
        if values.ndim == 2:
            a = values
        else:
            a = plain(values)
            a = a.view((rows, k), (k, 1), a.offset)
        out = self._new((*lhs.shape[:-1], n), float32, values.device, runtime)
        inputs = [a, lhs.scales, rhs.scales]
        if lhs.zero_points is not None:
            inputs.append(lhs.zero_points)
        if rhs.zero_points is not None:
            inputs.append(rhs.zero_points)
        result = out.view((rows, n), (n, 1), 0)
        runtime.host(_product, inputs, (result,), gemm, weights, _params(lhs), _params(rhs))
        return out if dtype is float32 else self.cast(out, float32, dtype)

    def quantized_conv(self, x: Any, weight: Any, bias: Any, stride: Any, padding: Any,
                       dilation: Any, groups: int, dtype: DType) -> Any:
        """A 2-d convolution of two 8-bit operands on the int8 kernel, sample by sample: the
        patch rows of the input (``burnish.cpu.conv``'s, padded with the input's zero point, a
        real zero; read transposed) times the weights ``[channels * kh * kw, out]`` (packed
        once), scaled once per element, each sample's result written channels first."""
        if not _takes_conv(x, weight, groups):
            return super().quantized_conv(x, weight, bias, stride, padding, dilation, groups,
                                          dtype)
        b: Any = self  # the backend (JitBackend) whose ops this mixin's class has
        values: JitTensor = x.values
        runtime = cast("CpuRuntime", values.runtime)
        n, c, h, w = values.shape
        out, _, kh, kw = weight.shape
        oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
        positions = oh * ow
        patches = self._new((n, c * kh * kw, positions), values.dtype, values.device, runtime)
        # A tuple: recordings of a capture compare their calls' arguments.
        words = tuple(int(v) for v in geometry((h, w), (oh, ow), (kh, kw), tuple(stride),
                                               tuple(padding), tuple(dilation),
                                               values.strides[2:]))
        inputs = [values] + ([] if x.zero_points is None else [x.zero_points])
        runtime.host(_patches, inputs, (patches,), runtime.native_conv, words,
                     x.scheme.symmetric_zero)
        inner = weight.values.numel // out
        matrix = plain(weight.values)
        matrix = b.permute(matrix.view((out, inner), (inner, 1), matrix.offset), (1, 0))
        rhs = QuantizedPrimitive(matrix, weight.scales, weight.zero_points,
                                 dataclasses.replace(weight.scheme, granularity=PerChannel(1))
                                 if isinstance(weight.scheme.granularity, PerChannel)
                                 else weight.scheme, (inner, out))
        weights = _packed(runtime.int8_gemm, rhs)
        y = self._new((n, out, oh, ow), float32, values.device, runtime)
        inputs = [patches, x.scales, weight.scales]
        if x.zero_points is not None:
            inputs.append(x.zero_points)
        if weight.zero_points is not None:
            inputs.append(weight.zero_points)
        if bias is not None:
            inputs.append(plain(bias if dtype is float32 else b.cast(bias, dtype, float32)))
        rows = y.view((n, out, oh * ow), (out * oh * ow, oh * ow, 1), 0)
        runtime.host(_conv_products, inputs, (rows,), runtime.int8_gemm, weights, _params(x),
                     _params(rhs), bias is not None)
        return y if dtype is float32 else b.cast(y, float32, dtype)

    def dequantize(self, q: QuantizedPrimitive, dtype: DType) -> Any:
        """int8/uint8 per tensor or per channel to float: one compiled pass (then a cast for
        another float dtype); the rest takes the default."""
        scheme = q.scheme
        granularity = scheme.granularity
        if (scheme.value not in _BYTES or not isinstance(granularity, PerTensor | PerChannel)
                or not isinstance(q.values, JitTensor)
                or not hasattr(q.values.runtime, "int8_quantize") or q.values.numel == 0):
            return super().dequantize(q, dtype)
        values = plain(q.values)
        runtime = cast("CpuRuntime", values.runtime)
        shape = tuple(q.shape)
        out = self._new(shape, float32, values.device, runtime)
        axis = channel_axis(granularity, shape) if isinstance(granularity, PerChannel) else None
        inputs = [values, q.scales] + ([] if q.zero_points is None else [q.zero_points])
        runtime.host(_dequantize, inputs, (out,), runtime.int8_quantize, axis,
                     float(scheme.symmetric_zero))
        return out if dtype is float32 else self.cast(out, float32, dtype)

    def quantize(self, x: Any, scales: Any, zero_points: Any, scheme: QuantScheme,
                 dtype: DType) -> QuantizedPrimitive:
        granularity = scheme.granularity
        if (dtype is not float32 or scheme.value not in _BYTES
                or not isinstance(granularity, PerTensor | PerChannel)
                or not isinstance(x, JitTensor) or not hasattr(x.runtime, "int8_quantize")
                or x.numel == 0):
            return super().quantize(x, scales, zero_points, scheme, dtype)
        runtime = cast("CpuRuntime", x.runtime)
        shape = tuple(x.shape)
        values = self._new(shape, scheme.storage_dtype, x.device, runtime)
        axis = channel_axis(granularity, shape) if isinstance(granularity, PerChannel) else None
        low, high = scheme.range
        if scheme.mode == "symmetric":
            low = scheme.symmetric_zero - scheme.symmetric_limit
            high = scheme.symmetric_zero + scheme.symmetric_limit
        inputs = [plain(x), scales] + ([] if zero_points is None else [zero_points])
        runtime.host(_quantize, inputs, (values,), runtime.int8_quantize, axis,
                     float(scheme.symmetric_zero), float(low), float(high))
        return QuantizedPrimitive(values, scales, zero_points, scheme, shape)


def _dequantize(q: np.ndarray, scales: np.ndarray, *rest: Any) -> None:
    """``Int8Quantize.dequantize`` with the arguments ``CpuQuantOps.dequantize`` recorded."""
    *points, out, kernel, axis, offset = rest
    float_points = np.ascontiguousarray(points[0], np.float32).reshape(-1) if points else None
    kernel.dequantize(q, axis, np.ascontiguousarray(scales, np.float32).reshape(-1),
                      float_points, offset, out)


def _quantize(x: np.ndarray, scales: np.ndarray, *rest: Any) -> None:
    """``Int8Quantize`` with the arguments ``CpuQuantOps.quantize`` recorded."""
    *points, out, kernel, axis, offset, low, high = rest
    float_points = np.ascontiguousarray(points[0], np.float32).reshape(-1) if points else None
    kernel(x, axis, np.ascontiguousarray(scales, np.float32).reshape(-1), float_points, offset,
           low, high, out)


def _takes(lhs: Any, rhs: Any) -> bool:
    """Whether the int8 kernel computes ``lhs @ rhs``."""
    return (byte_operands(lhs, rhs, MAX_INNER) and isinstance(lhs.values, JitTensor)
            and hasattr(lhs.values.runtime, "int8_gemm"))


def _patches(values: np.ndarray, *rest: Any) -> None:
    """``NativeConv.patch_matrices`` padded with the input's zero point (a real zero)."""
    *points, out, native, words, zero = rest
    pad = int(points[0].reshape(-1)[0]) if points else zero
    native.patch_matrices(values, out, np.array(words, np.int64), pad)


def _conv_products(patches: np.ndarray, sx: np.ndarray, sw: np.ndarray, *rest: Any) -> None:
    """``Int8Gemm.product`` of each sample's patch rows (the transposed patch matrix, read in
    place) and the weights (packed once, as ``_packed`` keeps them), each sample's result
    turned into channels-first rows (and the bias added) as it is copied out."""
    *arrays, out, gemm, weights, x_params, w_params, has_bias = rest
    bias = arrays.pop() if has_bias else None
    positions, channels = patches.shape[2], out.shape[1]
    vectors = _sums_params(arrays, sx, sw, x_params, w_params, positions, channels)
    rows = np.empty((positions, channels), np.float32)
    for sample in range(patches.shape[0]):
        gemm.product(patches[sample].T, weights.packed, weights.signed, *vectors, rows)
        if bias is None:
            out[sample] = rows.T
        else:
            np.add(rows.T, bias.reshape(channels, 1), out=out[sample])


def _takes_conv(x: Any, weight: Any, groups: int) -> bool:
    """Whether ``quantized_conv`` runs on the int8 kernel: a 2-d convolution without groups of
    an 8-bit input (one scale) by 8-bit weights (one scale, or one per output channel), the
    patches' length within the kernel's inner bound."""
    if groups != 1 or not isinstance(x, QuantizedPrimitive) or len(x.shape) != 4:
        return False
    runtime: Any = x.values.runtime if isinstance(x.values, JitTensor) else None
    if not hasattr(runtime, "int8_gemm") or not hasattr(runtime.native_conv, "patches"):
        return False
    if x.scheme.value not in _BYTES or weight.scheme.value not in _BYTES:
        return False
    if not isinstance(x.scheme.granularity, PerTensor):
        return False
    granularity = weight.scheme.granularity
    if not (isinstance(granularity, PerTensor) or isinstance(granularity, PerChannel)
            and channel_axis(granularity, weight.shape) == 0):
        return False
    inner = weight.shape[1] * weight.shape[2] * weight.shape[3]
    return 0 < inner <= MAX_INNER and all(d > 0 for d in x.shape) and weight.shape[0] > 0


def _params(q: QuantizedPrimitive) -> tuple[bool, bool, int]:
    """How ``_product`` reads an operand's parameters: (per channel, has zero points, the
    symmetric zero point)."""
    return (isinstance(q.scheme.granularity, PerChannel), q.zero_points is not None,
            q.scheme.symmetric_zero)


def _packed(gemm: Int8Gemm, rhs: QuantizedPrimitive) -> PackedWeights:
    """``rhs``'s values packed for ``gemm``, once per buffer and layout."""
    def pack() -> PackedWeights:
        array = _array(rhs.values)
        return PackedWeights(gemm.pack(array), array.dtype == np.int8)

    return per_buffer(rhs.values, id(gemm), pack)


def _array(t: JitTensor) -> np.ndarray:
    """The NumPy view of a host tensor's elements."""
    kind = np.dtype(t.dtype.name)
    size = kind.itemsize
    return np.ndarray(t.shape, kind, buffer=t.buffer.handle.array, offset=t.offset * size,
                      strides=tuple(s * size for s in t.strides))


def _vector(params: np.ndarray | None, per_channel: bool, count: int, fill: float,
            dtype: Any) -> np.ndarray:
    """Per-row or per-column parameters as a contiguous vector of ``count``: per channel
    repeated over batches of rows, one per tensor everywhere, none as ``fill``."""
    if params is None:
        return np.full(count, fill, dtype)
    values = params.astype(dtype).reshape(-1)
    if not per_channel:
        return np.full(count, values[0], dtype)
    return np.ascontiguousarray(np.tile(values, count // values.size))


def _product(a: np.ndarray, sa: np.ndarray, sb: np.ndarray, *rest: Any) -> None:
    """``Int8Gemm.product`` with the arguments ``CpuQuantOps.quantized_matmul`` recorded."""
    *arrays, out, gemm, weights, a_params, b_params = rest
    m, n = out.shape
    gemm.product(a, weights.packed, weights.signed,
                 *_sums_params(arrays, sa, sb, a_params, b_params, m, n), out)


def _sums_params(points: list[np.ndarray], sa: np.ndarray, sb: np.ndarray,
                 a: tuple[bool, bool, int], b: tuple[bool, bool, int], rows: int,
                 columns: int) -> tuple[np.ndarray, ...]:
    """The zero points and scales of a product's ``rows`` and ``columns`` as
    ``Int8Gemm.product`` takes them, from each operand's ``_params`` and its arrays
    (``points``: the zero points that exist, the left operand's first)."""
    (a_channel, a_points, a_zero), (b_channel, b_points, b_zero) = a, b
    za = points.pop(0) if a_points else None
    zb = points.pop(0) if b_points else None
    return (_vector(za, a_channel, rows, a_zero, np.int32),
            _vector(zb, b_channel, columns, b_zero, np.int32),
            _vector(sa, a_channel, rows, 1.0, np.float32),
            _vector(sb, b_channel, columns, 1.0, np.float32))
