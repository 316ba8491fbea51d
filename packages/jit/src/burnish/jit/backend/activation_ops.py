"""Activations' gradients, GELU and the hard (piecewise linear) activations as single
elementwise kernels, and softmax and log-softmax (and their gradients) as one row kernel each
(``kernels.softmax``); the other activations use the protocol's defaults, which are elementwise
ops already fused under ``burnish.fusion``."""

from __future__ import annotations

import math

from burnish.backend.activation_ops import ActivationOps
from burnish.jit import ir
from burnish.jit.kernels import softmax as rows
from burnish.jit.kernels.elementwise import elementwise
from burnish.jit.tensor import JitTensor

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _relu_backward(v, s):
    # The mask as a factor, as the protocol's default: the same NaN for an infinite gradient.
    return v[1] * ir.select(v[0] > 0, 1.0, 0.0, v[1].ty)


def _clamp(x, low: float, high: float):
    # The clamp op's selects: NaN compares false both ways and stays.
    x = ir.select(x < low, low, x)
    return ir.select(x > high, high, x)


def _gelu(v, s):
    # The default's order of operations: (x * (erf(x * (1 / sqrt 2)) + 1)) * 0.5.
    x = v[0]
    return x * (ir.call("erf", x * _INV_SQRT2) + 1.0) * 0.5


def _gelu_backward(v, s):
    # The default's: grad * (Phi(x) + x * phi(x)).
    x, grad = v
    cdf = (ir.call("erf", x * _INV_SQRT2) + 1.0) * 0.5
    pdf = ir.call("exp", x * x * -0.5) * _INV_SQRT_2PI
    return grad * (cdf + x * pdf)


def _hard_sigmoid(v, s):
    return _clamp(v[0] * s[0] + s[1], 0.0, 1.0)


def _hard_swish(v, s):
    # The default's order of operations: (x * relu6(x + 3)) * (1 / 6).
    return v[0] * _clamp(v[0] + 3.0, 0.0, 6.0) * (1.0 / 6.0)


class JitActivationOps(ActivationOps):
    def relu_backward(self, output: JitTensor, grad: JitTensor, dtype) -> JitTensor:
        return elementwise("relu_backward", _relu_backward, [output, grad], grad.dtype)

    # One kernel each instead of the defaults' three to ten (a transformer's MLP; MobileNet's
    # activations).

    def gelu(self, x: JitTensor, dtype) -> JitTensor:
        return elementwise("gelu", _gelu, [x], x.dtype)

    def gelu_backward(self, x: JitTensor, grad: JitTensor, dtype) -> JitTensor:
        if x.shape != grad.shape or x.dtype is not grad.dtype:
            return ActivationOps.gelu_backward(self, x, grad, dtype)
        return elementwise("gelu_backward", _gelu_backward, [x, grad], grad.dtype)

    def hard_sigmoid(self, x: JitTensor, alpha: float, beta: float, dtype) -> JitTensor:
        return elementwise("hard_sigmoid", _hard_sigmoid, [x], x.dtype,
                           scalars=[(alpha, x.dtype), (beta, x.dtype)])

    def hard_swish(self, x: JitTensor, dtype) -> JitTensor:
        return elementwise("hard_swish", _hard_swish, [x], x.dtype)

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
