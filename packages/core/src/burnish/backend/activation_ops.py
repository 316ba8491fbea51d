"""Activation functions, each with a default written through the other ops of the protocol."""

from __future__ import annotations

import math
from abc import ABC

from burnish.backend.base import Primitive
from burnish.dtype import DType, bool_


class ActivationOps(ABC):  # noqa: B024 (only defaults, by design)
    """Activations on float tensors. Backends override them for speed, not for correctness."""

    def relu(self, x: Primitive, dtype: DType) -> Primitive:
        """``max(x, 0)``."""
        return self.clamp(x, 0.0, None, dtype)

    def relu_backward(self, output: Primitive, grad: Primitive, dtype: DType) -> Primitive:
        """The gradient through ``relu`` from its ``output`` (Burn's ``relu_backward``):
        ``grad`` times 1 where ``output > 0`` and 0 elsewhere (PyTorch's convention at 0 and
        for NaN; being a product, an infinite ``grad`` where ``output`` is 0 gives NaN)."""
        zero = self.full((), 0.0, dtype, self._device_of(output))
        return self.mul(grad, self.cast(self.greater(output, zero), bool_, dtype))

    def gelu(self, x: Primitive, dtype: DType) -> Primitive:
        """``x * (1 + erf(x / sqrt(2))) / 2`` (the exact GELU)."""
        inner = self.add_scalar(self.erf(self.mul_scalar(x, 1.0 / math.sqrt(2.0), dtype)), 1.0,
                                dtype)
        return self.mul_scalar(self.mul(x, inner), 0.5, dtype)

    def gelu_backward(self, x: Primitive, grad: Primitive, dtype: DType) -> Primitive:
        """The gradient through ``gelu`` at its input ``x``: ``grad * (Phi(x) + x * phi(x))``,
        ``Phi`` and ``phi`` the standard normal's distribution and density (what autodiff
        calls)."""
        cdf = self.mul_scalar(self.add_scalar(self.erf(self.mul_scalar(
            x, 1.0 / math.sqrt(2.0), dtype)), 1.0, dtype), 0.5, dtype)
        pdf = self.mul_scalar(self.exp(self.mul_scalar(self.mul(x, x), -0.5, dtype)),
                              1.0 / math.sqrt(2.0 * math.pi), dtype)
        return self.mul(grad, self.add(cdf, self.mul(x, pdf)))

    def hard_sigmoid(self, x: Primitive, alpha: float, beta: float, dtype: DType) -> Primitive:
        """``clamp(alpha * x + beta, 0, 1)`` (ONNX's HardSigmoid; PyTorch's is alpha 1/6,
        beta 1/2). NaN stays NaN."""
        return self.clamp(self.add_scalar(self.mul_scalar(x, alpha, dtype), beta, dtype), 0.0,
                          1.0, dtype)

    def hard_swish(self, x: Primitive, dtype: DType) -> Primitive:
        """``x * clamp(x + 3, 0, 6) / 6`` (PyTorch's hardswish; ONNX's HardSwish up to
        rounding). NaN stays NaN."""
        relu6 = self.clamp(self.add_scalar(x, 3.0, dtype), 0.0, 6.0, dtype)
        return self.mul_scalar(self.mul(x, relu6), 1.0 / 6.0, dtype)

    def sigmoid(self, x: Primitive, dtype: DType) -> Primitive:
        """``1 / (1 + exp(-x))``, without overflow for large ``|x|``."""
        return self.exp(self.log_sigmoid(x, dtype))

    def log_sigmoid(self, x: Primitive, dtype: DType) -> Primitive:
        """``log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))``, stable for any ``x``."""
        device = self._device_of(x)
        neg_abs = self.neg(self.abs(x), dtype)
        softplus = self.log1p(self.exp(neg_abs), dtype)
        return self.sub(self.minimum(x, self.full((), 0.0, dtype, device)), softplus)

    def softmax(self, x: Primitive, dim: int, dtype: DType) -> Primitive:
        """``exp(x) / sum(exp(x))`` along ``dim``, shifted by the max for stability."""
        if x.shape[dim] == 0:  # nothing to normalise, and ``max`` must not reduce an empty dim
            return self.empty(x.shape, dtype, self._device_of(x))
        shifted = self.exp(self.sub(x, self.max(x, dim)))
        return self.div(shifted, self.sum(shifted, dim))

    def log_softmax(self, x: Primitive, dim: int, dtype: DType) -> Primitive:
        """``x - log(sum(exp(x)))`` along ``dim``, shifted by the max for stability."""
        if x.shape[dim] == 0:
            return self.empty(x.shape, dtype, self._device_of(x))
        shifted = self.sub(x, self.max(x, dim))
        return self.sub(shifted, self.log(self.sum(self.exp(shifted), dim)))

    def softmax_backward(self, output: Primitive, grad: Primitive, dim: int,
                         dtype: DType) -> Primitive:
        """The gradient through ``softmax`` along ``dim`` from its ``output``:
        ``output * (grad - sum(grad * output, dim))``."""
        return self.mul(output, self.sub(grad, self.sum(self.mul(grad, output), dim)))

    def log_softmax_backward(self, output: Primitive, grad: Primitive, dim: int,
                             dtype: DType) -> Primitive:
        """The gradient through ``log_softmax`` along ``dim`` from its ``output``:
        ``grad - exp(output) * sum(grad, dim)``."""
        return self.sub(grad, self.mul(self.exp(output), self.sum(grad, dim)))
