"""Elementwise float math with its backward rules; rounding and NaN/inf tests have none.

``floor``, ``ceil`` and ``round`` have a zero gradient almost everywhere, so their results are
constants of the graph (not tracked), as are the bool results of ``is_nan`` and ``is_inf``.
"""

from __future__ import annotations

import math

from burnish.autodiff.graph import OUT, AutodiffPrimitive
from burnish.autodiff.inner_math import one_minus
from burnish.backend.float_ops import FloatOps
from burnish.dtype import DType

P = AutodiffPrimitive

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


class AutodiffFloatOps(FloatOps):
    """Float ops: the inner backend computes, a tracked input adds a node."""

    def _unary(self, x: P, op: str, rule, saved: tuple, *args) -> P:
        fn = getattr(self._inner, op)
        out = fn(x.inner, *args)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), rule, saved, (fn, x, *args))

    def exp(self, x: P) -> P:
        return self._unary(x, "exp", _exp_backward, (OUT,))

    def log(self, x: P) -> P:
        return self._unary(x, "log", _log_backward, (x,))

    def log1p(self, x: P, dtype: DType) -> P:
        return self._unary(x, "log1p", _log1p_backward, (x,), dtype)

    def sqrt(self, x: P) -> P:
        return self._unary(x, "sqrt", _sqrt_backward, (OUT,))

    def rsqrt(self, x: P, dtype: DType) -> P:
        return self._unary(x, "rsqrt", _rsqrt_backward, (OUT,), dtype)

    def recip(self, x: P, dtype: DType) -> P:
        return self._unary(x, "recip", _recip_backward, (OUT,), dtype)

    def sin(self, x: P) -> P:
        return self._unary(x, "sin", _sin_backward, (x,))

    def cos(self, x: P) -> P:
        return self._unary(x, "cos", _cos_backward, (x,))

    def tan(self, x: P) -> P:
        return self._unary(x, "tan", _tan_backward, (OUT,))

    def tanh(self, x: P) -> P:
        return self._unary(x, "tanh", _tanh_backward, (OUT,))

    def erf(self, x: P) -> P:
        return self._unary(x, "erf", _erf_backward, (x,))

    def floor(self, x: P) -> P:
        return P(self._inner.floor(x.inner))

    def ceil(self, x: P) -> P:
        return P(self._inner.ceil(x.inner))

    def round(self, x: P) -> P:
        return P(self._inner.round(x.inner))

    def is_nan(self, x: P) -> P:
        return P(self._inner.is_nan(x.inner))

    def is_inf(self, x: P) -> P:
        return P(self._inner.is_inf(x.inner))


# -- backward rules: rule(inner, dtype, grad, *saved) -> a gradient per input ---------------------


def _exp_backward(b, dtype, g, out):
    return (b.mul(g, out),)


def _log_backward(b, dtype, g, x):
    return (b.div(g, x),)


def _log1p_backward(b, dtype, g, x):
    return (b.div(g, b.add_scalar(x, 1.0, dtype)),)


def _sqrt_backward(b, dtype, g, out):
    return (b.div(b.mul_scalar(g, 0.5, dtype), out),)


def _rsqrt_backward(b, dtype, g, out):
    cube = b.mul(out, b.mul(out, out))
    return (b.mul(g, b.mul_scalar(cube, -0.5, dtype)),)


def _recip_backward(b, dtype, g, out):
    return (b.neg(b.mul(g, b.mul(out, out)), dtype),)


def _sin_backward(b, dtype, g, x):
    return (b.mul(g, b.cos(x)),)


def _cos_backward(b, dtype, g, x):
    return (b.neg(b.mul(g, b.sin(x)), dtype),)


def _tan_backward(b, dtype, g, out):
    return (b.mul(g, b.add_scalar(b.mul(out, out), 1.0, dtype)),)


def _tanh_backward(b, dtype, g, out):
    return (b.mul(g, one_minus(b, b.mul(out, out), dtype)),)


def _erf_backward(b, dtype, g, x):
    bell = b.exp(b.neg(b.mul(x, x), dtype))
    return (b.mul(g, b.mul_scalar(bell, _TWO_OVER_SQRT_PI, dtype)),)
