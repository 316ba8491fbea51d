"""Quantized ops under autodiff: the inner backend runs them where no gradient flows; a tracked
float operand goes through the protocol's defaults, whose ops are differentiated one by one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from burnish.autodiff.graph import AutodiffPrimitive
from burnish.backend.quant_ops import QuantizedPrimitive, QuantOps
from burnish.dtype import DType
from burnish.quantization.scheme import QuantScheme

P = AutodiffPrimitive


class AutodiffQuantOps(QuantOps):
    """Integers, scales and zero points carry no gradient: quantizing gives untracked parts
    (``round``'s derivative is zero almost everywhere), and a product with a quantized operand
    is differentiable in its float operands only, as the product with the dequantized values."""

    _inner: Any

    def quantize_params(self, x: P, scheme: QuantScheme, dtype: DType
                        ) -> tuple[P, P | None]:
        scales, points = self._inner.quantize_params(x.inner, scheme, dtype)
        return P(scales), None if points is None else P(points)

    def quantize(self, x: P, scales: P, zero_points: P | None, scheme: QuantScheme,
                 dtype: DType) -> QuantizedPrimitive:
        q = self._inner.quantize(x.inner, scales.inner,
                                 None if zero_points is None else zero_points.inner, scheme, dtype)
        return _wrap(q)

    def dequantize(self, q: QuantizedPrimitive, dtype: DType) -> P:
        return P(self._inner.dequantize(_unwrap(q), dtype))

    def quantized_matmul(self, lhs: P | QuantizedPrimitive, rhs: P | QuantizedPrimitive,
                         dtype: DType) -> P:
        if _untracked(lhs, rhs):
            return P(self._inner.quantized_matmul(_inner(lhs), _inner(rhs), dtype))
        return QuantOps.quantized_matmul(self, lhs, rhs, dtype)

    def quantized_linear(self, x: P | QuantizedPrimitive, weight: QuantizedPrimitive,
                         bias: P | None, dtype: DType) -> P:
        if _untracked(x, bias):
            return P(self._inner.quantized_linear(_inner(x), _unwrap(weight),
                                                  None if bias is None else bias.inner, dtype))
        return QuantOps.quantized_linear(self, x, weight, bias, dtype)

    def quantized_conv(self, x: P | QuantizedPrimitive, weight: QuantizedPrimitive,
                       bias: P | None, stride: Sequence[int], padding: Sequence[int],
                       dilation: Sequence[int], groups: int, dtype: DType) -> P:
        if _untracked(x, bias):
            return P(self._inner.quantized_conv(_inner(x), _unwrap(weight),
                                                None if bias is None else bias.inner, stride,
                                                padding, dilation, groups, dtype))
        return QuantOps.quantized_conv(self, x, weight, bias, stride, padding, dilation, groups,
                                       dtype)


def _untracked(*operands: Any) -> bool:
    return all(not isinstance(x, P) or x.node is None for x in operands)


def _inner(x: P | QuantizedPrimitive) -> Any:
    return _unwrap(x) if isinstance(x, QuantizedPrimitive) else x.inner


def _unwrap(q: QuantizedPrimitive) -> QuantizedPrimitive:
    """The parts as the inner backend's primitives."""
    return QuantizedPrimitive(q.values.inner, q.scales.inner,
                              None if q.zero_points is None else q.zero_points.inner, q.scheme,
                              q.shape)


def _wrap(q: QuantizedPrimitive) -> QuantizedPrimitive:
    """The inner backend's parts as untracked primitives of this backend."""
    return QuantizedPrimitive(P(q.values), P(q.scales),
                              None if q.zero_points is None else P(q.zero_points), q.scheme,
                              q.shape)
