"""Optimizer updates, each one kernel (``kernels.optim``)."""

from __future__ import annotations

from burnish.backend.optim_ops import OptimOps
from burnish.jit.kernels import optim
from burnish.jit.tensor import JitTensor


class JitOptimOps(OptimOps):
    def adam_step(self, value: JitTensor, grad: JitTensor, moment_1: JitTensor,
                  moment_2: JitTensor, beta_1, beta_2, epsilon, step_size, dtype):
        return optim.adam_step(value, grad, moment_1, moment_2, beta_1, beta_2, epsilon,
                               step_size)

    def adam_step_device(self, value: JitTensor, grad: JitTensor, moment_1: JitTensor,
                         moment_2: JitTensor, beta_1, beta_2, factors: JitTensor, dtype):
        return optim.adam_step(value, grad, moment_1, moment_2, beta_1, beta_2, 0.0, 0.0,
                               factors)
