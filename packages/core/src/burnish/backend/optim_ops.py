"""Optimizer updates: whole parameter updates as one op, so a GPU backend can run each in one
kernel instead of a dozen elementwise launches."""

from __future__ import annotations

from abc import ABC

from burnish.backend.base import Primitive
from burnish.dtype import DType, bfloat16, float16, float32


class OptimOps(ABC):  # noqa: B024 (only defaults, by design)
    """Updates of float tensors by their gradients. Every operand has ``value``'s shape and
    dtype. The optimizer's own state (the moments) is donated, as to the ``*_assign`` ops of
    ``NumericOps``: the caller holds no other reference, and a backend MAY write the new state
    into that memory when nothing else references it; ``value`` and ``grad`` are never written.
    Backends override these for speed, not for correctness."""

    def adam_step(self, value: Primitive, grad: Primitive, moment_1: Primitive,
                  moment_2: Primitive, beta_1: float, beta_2: float, epsilon: float,
                  step_size: float, dtype: DType) -> tuple[Primitive, Primitive, Primitive]:
        """One Adam update, elementwise: ``m = moment_1 * beta_1 + grad * (1 - beta_1)``,
        ``v = moment_2 * beta_2 + grad * grad * (1 - beta_2)``, and
        ``value - step_size * m / (sqrt(v) + epsilon)``; returns ``(value, m, v)``. The bias
        corrections are the caller's, folded into ``step_size`` and ``epsilon``; ``moment_1``
        and ``moment_2`` are donated (may be reused for ``m`` and ``v``)."""
        if dtype in (float16, bfloat16):  # in float32, each result rounded once
            value, grad, moment_1, moment_2 = (
                self.cast(x, dtype, float32) for x in (value, grad, moment_1, moment_2))
            results = self.adam_step(value, grad, moment_1, moment_2, beta_1, beta_2, epsilon,
                                     step_size, float32)
            return tuple(self.cast(x, float32, dtype) for x in results)
        m = self.add(self.mul_scalar(moment_1, beta_1, dtype),
                     self.mul_scalar(grad, 1.0 - beta_1, dtype))
        v = self.add(self.mul_scalar(moment_2, beta_2, dtype),
                     self.mul_scalar(self.mul(grad, grad), 1.0 - beta_2, dtype))
        denominator = self.add_scalar(self.sqrt(v), epsilon, dtype)
        step = self.mul_scalar(self.div(m, denominator), -step_size, dtype)
        return self.add(step, value), m, v

    def adam_step_device(self, value: Primitive, grad: Primitive, moment_1: Primitive,
                         moment_2: Primitive, beta_1: float, beta_2: float, factors: Primitive,
                         dtype: DType) -> tuple[Primitive, Primitive, Primitive]:
        """``adam_step`` with ``epsilon`` and ``step_size`` read from the device: ``factors`` is
        a float32 primitive of shape ``[2]`` holding them, in that order. An optimizer whose
        bias corrections live on the device (``Adam(capturable=True)``) calls this, so that a
        captured step (``burnish.capture``) replays the right values on every step."""
        if dtype in (float16, bfloat16):
            value, grad, moment_1, moment_2 = (
                self.cast(x, dtype, float32) for x in (value, grad, moment_1, moment_2))
            results = self.adam_step_device(value, grad, moment_1, moment_2, beta_1, beta_2,
                                            factors, float32)
            return tuple(self.cast(x, float32, dtype) for x in results)
        if dtype is not float32:
            factors = self.cast(factors, float32, dtype)
        epsilon = self.reshape(self.slice(factors, [(0, 1, 1)]), ())
        step_size = self.reshape(self.slice(factors, [(1, 2, 1)]), ())
        m = self.add(self.mul_scalar(moment_1, beta_1, dtype),
                     self.mul_scalar(grad, 1.0 - beta_1, dtype))
        v = self.add(self.mul_scalar(moment_2, beta_2, dtype),
                     self.mul_scalar(self.mul(grad, grad), 1.0 - beta_2, dtype))
        denominator = self.add(self.sqrt(v), epsilon)
        step = self.mul(self.div(m, denominator), self.neg(step_size, dtype))
        return self.add(step, value), m, v
