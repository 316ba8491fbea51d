"""Arithmetic, comparisons, reductions, scans and sorting, with their backward rules (those of
reductions, scans and sorts live in ``reduction.py``).

Binary ops broadcast, so their rules sum each input's gradient back to that input's shape. A rule
computes the gradient of an input only when the input is tracked (its saved shape is not None).
Ties follow PyTorch: ``maximum``/``minimum`` split the gradient evenly between equal operands;
``max`` and ``min`` (whole tensor or along dims) split it evenly among the tied extremes, as
``amax``/``amin`` do; ``max_with_indices`` gives it all to the element its index names.
``clamp`` passes it strictly inside its bounds only.
"""

from __future__ import annotations

import sys
from typing import Any

from burnish.autodiff.graph import OUT, AutodiffPrimitive
from burnish.autodiff.inner_math import scalar, swap_last, unbroadcast
from burnish.autodiff.reduction import (
    cumprod_backward,
    cumsum_backward,
    element_count,
    extreme_backward,
    mean_backward,
    pick_backward,
    prod_backward,
    sum_backward,
    var_backward,
)
from burnish.backend.base import Scalar
from burnish.backend.numeric_ops import NumericOps
from burnish.dtype import DType

P = AutodiffPrimitive


class AutodiffNumericOps(NumericOps):
    """Numeric ops: the inner backend computes, tracked inputs add a node."""

    # -- arithmetic ---------------------------------------------------------------------------

    def add(self, lhs: P, rhs: P) -> P:
        out = self._inner.add(lhs.inner, rhs.inner)
        lhs_node, rhs_node = lhs.node, rhs.node
        if lhs_node is None and rhs_node is None:
            return P(out)
        shapes = (None if lhs_node is None else lhs.shape, None if rhs_node is None else rhs.shape)
        return self._record(out, (lhs, rhs), _add_backward, shapes,
                            (self._inner.add, lhs, rhs))

    def sub(self, lhs: P, rhs: P) -> P:
        out = self._inner.sub(lhs.inner, rhs.inner)
        lhs_node, rhs_node = lhs.node, rhs.node
        if lhs_node is None and rhs_node is None:
            return P(out)
        shapes = (None if lhs_node is None else lhs.shape, None if rhs_node is None else rhs.shape)
        return self._record(out, (lhs, rhs), _sub_backward, shapes,
                            (self._inner.sub, lhs, rhs))

    def mul(self, lhs: P, rhs: P) -> P:
        out = self._inner.mul(lhs.inner, rhs.inner)
        lhs_node, rhs_node = lhs.node, rhs.node
        if lhs_node is None and rhs_node is None:
            return P(out)
        shapes = (None if lhs_node is None else lhs.shape, None if rhs_node is None else rhs.shape)
        saved = (None if lhs_node is None else rhs, None if rhs_node is None else lhs)
        return self._record(out, (lhs, rhs), _mul_backward, saved + shapes,
                            (self._inner.mul, lhs, rhs))

    def mul_add(self, x: P, a: P, b: P) -> P:
        out = self._inner.mul_add(x.inner, a.inner, b.inner)
        x_node, a_node, b_node = x.node, a.node, b.node
        if x_node is None and a_node is None and b_node is None:
            return P(out)
        shapes = tuple(None if t.node is None else t.shape for t in (x, a, b))
        saved = (None if x_node is None else a, None if a_node is None else x)
        return self._record(out, (x, a, b), _mul_add_backward, saved + shapes,
                            (self._inner.mul_add, x, a, b))

    def div(self, lhs: P, rhs: P) -> P:
        out = self._inner.div(lhs.inner, rhs.inner)
        lhs_node, rhs_node = lhs.node, rhs.node
        if lhs_node is None and rhs_node is None:
            return P(out)
        shapes = (None if lhs_node is None else lhs.shape, None if rhs_node is None else rhs.shape)
        saved = (None if rhs_node is None else lhs, rhs)
        return self._record(out, (lhs, rhs), _div_backward, saved + shapes,
                            (self._inner.div, lhs, rhs))

    def remainder(self, lhs: P, rhs: P) -> P:
        out = self._inner.remainder(lhs.inner, rhs.inner)
        lhs_node, rhs_node = lhs.node, rhs.node
        if lhs_node is None and rhs_node is None:
            return P(out)
        shapes = (None if lhs_node is None else lhs.shape, None if rhs_node is None else rhs.shape)
        saved = (lhs, rhs) if rhs_node is not None else (None, None)
        return self._record(out, (lhs, rhs), _remainder_backward, saved + shapes,
                            (self._inner.remainder, lhs, rhs))

    def pow(self, lhs: P, rhs: P) -> P:
        out = self._inner.pow(lhs.inner, rhs.inner)
        lhs_node, rhs_node = lhs.node, rhs.node
        if lhs_node is None and rhs_node is None:
            return P(out)
        shapes = (None if lhs_node is None else lhs.shape, None if rhs_node is None else rhs.shape)
        saved = (lhs, rhs, None if rhs_node is None else OUT)
        return self._record(out, (lhs, rhs), _pow_backward, saved + shapes,
                            (self._inner.pow, lhs, rhs))

    def add_scalar(self, x: P, value: Scalar, dtype: DType) -> P:
        out = self._inner.add_scalar(x.inner, value, dtype)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _identity_backward, (),
                            (self._inner.add_scalar, x, value, dtype))

    def sub_scalar(self, x: P, value: Scalar, dtype: DType) -> P:
        out = self._inner.sub_scalar(x.inner, value, dtype)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _identity_backward, (),
                            (self._inner.sub_scalar, x, value, dtype))

    def mul_scalar(self, x: P, value: Scalar, dtype: DType) -> P:
        out = self._inner.mul_scalar(x.inner, value, dtype)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _mul_scalar_backward, (value,),
                            (self._inner.mul_scalar, x, value, dtype))

    def div_scalar(self, x: P, value: Scalar, dtype: DType) -> P:
        out = self._inner.div_scalar(x.inner, value, dtype)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _div_scalar_backward, (value,),
                            (self._inner.div_scalar, x, value, dtype))

    def pow_scalar(self, x: P, value: Scalar, dtype: DType) -> P:
        out = self._inner.pow_scalar(x.inner, value, dtype)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _pow_scalar_backward, (x, value),
                            (self._inner.pow_scalar, x, value, dtype))

    # -- donating forms: tracked inputs take the recorded op, untracked ones donate inward ------

    def add_assign(self, x: P, y: P) -> P:
        if x.node is not None or y.node is not None:
            return self.add(x, y)
        return self._donate(x, y, self._inner.add_assign)

    def sub_assign(self, x: P, y: P) -> P:
        if x.node is not None or y.node is not None:
            return self.sub(x, y)
        return self._donate(x, y, self._inner.sub_assign)

    def mul_assign(self, x: P, y: P) -> P:
        if x.node is not None or y.node is not None:
            return self.mul(x, y)
        return self._donate(x, y, self._inner.mul_assign)

    def div_assign(self, x: P, y: P) -> P:
        if x.node is not None or y.node is not None:
            return self.div(x, y)
        return self._donate(x, y, self._inner.div_assign)

    def add_scalar_assign(self, x: P, value: Scalar, dtype: DType) -> P:
        if x.node is not None:
            return self.add_scalar(x, value, dtype)
        return self._donate_scalar(x, value, dtype, self._inner.add_scalar_assign)

    def mul_scalar_assign(self, x: P, value: Scalar, dtype: DType) -> P:
        if x.node is not None:
            return self.mul_scalar(x, value, dtype)
        return self._donate_scalar(x, value, dtype, self._inner.mul_scalar_assign)

    def _donate(self, x: P, y: P, inner_op: Any) -> P:
        # The wrapper lets go of its inner primitive when nothing but the donation chain holds
        # the wrapper, so that the inner backend may find that primitive unreferenced.
        inner = x.inner
        if _getrefcount(x) == _DONATED_REFERENCES:
            x.inner = None
        try:
            return P(inner_op(inner, y.inner))
        except BaseException:
            x.inner = inner
            raise

    def _donate_scalar(self, x: P, value: Scalar, dtype: DType, inner_op: Any) -> P:
        inner = x.inner
        if _getrefcount(x) == _DONATED_REFERENCES:
            x.inner = None
        try:
            return P(inner_op(inner, value, dtype))
        except BaseException:
            x.inner = inner
            raise

    def neg(self, x: P, dtype: DType) -> P:
        out = self._inner.neg(x.inner, dtype)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _neg_backward, (), (self._inner.neg, x, dtype))

    def abs(self, x: P) -> P:
        out = self._inner.abs(x.inner)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _abs_backward, (x,), (self._inner.abs, x))

    def sign(self, x: P) -> P:
        # Zero gradient almost everywhere: the result is a constant of the graph.
        return P(self._inner.sign(x.inner))

    def maximum(self, lhs: P, rhs: P) -> P:
        out = self._inner.maximum(lhs.inner, rhs.inner)
        lhs_node, rhs_node = lhs.node, rhs.node
        if lhs_node is None and rhs_node is None:
            return P(out)
        shapes = (None if lhs_node is None else lhs.shape, None if rhs_node is None else rhs.shape)
        return self._record(out, (lhs, rhs), _maximum_backward,
                            (lhs, rhs) + shapes, (self._inner.maximum, lhs, rhs))

    def minimum(self, lhs: P, rhs: P) -> P:
        out = self._inner.minimum(lhs.inner, rhs.inner)
        lhs_node, rhs_node = lhs.node, rhs.node
        if lhs_node is None and rhs_node is None:
            return P(out)
        shapes = (None if lhs_node is None else lhs.shape, None if rhs_node is None else rhs.shape)
        return self._record(out, (lhs, rhs), _minimum_backward,
                            (lhs, rhs) + shapes, (self._inner.minimum, lhs, rhs))

    def clamp(self, x: P, low: Scalar | None, high: Scalar | None, dtype: DType) -> P:
        out = self._inner.clamp(x.inner, low, high, dtype)
        if x.node is None:
            return P(out)
        # The rule reads the output, not the input: low < x < high exactly where low < out <
        # high, and the output is what the next op (a ReLU's convolution) keeps anyway, so a
        # ReLU between two layers saves no tensor of its own.
        return self._record(out, (x,), _clamp_backward, (OUT, low, high),
                            (self._inner.clamp, x, low, high, dtype))

    def matmul(self, lhs: P, rhs: P) -> P:
        out = self._inner.matmul(lhs.inner, rhs.inner)
        lhs_node, rhs_node = lhs.node, rhs.node
        if lhs_node is None and rhs_node is None:
            return P(out)
        shapes = (None if lhs_node is None else lhs.shape, None if rhs_node is None else rhs.shape)
        saved = (None if lhs_node is None else rhs, None if rhs_node is None else lhs)
        return self._record(out, (lhs, rhs), _matmul_backward, saved + shapes)

    # -- comparisons: bool results, no gradient -----------------------------------------------

    def greater(self, lhs: P, rhs: P) -> P:
        return P(self._inner.greater(lhs.inner, rhs.inner))

    def greater_equal(self, lhs: P, rhs: P) -> P:
        return P(self._inner.greater_equal(lhs.inner, rhs.inner))

    def lower(self, lhs: P, rhs: P) -> P:
        return P(self._inner.lower(lhs.inner, rhs.inner))

    def lower_equal(self, lhs: P, rhs: P) -> P:
        return P(self._inner.lower_equal(lhs.inner, rhs.inner))

    # -- reductions ---------------------------------------------------------------------------

    def sum(self, x: P, dim: int | None) -> P:
        out = self._inner.sum(x.inner, dim)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), sum_backward, (x.shape,))

    def mean(self, x: P, dim: int | None, dtype: DType) -> P:
        out = self._inner.mean(x.inner, dim, dtype)
        if x.node is None:
            return P(out)
        count = max(element_count(x.shape, dim), 1)
        return self._record(out, (x,), mean_backward, (x.shape, count))

    def prod(self, x: P, dim: int | None) -> P:
        out = self._inner.prod(x.inner, dim)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), prod_backward, (x, dim))

    def max(self, x: P, dim: int | None) -> P:
        return self._extreme(x, dim, self._inner.max)

    def min(self, x: P, dim: int | None) -> P:
        return self._extreme(x, dim, self._inner.min)

    def _extreme(self, x: P, dim: int | None, reduce) -> P:
        # Tied extremes share the gradient evenly, as PyTorch's amax/amin and max() do.
        out = reduce(x.inner, dim)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), extreme_backward, (x, OUT, dim))

    def argmax(self, x: P, dim: int) -> P:
        return P(self._inner.argmax(x.inner, dim))

    def argmin(self, x: P, dim: int) -> P:
        return P(self._inner.argmin(x.inner, dim))

    def max_with_indices(self, x: P, dim: int) -> tuple[P, P]:
        return self._with_indices(x, self._inner.max_with_indices(x.inner, dim), dim)

    def min_with_indices(self, x: P, dim: int) -> tuple[P, P]:
        return self._with_indices(x, self._inner.min_with_indices(x.inner, dim), dim)

    def _with_indices(self, x: P, result: tuple, dim: int) -> tuple[P, P]:
        values, indices = result
        if x.node is None:
            return P(values), P(indices)
        return self._record(values, (x,), pick_backward, (indices, x.shape, dim)), P(indices)

    def var(self, x: P, dim: int | None, correction: int, dtype: DType) -> P:
        out = self._inner.var(x.inner, dim, correction, dtype)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), var_backward, (x, dim, correction))

    # -- scans and sorting --------------------------------------------------------------------

    def cumsum(self, x: P, dim: int) -> P:
        out = self._inner.cumsum(x.inner, dim)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), cumsum_backward, (dim,))

    def cumprod(self, x: P, dim: int) -> P:
        out = self._inner.cumprod(x.inner, dim)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), cumprod_backward, (x, dim))

    def argsort(self, x: P, dim: int, descending: bool) -> P:
        return P(self._inner.argsort(x.inner, dim, descending))

    def sort(self, x: P, dim: int, descending: bool) -> P:
        if x.node is None:
            return P(self._inner.sort(x.inner, dim, descending))
        return self.sort_with_indices(x, dim, descending)[0]

    def sort_with_indices(self, x: P, dim: int, descending: bool) -> tuple[P, P]:
        return self._with_indices(x, self._inner.sort_with_indices(x.inner, dim, descending),
                                  dim)

    def topk_with_indices(self, x: P, dim: int, k: int) -> tuple[P, P]:
        return self._with_indices(x, self._inner.topk_with_indices(x.inner, dim, k), dim)


# References to a donated wrapper when only the donation chain holds it (CPython 3.11-3.13): the
# donor's local, the ``*_assign`` method's argument, ``_donate``'s argument and
# ``sys.getrefcount``'s own. Python 3.14 lends stack references uncounted: never release there.
_DONATED_REFERENCES = 4 if sys.version_info < (3, 14) else -1
_getrefcount = sys.getrefcount


def _reduce(b, grad, shape):
    return None if shape is None else unbroadcast(b, grad, shape)


# -- backward rules: rule(inner, dtype, grad, *saved) -> a gradient per input ---------------------


def _identity_backward(b, dtype, g):
    return (g,)


def _add_backward(b, dtype, g, lhs_shape, rhs_shape):
    return _reduce(b, g, lhs_shape), _reduce(b, g, rhs_shape)


def _sub_backward(b, dtype, g, lhs_shape, rhs_shape):
    rhs = None if rhs_shape is None else unbroadcast(b, b.neg(g, dtype), rhs_shape)
    return _reduce(b, g, lhs_shape), rhs


def _mul_backward(b, dtype, g, rhs, lhs, lhs_shape, rhs_shape):
    lhs_grad = None if lhs_shape is None else unbroadcast(b, b.mul(g, rhs), lhs_shape)
    rhs_grad = None if rhs_shape is None else unbroadcast(b, b.mul(g, lhs), rhs_shape)
    return lhs_grad, rhs_grad


def _mul_add_backward(b, dtype, g, a, x, x_shape, a_shape, b_shape):
    x_grad = None if x_shape is None else unbroadcast(b, b.mul(g, a), x_shape)
    a_grad = None if a_shape is None else unbroadcast(b, b.mul(g, x), a_shape)
    return x_grad, a_grad, _reduce(b, g, b_shape)


def _div_backward(b, dtype, g, lhs, rhs, lhs_shape, rhs_shape):
    over = b.div(g, rhs)
    rhs_grad = None
    if rhs_shape is not None:
        rhs_grad = unbroadcast(b, b.neg(b.div(b.mul(over, lhs), rhs), dtype), rhs_shape)
    return _reduce(b, over, lhs_shape), rhs_grad


def _remainder_backward(b, dtype, g, lhs, rhs, lhs_shape, rhs_shape):
    # lhs % rhs = lhs - rhs * floor(lhs / rhs): the floor's own gradient is zero.
    rhs_grad = None
    if rhs_shape is not None:
        quotient = b.floor(b.div(lhs, rhs))
        rhs_grad = unbroadcast(b, b.neg(b.mul(g, quotient), dtype), rhs_shape)
    return _reduce(b, g, lhs_shape), rhs_grad


def _pow_backward(b, dtype, g, lhs, rhs, out, lhs_shape, rhs_shape):
    # PyTorch's conventions: a zero exponent has a zero gradient for the base (even at 0 ** 0),
    # and a zero base with a non-negative exponent a zero gradient for the exponent.
    # The excluded points are also kept out of the arithmetic, where they would make 0 * inf.
    zero, one = scalar(b, 0.0, dtype, g), scalar(b, 1.0, dtype, g)
    lhs_grad = rhs_grad = None
    if lhs_shape is not None:
        flat = b.equal(rhs, zero)
        slope = b.mul(rhs, b.pow(lhs, b.where(flat, one, b.sub_scalar(rhs, 1.0, dtype))))
        lhs_grad = unbroadcast(b, b.mul(g, b.where(flat, zero, slope)), lhs_shape)
    if rhs_shape is not None:
        at_zero = b.logical_and(b.equal(lhs, zero), b.greater_equal(rhs, zero))
        slope = b.mul(out, b.log(b.where(at_zero, one, lhs)))
        rhs_grad = unbroadcast(b, b.mul(g, b.where(at_zero, zero, slope)), rhs_shape)
    return lhs_grad, rhs_grad


def _mul_scalar_backward(b, dtype, g, value):
    return (b.mul_scalar(g, value, dtype),)


def _div_scalar_backward(b, dtype, g, value):
    return (b.div_scalar(g, value, dtype),)


def _pow_scalar_backward(b, dtype, g, x, value):
    if value == 0:
        return (b.mul_scalar(g, 0.0, dtype),)
    if value == 1:
        return (g,)
    slope = b.mul_scalar(b.pow_scalar(x, value - 1, dtype), value, dtype)
    return (b.mul(g, slope),)


def _neg_backward(b, dtype, g):
    return (b.neg(g, dtype),)


def _abs_backward(b, dtype, g, x):
    return (b.mul(g, b.sign(x)),)


def _maximum_backward(b, dtype, g, lhs, rhs, lhs_shape, rhs_shape):
    return _pair_backward(b, dtype, g, lhs, rhs, lhs_shape, rhs_shape, b.lower)


def _minimum_backward(b, dtype, g, lhs, rhs, lhs_shape, rhs_shape):
    return _pair_backward(b, dtype, g, lhs, rhs, lhs_shape, rhs_shape, b.greater)


def _pair_backward(b, dtype, g, lhs, rhs, lhs_shape, rhs_shape, loses):
    """maximum/minimum: the gradient goes to the winner, half to each when they tie; ``loses``
    tells the loser (``lower`` for maximum). A NaN operand loses nothing: both get it all."""
    zero = scalar(b, 0.0, dtype, g)
    shared = b.where(b.equal(lhs, rhs), b.mul_scalar(g, 0.5, dtype), g)
    lhs_grad = rhs_grad = None
    if lhs_shape is not None:
        lhs_grad = unbroadcast(b, b.where(loses(lhs, rhs), zero, shared), lhs_shape)
    if rhs_shape is not None:
        rhs_grad = unbroadcast(b, b.where(loses(rhs, lhs), zero, shared), rhs_shape)
    return lhs_grad, rhs_grad


def _clamp_backward(b, dtype, g, x, low, high):
    # ``x`` is the clamp's output (the same test as on its input). Strictly inside (low, high)
    # the gradient passes; at the bounds, outside and at NaN it is zero, as in PyTorch 2.14
    # (earlier versions passed it at the bounds).
    inside = None
    if low is not None:
        inside = b.greater(x, scalar(b, low, dtype, x))
    if high is not None:
        below = b.lower(x, scalar(b, high, dtype, x))
        inside = below if inside is None else b.logical_and(inside, below)
    return (b.where(inside, g, scalar(b, 0.0, dtype, g)),)


def _matmul_backward(b, dtype, g, rhs, lhs, lhs_shape, rhs_shape):
    lhs_grad = rhs_grad = None
    if lhs_shape is not None:
        lhs_grad = unbroadcast(b, b.matmul(g, swap_last(b, rhs)), lhs_shape)
    if rhs_shape is not None:
        if (len(lhs.shape) > 2 and len(rhs_shape) >= 2 and all(n == 1 for n in rhs_shape[:-2])
                and tuple(g.shape[:-2]) == tuple(lhs.shape[:-2])):
            # A matrix shared by the whole batch (a weight): the sum over the batch is one
            # product over every row, not a product per matrix summed afterwards.
            k, n = lhs.shape[-1], g.shape[-1]
            rows = 1
            for extent in lhs.shape[:-1]:
                rows *= extent
            flat = b.matmul(swap_last(b, b.reshape(lhs, (rows, k))), b.reshape(g, (rows, n)))
            rhs_grad = b.reshape(flat, tuple(rhs_shape))
        else:
            rhs_grad = unbroadcast(b, b.matmul(swap_last(b, lhs), g), rhs_shape)
    return lhs_grad, rhs_grad
