"""Indexing, gathering, scattering and joining as kernels (views are in ``base``)."""

from __future__ import annotations

from collections.abc import Sequence

from burnish.backend.layout_ops import LayoutOps
from burnish.jit import ir
from burnish.jit.kernels import index as index_kernels
from burnish.jit.kernels.elementwise import elementwise
from burnish.jit.tensor import JitTensor

#: Accumulating scatters with more index entries than this along their dim sort them first
#: (one argsort), so each output element binary-searches its entries instead of scanning all.
SORT_FROM = 32


def _copy(x: JitTensor) -> JitTensor:
    """A fresh plain copy of ``x`` (never ``x``'s own buffer: the result is written next)."""
    return elementwise("copy", lambda v, s: v[0], [x], x.dtype)


def _along(dim: int, ndim: int, stride: int) -> tuple[int, ...]:
    """Strides that read a 1-d index list along ``dim`` of an ``ndim``-d shape."""
    return tuple(stride if d == dim else 0 for d in range(ndim))


class JitLayoutOps(LayoutOps):
    """slice_assign, gather, scatter_add, select, select_add, cat, where, mask_fill, repeat_dim.

    Every op writes a fresh plain tensor: a copy plus a region kernel (slice_assign, cat), a
    gather kernel (gather, select) or a deterministic accumulating kernel (scatter_add,
    select_add: no atomics; long index lists are argsorted first, see
    ``kernels.index.accumulate`` for the cost of each way).
    """

    def slice_assign(self, x, ranges, value):
        out = _copy(x)
        offset, shape, strides = 0, [], []
        for (start, stop, step), stride in zip(ranges, out.strides):
            shape.append(max(0, -(-(stop - start) // step)))
            offset += start * stride
            strides.append(stride * step)
        region = out.view(tuple(shape), tuple(strides), offset)
        index_kernels.copy_into(region, value)
        return out

    def gather(self, x, dim, indices):
        out = self._new(indices.shape, x.dtype, x.device)
        index_kernels.gather(out, x, dim, indices, indices.strides)
        return out

    def select(self, x, dim, indices):
        shape = x.shape[:dim] + (indices.shape[0],) + x.shape[dim + 1:]
        out = self._new(shape, x.dtype, x.device)
        if indices.shape[0] and x.runtime.library_select(out, x, dim, indices):
            return out
        strides = _along(dim, x.ndim, indices.strides[0])
        index_kernels.gather(out, x, dim, indices, strides)
        return out

    def scatter_add(self, x, dim, indices, values):
        out = self._new(x.shape, x.dtype, x.device)
        if x.runtime.serial_scatter:
            index_kernels.accumulate_lines(out, x, dim, indices, indices.strides, values,
                                           indices.shape)
            return out
        order, order_strides = None, ()
        if indices.shape[dim] > SORT_FROM:
            order = self.argsort(indices, dim, False)
            order_strides = order.strides
        index_kernels.accumulate(out, x, dim, indices, indices.strides, values, indices.shape,
                                 order, order_strides)
        return out

    def select_add(self, x, dim, indices, values):
        out = self._new(x.shape, x.dtype, x.device)
        strides = _along(dim, x.ndim, indices.strides[0])
        if x.runtime.serial_scatter:
            index_kernels.accumulate_lines(out, x, dim, indices, strides, values, values.shape)
            return out
        order, order_strides = None, ()
        if indices.shape[0] > SORT_FROM:
            order = self.argsort(indices, 0, False)
            order_strides = _along(dim, x.ndim, order.strides[0])
        index_kernels.accumulate(out, x, dim, indices, strides, values, values.shape, order,
                                 order_strides)
        return out

    def cat(self, xs: Sequence[JitTensor], dim: int) -> JitTensor:
        first = xs[0]
        shape = list(first.shape)
        shape[dim] = sum(x.shape[dim] for x in xs)
        out = self._new(tuple(shape), first.dtype, first.device)
        parts, start = [], 0
        for x in xs:
            if x.shape[dim]:
                parts.append((x, start))
            start += x.shape[dim]
        if parts and first.runtime.library_cat(out, parts, dim % len(shape)):
            return out
        # Several inputs per launch, as many as the runtime binds buffers for; each launch
        # writes its inputs' block of ``out``.
        group = max(1, min(index_kernels.CAT_INPUTS, first.runtime.max_buffers - 1))
        for i in range(0, len(parts), group):
            chunk = parts[i:i + group]
            low = chunk[0][1]
            region = list(shape)
            region[dim] = sum(x.shape[dim] for x, _ in chunk)
            view = out.view(tuple(region), out.strides, low * out.strides[dim])
            if len(chunk) == 1:
                index_kernels.copy_into(view, chunk[0][0])
            else:
                index_kernels.cat_into(view, [(x, s - low) for x, s in chunk], dim % len(shape))
        return out

    def where(self, mask, x, y):
        return elementwise("where", lambda v, s: ir.select(v[0], v[1], v[2]), [mask, x, y],
                           x.dtype)

    def mask_fill(self, x, mask, value, dtype):
        """``value`` travels in the launch's metadata: nothing is uploaded."""
        return elementwise("mask_fill", lambda v, s: ir.select(v[1], s[0], v[0]), [x, mask],
                           x.dtype, scalars=[(value, x.dtype)], shape=x.shape)

    def repeat_dim(self, x, dim, times):
        """One copy of ``x`` seen with a broadcast dim of ``times`` before ``dim``."""
        shape = x.shape[:dim] + (times,) + x.shape[dim:]
        strides = x.strides[:dim] + (0,) + x.strides[dim:]
        tiled = _copy(x.view(shape, strides, x.offset))
        out_shape = x.shape[:dim] + (times * x.shape[dim],) + x.shape[dim + 1:]
        return self.reshape(tiled, out_shape)
