"""Reshaping, indexing, gathering and joining, with their backward rules.

Each rule moves the gradient back where the op took its elements from: reshapes and permutes
are undone, ``expand`` and ``repeat_dim`` sum over the copies, slices and selections scatter
into zeros, the pieces of a ``split`` are joined again (one node for all of them), scatters
gather. Index and mask inputs get no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence

from burnish.autodiff.graph import AutodiffPrimitive, Node, output_node
from burnish.autodiff.inner_math import scalar, scatter_zeros, unbroadcast, zeros
from burnish.backend.base import Scalar
from burnish.backend.layout_ops import LayoutOps, Ranges
from burnish.dtype import DType, int64

P = AutodiffPrimitive


class AutodiffLayoutOps(LayoutOps):
    """Layout ops on every dtype; only float tensors are ever tracked."""

    def reshape(self, x: P, shape: tuple[int, ...]) -> P:
        out = self._inner.reshape(x.inner, shape)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _reshape_backward, (x.shape,),
                            (self._inner.reshape, x, shape))

    def permute(self, x: P, axes: tuple[int, ...]) -> P:
        out = self._inner.permute(x.inner, axes)
        if x.node is None:
            return P(out)
        inverse = tuple(sorted(range(len(axes)), key=axes.__getitem__))
        return self._record(out, (x,), _permute_backward, (inverse,),
                            (self._inner.permute, x, axes))

    def expand(self, x: P, shape: tuple[int, ...]) -> P:
        out = self._inner.expand(x.inner, shape)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _expand_backward, (x.shape,),
                            (self._inner.expand, x, shape))

    def flip(self, x: P, axes: tuple[int, ...]) -> P:
        out = self._inner.flip(x.inner, axes)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _flip_backward, (axes,), (self._inner.flip, x, axes))

    def slice(self, x: P, ranges: Ranges) -> P:
        out = self._inner.slice(x.inner, ranges)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _slice_backward, (x.shape, ranges),
                            (self._inner.slice, x, ranges))

    def split(self, x: P, sizes: Sequence[int], dim: int) -> list[P]:
        pieces = self._inner.split(x.inner, sizes, dim)
        if x.node is None:
            return [P(piece) for piece in pieces]
        group = Node((x.node,), _split_backward, (x.shape, tuple(sizes), dim), None,
                     x.node.dtype)
        return [P(piece, output_node(group, k)) for k, piece in enumerate(pieces)]

    def slice_assign(self, x: P, ranges: Ranges, value: P) -> P:
        out = self._inner.slice_assign(x.inner, ranges, value.inner)
        if x.node is None and value.node is None:
            return P(out)
        needs = (x.node is not None, value.node is not None)
        return self._record(out, (x, value), _slice_assign_backward, (ranges, value.shape, needs))

    def gather(self, x: P, dim: int, indices: P) -> P:
        out = self._inner.gather(x.inner, dim, indices.inner)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _gather_backward, (x.shape, dim, indices.inner))

    def scatter_add(self, x: P, dim: int, indices: P, values: P) -> P:
        out = self._inner.scatter_add(x.inner, dim, indices.inner, values.inner)
        if x.node is None and values.node is None:
            return P(out)
        return self._record(out, (x, values), _scatter_add_backward,
                            (dim, indices.inner if values.node is not None else None))

    def select(self, x: P, dim: int, indices: P) -> P:
        out = self._inner.select(x.inner, dim, indices.inner)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _select_backward, (x.shape, dim, indices.inner))

    def select_add(self, x: P, dim: int, indices: P, values: P) -> P:
        out = self._inner.select_add(x.inner, dim, indices.inner, values.inner)
        if x.node is None and values.node is None:
            return P(out)
        return self._record(out, (x, values), _select_add_backward,
                            (dim, indices.inner if values.node is not None else None))

    def cat(self, xs: Sequence[P], dim: int) -> P:
        out = self._inner.cat([x.inner for x in xs], dim)
        if all(x.node is None for x in xs):
            return P(out)
        bounds, start = [], 0
        for x in xs:
            size = x.shape[dim]
            bounds.append(None if x.node is None else (start, start + size))
            start += size
        return self._record(out, tuple(xs), _cat_backward, (dim, tuple(bounds)))

    def where(self, mask: P, x: P, y: P) -> P:
        out = self._inner.where(mask.inner, x.inner, y.inner)
        if x.node is None and y.node is None:
            return P(out)
        shapes = (None if x.node is None else x.shape, None if y.node is None else y.shape)
        return self._record(out, (x, y), _where_backward, (mask.inner, *shapes),
                            (self._inner.where, mask, x, y))

    def mask_fill(self, x: P, mask: P, value: Scalar, dtype: DType) -> P:
        out = self._inner.mask_fill(x.inner, mask.inner, value, dtype)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _mask_fill_backward, (mask.inner,),
                            (self._inner.mask_fill, x, mask, value, dtype))

    def repeat_dim(self, x: P, dim: int, times: int) -> P:
        out = self._inner.repeat_dim(x.inner, dim, times)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _repeat_dim_backward, (x.shape, dim, times),
                            (self._inner.repeat_dim, x, dim, times))

    def equal(self, lhs: P, rhs: P) -> P:
        return P(self._inner.equal(lhs.inner, rhs.inner))

    def not_equal(self, lhs: P, rhs: P) -> P:
        return P(self._inner.not_equal(lhs.inner, rhs.inner))


# -- backward rules: rule(inner, dtype, grad, *saved) -> a gradient per input ---------------------


def _reshape_backward(b, dtype, g, shape):
    return (b.reshape(g, shape),)


def _permute_backward(b, dtype, g, inverse):
    return (b.permute(g, inverse),)


def _expand_backward(b, dtype, g, shape):
    return (unbroadcast(b, g, shape),)


def _flip_backward(b, dtype, g, axes):
    return (b.flip(g, axes),)


def _slice_backward(b, dtype, g, shape, ranges):
    return (b.slice_assign(zeros(b, shape, dtype, g), ranges, g),)


def _split_backward(b, dtype, grads, shape, sizes, dim):
    # grads: the pieces' gradients by index, for the pieces that got one.
    if len(grads) == 1:  # one piece used: scattered into zeros, as a slice's
        (k, g), = grads.items()
        start = sum(sizes[:k])
        ranges = tuple((start, start + sizes[k], 1) if d == dim else (0, n, 1)
                       for d, n in enumerate(shape))
        return (b.slice_assign(zeros(b, shape, dtype, g), ranges, g),)
    like = next(iter(grads.values()))
    parts = []
    for k, size in enumerate(sizes):
        g = grads.get(k)
        if g is None:
            g = zeros(b, tuple(size if d == dim else n for d, n in enumerate(shape)), dtype, like)
        parts.append(g)
    return (b.cat(parts, dim),)


def _slice_assign_backward(b, dtype, g, ranges, value_shape, needs):
    x_grad = value_grad = None
    if needs[0]:
        x_grad = b.slice_assign(g, ranges, zeros(b, value_shape, dtype, g))
    if needs[1]:
        value_grad = b.slice(g, ranges)
    return x_grad, value_grad


def _gather_backward(b, dtype, g, shape, dim, indices):
    if indices.shape[dim] == 1 and all(n == m for d, (n, m) in enumerate(zip(indices.shape, shape))
                                       if d != dim):
        # One index per line (a loss picking each target's score): the gradient is ``g`` where
        # a position equals its line's index, an elementwise select that a fuser merges into
        # the op that reads it, instead of zeros of the whole shape and a scatter into them.
        # (The indices are int64: ``Tensor.gather`` casts them.)
        positions = [1] * len(shape)
        positions[dim] = shape[dim]
        iota = b.reshape(b.arange(0, shape[dim], 1, int64, b._device_of(g)), tuple(positions))
        return (b.where(b.equal(iota, indices), g, scalar(b, 0.0, dtype, g)),)
    return (scatter_zeros(b, g, indices, shape, dim, dtype),)


def _scatter_add_backward(b, dtype, g, dim, indices):
    return g, None if indices is None else b.gather(g, dim, indices)


def _select_backward(b, dtype, g, shape, dim, indices):
    return (b.select_add(zeros(b, shape, dtype, g), dim, indices, g),)


def _select_add_backward(b, dtype, g, dim, indices):
    return g, None if indices is None else b.select(g, dim, indices)


def _cat_backward(b, dtype, g, dim, bounds):
    whole = tuple((0, n, 1) for n in g.shape)
    return tuple(None if part is None else
                 b.slice(g, whole[:dim] + ((part[0], part[1], 1),) + whole[dim + 1:])
                 for part in bounds)


def _where_backward(b, dtype, g, mask, x_shape, y_shape):
    zero = scalar(b, 0.0, dtype, g)
    x_grad = None if x_shape is None else unbroadcast(b, b.where(mask, g, zero), x_shape)
    y_grad = None if y_shape is None else unbroadcast(b, b.where(mask, zero, g), y_shape)
    return x_grad, y_grad


def _mask_fill_backward(b, dtype, g, mask):
    return (b.where(mask, scalar(b, 0.0, dtype, g), g),)


def _repeat_dim_backward(b, dtype, g, shape, dim, times):
    # The copies lie one after the other along dim: give them a dim of their own, sum it away.
    split = shape[:dim] + (times, shape[dim]) + shape[dim + 1:]
    return (b.reshape(b.sum(b.reshape(g, split), dim), shape),)
