"""Optimizer updates: run by the inner backend's own kernel when nothing is tracked."""

from __future__ import annotations

from burnish.autodiff.graph import AutodiffPrimitive
from burnish.backend.optim_ops import OptimOps
from burnish.dtype import DType

P = AutodiffPrimitive


class AutodiffOptimOps(OptimOps):
    """An update of untracked tensors (what an optimizer does: it steps the inner values) is
    the inner backend's one op; with a tracked operand the update is written through the
    differentiable ops, so that its gradient is the composition's."""

    def adam_step(self, value: P, grad: P, moment_1: P, moment_2: P, beta_1: float,
                  beta_2: float, epsilon: float, step_size: float,
                  dtype: DType) -> tuple[P, P, P]:
        if value.node is None and grad.node is None and moment_1.node is None \
                and moment_2.node is None:
            new, m, v = self._inner.adam_step(value.inner, grad.inner, moment_1.inner,
                                              moment_2.inner, beta_1, beta_2, epsilon,
                                              step_size, dtype)
            return P(new), P(m), P(v)
        return OptimOps.adam_step(self, value, grad, moment_1, moment_2, beta_1, beta_2,
                                  epsilon, step_size, dtype)

    def adam_step_device(self, value: P, grad: P, moment_1: P, moment_2: P, beta_1: float,
                         beta_2: float, factors: P, dtype: DType) -> tuple[P, P, P]:
        if value.node is None and grad.node is None and moment_1.node is None \
                and moment_2.node is None and factors.node is None:
            new, m, v = self._inner.adam_step_device(value.inner, grad.inner, moment_1.inner,
                                                     moment_2.inner, beta_1, beta_2,
                                                     factors.inner, dtype)
            return P(new), P(m), P(v)
        return OptimOps.adam_step_device(self, value, grad, moment_1, moment_2, beta_1, beta_2,
                                         factors, dtype)
