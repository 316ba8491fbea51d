"""Activations with their backward rules: one node each, not the graph of their defaults.

The protocol's defaults write these through other ops; through autodiff that would record one
node per step (and keep one buffer per step). Each is forwarded to the inner backend's own
activation instead, and differentiated by its closed form.
"""

from __future__ import annotations

from burnish.autodiff.graph import OUT, AutodiffPrimitive
from burnish.autodiff.inner_math import one_minus, scalar
from burnish.backend.activation_ops import ActivationOps
from burnish.dtype import DType, bool_

P = AutodiffPrimitive


class AutodiffActivationOps(ActivationOps):
    """Activations: the inner backend computes, a tracked input adds one node."""

    def _activation(self, x: P, op: str, rule, saved: tuple, *args) -> P:
        fn = getattr(self._inner, op)
        out = fn(x.inner, *args)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), rule, saved, (fn, x, *args))

    def relu(self, x: P, dtype: DType) -> P:
        return self._activation(x, "relu", _relu_backward, (OUT,), dtype)

    def relu_backward(self, output: P, grad: P, dtype: DType) -> P:
        if output.node is None and grad.node is None:
            return P(self._inner.relu_backward(output.inner, grad.inner, dtype))
        # Tracked (a gradient of a gradient): the default's composition, differentiable.
        return ActivationOps.relu_backward(self, output, grad, dtype)

    def gelu(self, x: P, dtype: DType) -> P:
        return self._activation(x, "gelu", _gelu_backward, (x,), dtype)

    def gelu_backward(self, x: P, grad: P, dtype: DType) -> P:
        if x.node is None and grad.node is None:
            return P(self._inner.gelu_backward(x.inner, grad.inner, dtype))
        # Tracked (a gradient of a gradient): the default's composition, differentiable.
        return ActivationOps.gelu_backward(self, x, grad, dtype)

    def hard_sigmoid(self, x: P, alpha: float, beta: float, dtype: DType) -> P:
        return self._activation(x, "hard_sigmoid", _hard_sigmoid_backward, (OUT, alpha),
                                alpha, beta, dtype)

    def hard_swish(self, x: P, dtype: DType) -> P:
        return self._activation(x, "hard_swish", _hard_swish_backward, (x,), dtype)

    def sigmoid(self, x: P, dtype: DType) -> P:
        return self._activation(x, "sigmoid", _sigmoid_backward, (OUT,), dtype)

    def log_sigmoid(self, x: P, dtype: DType) -> P:
        return self._activation(x, "log_sigmoid", _log_sigmoid_backward, (x,), dtype)

    def softmax(self, x: P, dim: int, dtype: DType) -> P:
        return self._activation(x, "softmax", _softmax_backward, (OUT, dim), dim, dtype)

    def log_softmax(self, x: P, dim: int, dtype: DType) -> P:
        return self._activation(x, "log_softmax", _log_softmax_backward, (OUT, dim), dim, dtype)

    def softmax_backward(self, output: P, grad: P, dim: int, dtype: DType) -> P:
        if output.node is None and grad.node is None:
            return P(self._inner.softmax_backward(output.inner, grad.inner, dim, dtype))
        # Tracked (a gradient of a gradient): the default's composition, differentiable.
        return ActivationOps.softmax_backward(self, output, grad, dim, dtype)

    def log_softmax_backward(self, output: P, grad: P, dim: int, dtype: DType) -> P:
        if output.node is None and grad.node is None:
            return P(self._inner.log_softmax_backward(output.inner, grad.inner, dim, dtype))
        return ActivationOps.log_softmax_backward(self, output, grad, dim, dtype)


# -- backward rules: rule(inner, dtype, grad, *saved) -> a gradient per input ---------------------


def _relu_backward(b, dtype, g, out):
    return (b.relu_backward(out, g, dtype),)  # one op: one kernel on the GPU backends


def _gelu_backward(b, dtype, g, x):
    return (b.gelu_backward(x, g, dtype),)  # one op: one kernel on the jit backends


def _hard_sigmoid_backward(b, dtype, g, out, alpha):
    # alpha where the clamp passes its input (0 < out < 1, PyTorch's convention at the ends),
    # 0 elsewhere; the masks as factors, as relu_backward's.
    inside = b.mul(b.cast(b.greater(out, scalar(b, 0.0, dtype, out)), bool_, dtype),
                   b.cast(b.lower(out, scalar(b, 1.0, dtype, out)), bool_, dtype))
    return (b.mul(g, b.mul_scalar(inside, alpha, dtype)),)


def _hard_swish_backward(b, dtype, g, x):
    # d/dx x * relu6(x + 3) / 6: 0 below -3, x / 3 + 1/2 on [-3, 3], 1 above (PyTorch's).
    middle = b.add_scalar(b.mul_scalar(x, 1.0 / 3.0, dtype), 0.5, dtype)
    slope = b.where(b.greater(x, scalar(b, 3.0, dtype, x)), scalar(b, 1.0, dtype, x), middle)
    slope = b.where(b.lower(x, scalar(b, -3.0, dtype, x)), scalar(b, 0.0, dtype, x), slope)
    return (b.mul(g, slope),)


def _sigmoid_backward(b, dtype, g, out):
    return (b.mul(g, b.mul(out, one_minus(b, out, dtype))),)


def _log_sigmoid_backward(b, dtype, g, x):
    # d/dx log(sigmoid(x)) = 1 - sigmoid(x) = sigmoid(-x), stable for any x.
    return (b.mul(g, b.sigmoid(b.neg(x, dtype), dtype)),)


def _softmax_backward(b, dtype, g, out, dim):
    return (b.softmax_backward(out, g, dim, dtype),)  # one kernel on the GPU backends


def _log_softmax_backward(b, dtype, g, out, dim):
    return (b.log_softmax_backward(out, g, dim, dtype),)
