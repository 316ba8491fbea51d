"""Quantized products of two 8-bit operands on integers (``kernels.quant``); the other
quantized ops, and the products it does not take, keep the protocol's defaults."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from burnish.backend.quant_ops import QuantOps
from burnish.dtype import DType
from burnish.jit.kernels import quant


class JitQuantOps(QuantOps):
    """``quantized_matmul`` (hence ``quantized_linear``) of two int8 or uint8 operands whose
    scales factor out of the sums as ``kernels.quant``'s kernels: words of four bytes
    multiplied into int32 sums, the zero points and scales applied in the product's epilogue.
    A float operand, int4, per-block scales, a batched ``rhs`` or a ``K`` past
    ``quant.inner_limit`` take the default (dequantize, then the float product)."""

    cast: Callable[..., Any]  # the backend's (JitBase)

    def quantized_matmul(self, lhs: Any, rhs: Any, dtype: DType) -> Any:
        if not quant.takes(lhs, rhs):
            return super().quantized_matmul(lhs, rhs, dtype)
        out = quant.quantized_matmul(lhs, rhs, dtype)
        return out if out.dtype is dtype else self.cast(out, out.dtype, dtype)
