"""Activations' gradients as single elementwise kernels, and softmax and log-softmax (and their
gradients) as one row kernel each (``kernels.softmax``); the other activations use the
protocol's defaults, which are elementwise ops already fused under ``burnish.fusion``."""

from __future__ import annotations

from burnish.backend.activation_ops import ActivationOps
from burnish.jit import ir
from burnish.jit.kernels import softmax as rows
from burnish.jit.kernels.elementwise import elementwise
from burnish.jit.tensor import JitTensor


def _relu_backward(v, s):
    # The mask as a factor, as the protocol's default: the same NaN for an infinite gradient.
    return v[1] * ir.select(v[0] > 0, 1.0, 0.0, v[1].ty)


class JitActivationOps(ActivationOps):
    def relu_backward(self, output: JitTensor, grad: JitTensor, dtype) -> JitTensor:
        return elementwise("relu_backward", _relu_backward, [output, grad], grad.dtype)

    # Rows longer than ``rows.MAX_LENGTH`` take the protocol's composition (see there why).

    def softmax(self, x: JitTensor, dim: int, dtype) -> JitTensor:
        if not rows.fits(x, dim):
            return ActivationOps.softmax(self, x, dim, dtype)
        return rows.softmax("softmax", [x], dim)

    def log_softmax(self, x: JitTensor, dim: int, dtype) -> JitTensor:
        if not rows.fits(x, dim):
            return ActivationOps.log_softmax(self, x, dim, dtype)
        return rows.softmax("log_softmax", [x], dim)

    def softmax_backward(self, output: JitTensor, grad: JitTensor, dim: int,
                         dtype) -> JitTensor:
        if not _same(output, grad) or not rows.fits(output, dim):
            return ActivationOps.softmax_backward(self, output, grad, dim, dtype)
        return rows.softmax("softmax_backward", [output, grad], dim)

    def log_softmax_backward(self, output: JitTensor, grad: JitTensor, dim: int,
                             dtype) -> JitTensor:
        if not _same(output, grad) or not rows.fits(output, dim):
            return ActivationOps.log_softmax_backward(self, output, grad, dim, dtype)
        return rows.softmax("log_softmax_backward", [output, grad], dim)


def _same(output: JitTensor, grad: JitTensor) -> bool:
    """Whether the row kernel takes the pair: one shape and dtype (the defaults' ops would
    broadcast and promote; autodiff always passes a gradient like its output)."""
    return output.shape == grad.shape and output.dtype is grad.dtype
