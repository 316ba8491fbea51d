"""Backward rules of convolutions, transposed convolutions and unfold, written as convolutions.

The gradient of a convolution with respect to its input is the transposed convolution of the
output's gradient (and the other way round); the gradient with respect to the weight is the
backend's ``conv_weight_grad`` (by default itself a convolution, of the input by the output's
gradient, with stride and dilation exchanged; cuda runs cuDNN's backward-filter pass). So the
rules run on the inner backend's own (fast) convolution kernels, for any number of spatial dims,
groups, strides and dilations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from burnish.autodiff.inner_math import constant

Dims = tuple[int, ...]


def conv_backward(b: Any, dtype, g: Any, x: Any, weight: Any, x_shape: Dims, w_shape: Dims,
                  needs: tuple[bool, bool, bool], stride: Dims, padding: Dims, dilation: Dims,
                  groups: int) -> tuple[Any, Any, Any]:
    """Gradients of ``conv(x, weight, bias)`` for the tracked ones of (x, weight, bias)."""
    x_grad = weight_grad = bias_grad = None
    if needs[0]:
        extra = _leftover(x_shape[2:], w_shape[2:], g.shape[2:], stride, padding, dilation)
        x_grad = b.conv_transpose(g, weight, None, stride, padding, extra, dilation, groups)
    if needs[1]:
        weight_grad = b.conv_weight_grad(x, g, w_shape[2:], stride, padding, dilation, groups)
    if needs[2]:
        bias_grad = channel_sum(b, g)
    return x_grad, weight_grad, bias_grad


def conv_transpose_backward(b: Any, dtype, g: Any, x: Any, weight: Any, w_shape: Dims,
                            needs: tuple[bool, bool, bool], stride: Dims, padding: Dims,
                            dilation: Dims, groups: int) -> tuple[Any, Any, Any]:
    """Gradients of ``conv_transpose(x, weight, bias)`` for the tracked ones."""
    x_grad = weight_grad = bias_grad = None
    if needs[0]:
        x_grad = b.conv(g, weight, None, stride, padding, dilation, groups)
    if needs[1]:
        # The transposed convolution's weight meets the output's gradient as the convolution's
        # weight meets its input: the same formula with the two exchanged.
        weight_grad = b.conv_weight_grad(g, x, w_shape[2:], stride, padding, dilation, groups)
    if needs[2]:
        bias_grad = channel_sum(b, g)
    return x_grad, weight_grad, bias_grad


def channel_sum(b: Any, g: Any) -> Any:
    """``g`` summed over every dim but the channels (dim 1): the bias's gradient. The spatial
    dims are merged first, so that it takes two reductions whatever their number."""
    batch, channels = g.shape[:2]
    if len(g.shape) > 3:
        positions = 1
        for extent in g.shape[2:]:
            positions *= extent
        g = b.reshape(g, (batch, channels, positions))
    if len(g.shape) > 2:
        g = b.sum(g, 2)
    return b.reshape(b.sum(g, 0), (channels,))


def unfold_backward(b: Any, dtype, g: Any, x_shape: Dims, kernel: Dims, stride: Dims,
                    padding: Dims, dilation: Dims) -> tuple[Any]:
    """Gradient of ``unfold``: each column entry is added back where it was copied from. Unfold
    is a grouped convolution with one-hot kernels (one group per channel, one output channel
    per kernel position), so this is that convolution's transposed convolution."""
    batch, channels, *size = x_shape
    taps = int(np.prod(kernel))
    out_size = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                     for n, k, s, p, d in zip(size, kernel, stride, padding, dilation))
    one_hot = np.tile(np.eye(taps).reshape((taps, 1) + tuple(kernel)), (channels, 1, 1, 1))
    columns = b.reshape(g, (batch, channels * taps) + out_size)
    extra = _leftover(tuple(size), kernel, out_size, stride, padding, dilation)
    grad = b.conv_transpose(columns, constant(b, one_hot, dtype, g), None, stride, padding,
                            extra, dilation, channels)
    return (grad,)


def _leftover(size: Dims, kernel: Dims, out_size: Dims, stride: Dims, padding: Dims,
              dilation: Dims) -> Dims:
    """The input positions past the last window that a strided convolution never reads: the
    ``output_padding`` that makes its transposed convolution give back the input's size."""
    return tuple(n + 2 * p - d * (k - 1) - 1 - (o - 1) * s
                 for n, k, o, s, p, d in zip(size, kernel, out_size, stride, padding, dilation))
