"""Convolutions, pools, interpolation, embedding and unfold, with their backward rules.

The rules live beside the concept they differentiate: ``conv.py`` (conv, conv_transpose,
unfold), ``pool.py`` (the pools) and ``interpolate.py``; this module records the nodes. Every op
forwards to the inner backend's own kernel. Max pools without indices ask the inner backend for
the indices when the input is tracked, since the gradient goes to the max of each window.
Linear maps run the inner backend's op, one node whose rule is the composition's (a product's
and a broadcast addition's); layer and batch normalisation are one node each, whose rule is the
backend's backward op.
"""

from __future__ import annotations

from burnish.autodiff.conv import conv_backward, conv_transpose_backward, unfold_backward
from burnish.autodiff.graph import AutodiffPrimitive
from burnish.autodiff.inner_math import unbroadcast, zeros
from burnish.autodiff.interpolate import interpolate_backward
from burnish.autodiff.numeric_ops import _matmul_backward
from burnish.autodiff.pool import (
    adaptive_avg_pool_backward,
    avg_pool_backward,
    max_pool_backward,
)
from burnish.backend.module_ops import Dims, ModuleOps
from burnish.dtype import DType

P = AutodiffPrimitive


def _tracked(*xs: P | None) -> tuple[bool, ...]:
    return tuple(x is not None and x.node is not None for x in xs)


class AutodiffModuleOps(ModuleOps):
    """Module ops: the inner backend computes, tracked inputs add a node."""

    def conv(self, x: P, weight: P, bias: P | None, stride: Dims, padding: Dims,
             dilation: Dims, groups: int) -> P:
        out = self._inner.conv(x.inner, weight.inner, None if bias is None else bias.inner,
                               stride, padding, dilation, groups)
        needs = _tracked(x, weight, bias)
        if not any(needs):
            return P(out)
        saved = (x if needs[1] else None, weight if needs[0] else None, x.shape, weight.shape,
                 needs, stride, padding, dilation, groups)
        return self._record(out, (x, weight, bias), conv_backward, saved)

    def conv_transpose(self, x: P, weight: P, bias: P | None, stride: Dims, padding: Dims,
                       output_padding: Dims, dilation: Dims, groups: int) -> P:
        out = self._inner.conv_transpose(x.inner, weight.inner,
                                         None if bias is None else bias.inner, stride, padding,
                                         output_padding, dilation, groups)
        needs = _tracked(x, weight, bias)
        if not any(needs):
            return P(out)
        saved = (x if needs[1] else None, weight if needs[0] else None, weight.shape, needs,
                 stride, padding, dilation, groups)
        return self._record(out, (x, weight, bias), conv_transpose_backward, saved)

    def batch_norm(self, x: P, weight: P, bias: P, epsilon: float, dtype: DType
                   ) -> tuple[P, P, P]:
        y, mean, invstd = self._inner.batch_norm(x.inner, weight.inner, bias.inner, epsilon,
                                                 dtype)
        needs = _tracked(x, weight, bias)
        if not any(needs):
            return P(y), P(mean), P(invstd)
        # The statistics are not differentiated through (a BatchNorm's running statistics take
        # them detached): only y is tracked.
        saved = (x, weight, mean, invstd, epsilon, needs)
        # The node's dtype is x's (a 16-bit x has float32 parameters and statistics).
        return self._record(y, (x, weight, bias), _batch_norm_backward, saved, dtype=dtype), \
            P(mean), P(invstd)

    def batch_norm_backward(self, x: P, weight: P, mean: P, invstd: P, grad: P,
                            epsilon: float, dtype: DType) -> tuple[P, P, P]:
        if all(v.node is None for v in (x, weight, mean, invstd, grad)):
            return tuple(P(g) for g in self._inner.batch_norm_backward(  # type: ignore[return-value]  # three
                x.inner, weight.inner, mean.inner, invstd.inner, grad.inner, epsilon, dtype))
        # Tracked (a gradient of a gradient): the default's composition, differentiable.
        return ModuleOps.batch_norm_backward(self, x, weight, mean, invstd, grad, epsilon,
                                             dtype)

    def linear(self, x: P, weight: P, bias: P) -> P:
        needs = _tracked(x, weight, bias)
        out = self._inner.linear(x.inner, weight.inner, bias.inner)
        if not any(needs):
            return P(out)
        # Tracked: the inner backend's op (on cpu, the bias inside the product's call), one
        # node whose rule is the composition's (a product's and a broadcast addition's).
        saved = (weight if needs[0] else None, x if needs[1] else None,
                 tuple(x.shape) if needs[0] else None,
                 tuple(weight.shape) if needs[1] else None, needs[2])
        return self._record(out, (x, weight, bias), _linear_backward, saved)

    def layer_norm(self, x: P, weight: P, bias: P, epsilon: float, dtype: DType) -> P:
        if not any(_tracked(x, weight, bias)):
            return P(self._inner.layer_norm(x.inner, weight.inner, bias.inner, epsilon, dtype))
        return self.layer_norm_with_statistics(x, weight, bias, epsilon, dtype)[0]

    def layer_norm_with_statistics(self, x: P, weight: P, bias: P, epsilon: float,
                                   dtype: DType) -> tuple[P, P, P]:
        y, mean, invstd = self._inner.layer_norm_with_statistics(
            x.inner, weight.inner, bias.inner, epsilon, dtype)
        needs = _tracked(x, weight, bias)
        if not any(needs):
            return P(y), P(mean), P(invstd)
        # Tracked: one node keeping the input, the weight and each row's statistics (the
        # composition's own nodes kept two float32 copies of the activations); its rule is
        # the backend's layer_norm_backward. The statistics are not differentiated through.
        return (self._record(y, (x, weight, bias), _layer_norm_backward,
                             (x, weight, P(mean), P(invstd), needs), dtype=dtype),
                P(mean), P(invstd))

    def layer_norm_backward(self, x: P, weight: P, mean: P, invstd: P, grad: P, dtype: DType
                            ) -> tuple[P, P, P]:
        operands = (x, weight, mean, invstd, grad)
        if all(v.node is None for v in operands):
            return tuple(P(g) for g in self._inner.layer_norm_backward(  # type: ignore[return-value]  # three
                *(v.inner for v in operands), dtype))
        # Tracked (a gradient of a gradient): the default's composition, differentiable.
        return ModuleOps.layer_norm_backward(self, *operands, dtype)

    def conv_weight_grad(self, x: P, grad: P, kernel: Dims, stride: Dims, padding: Dims,
                         dilation: Dims, groups: int) -> P:
        if x.node is None and grad.node is None:
            return P(self._inner.conv_weight_grad(x.inner, grad.inner, kernel, stride, padding,
                                                  dilation, groups))
        # Tracked (a gradient of a gradient): the default's composition, differentiable.
        return ModuleOps.conv_weight_grad(self, x, grad, kernel, stride, padding, dilation,
                                          groups)

    def avg_pool(self, x: P, kernel: Dims, stride: Dims, padding: Dims,
                 count_include_pad: bool, ceil_mode: bool) -> P:
        out = self._inner.avg_pool(x.inner, kernel, stride, padding, count_include_pad,
                                   ceil_mode)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), avg_pool_backward,
                            (x.shape, kernel, stride, padding, count_include_pad))

    def max_pool_with_indices(self, x: P, kernel: Dims, stride: Dims, padding: Dims,
                              dilation: Dims, ceil_mode: bool) -> tuple[P, P]:
        values, indices = self._inner.max_pool_with_indices(x.inner, kernel, stride, padding,
                                                            dilation, ceil_mode)
        return self._max_pooled(x, values, indices), P(indices)

    def max_pool(self, x: P, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
                 ceil_mode: bool) -> P:
        if x.node is None:
            return P(self._inner.max_pool(x.inner, kernel, stride, padding, dilation,
                                          ceil_mode))
        return self.max_pool_with_indices(x, kernel, stride, padding, dilation, ceil_mode)[0]

    def adaptive_avg_pool(self, x: P, output_size: Dims) -> P:
        out = self._inner.adaptive_avg_pool(x.inner, output_size)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), adaptive_avg_pool_backward, (x.shape,))

    def adaptive_max_pool_with_indices(self, x: P, output_size: Dims) -> tuple[P, P]:
        values, indices = self._inner.adaptive_max_pool_with_indices(x.inner, output_size)
        return self._max_pooled(x, values, indices), P(indices)

    def adaptive_max_pool(self, x: P, output_size: Dims) -> P:
        if x.node is None:
            return P(self._inner.adaptive_max_pool(x.inner, output_size))
        return self.adaptive_max_pool_with_indices(x, output_size)[0]

    def max_pool_backward(self, grad: P, indices: P, x_shape: Dims, dtype: DType) -> P:
        if grad.node is None:
            return P(self._inner.max_pool_backward(grad.inner, indices.inner, x_shape, dtype))
        # Tracked (a gradient of a gradient): the default's composition, differentiable.
        return ModuleOps.max_pool_backward(self, grad, indices, x_shape, dtype)

    def _max_pooled(self, x: P, values, indices) -> P:
        if x.node is None:
            return P(values)
        return self._record(values, (x,), max_pool_backward, (indices, x.shape))

    def interpolate(self, x: P, size: Dims, mode: str, align_corners: bool) -> P:
        out = self._inner.interpolate(x.inner, size, mode, align_corners)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), interpolate_backward, (x.shape, mode, align_corners))

    def embedding(self, weights: P, indices: P) -> P:
        out = self._inner.embedding(weights.inner, indices.inner)
        if weights.node is None:
            return P(out)
        return self._record(out, (weights,), _embedding_backward, (weights.shape, indices.inner))

    def unfold(self, x: P, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
               dtype: DType) -> P:
        out = self._inner.unfold(x.inner, kernel, stride, padding, dilation, dtype)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), unfold_backward,
                            (x.shape, kernel, stride, padding, dilation))


def _embedding_backward(b, dtype, g, shape, indices):
    count = 1
    for n in indices.shape:
        count *= n
    rows = b.reshape(g, (count, shape[1]))
    flat = b.reshape(indices, (count,))
    return (b.select_add(zeros(b, shape, dtype, g), 0, flat, rows),)


def _linear_backward(b, dtype, g, weight, x, x_shape, weight_shape, bias_needed):
    dx, dweight = _matmul_backward(b, dtype, g, weight, x, x_shape, weight_shape)
    dbias = None
    if bias_needed:
        d = g.shape[-1]
        dbias = b.reshape(unbroadcast(b, g, (1,) * (len(g.shape) - 1) + (d,)), (d,))
    return dx, dweight, dbias


def _layer_norm_backward(b, dtype, g, x, weight, mean, invstd, needs):
    dx, dweight, dbias = b.layer_norm_backward(x, weight, mean, invstd, g, dtype)
    return (dx if needs[0] else None, dweight if needs[1] else None,
            dbias if needs[2] else None)


def _batch_norm_backward(b, dtype, g, x, weight, mean, invstd, epsilon, needs):
    dx, dweight, dbias = b.batch_norm_backward(x, weight, mean, invstd, g, epsilon, dtype)
    return (dx if needs[0] else None, dweight if needs[1] else None,
            dbias if needs[2] else None)
