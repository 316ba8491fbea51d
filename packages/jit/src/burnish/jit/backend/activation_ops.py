"""Activations' gradients as single elementwise kernels (the activations themselves use the
protocol's defaults, which are elementwise ops already fused under ``burnish.fusion``)."""

from __future__ import annotations

from burnish.backend.activation_ops import ActivationOps
from burnish.jit import ir
from burnish.jit.kernels.elementwise import elementwise
from burnish.jit.tensor import JitTensor


def _relu_backward(v, s):
    # The mask as a factor, as the protocol's default: the same NaN for an infinite gradient.
    return v[1] * ir.select(v[0] > 0, 1.0, 0.0, v[1].ty)


class JitActivationOps(ActivationOps):
    def relu_backward(self, output: JitTensor, grad: JitTensor, dtype) -> JitTensor:
        return elementwise("relu_backward", _relu_backward, [output, grad], grad.dtype)
