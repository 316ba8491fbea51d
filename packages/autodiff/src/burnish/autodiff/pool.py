"""Backward rules of the pools: max pools scatter to the index of each max, average pools spread
each window's gradient evenly over the window (PyTorch's divisors), adaptive average pools are
one averaging matrix per spatial dim."""

from __future__ import annotations

from typing import Any

import numpy as np

from burnish.autodiff.inner_math import along_axis, constant, zeros

Dims = tuple[int, ...]


def max_pool_backward(b: Any, dtype, g: Any, indices: Any, x_shape: Dims) -> tuple[Any]:
    """Each output's gradient added at its max's (flattened spatial) index; overlapping windows
    that chose the same element add up: the backend's ``max_pool_backward``."""
    return (b.max_pool_backward(g, indices, x_shape, dtype),)


def avg_pool_backward(b: Any, dtype, g: Any, x_shape: Dims, kernel: Dims, stride: Dims,
                      padding: Dims, count_include_pad: bool) -> tuple[Any]:
    """Each window's gradient divided by the window's divisor and added to each of its
    elements: a transposed convolution with a kernel of ones, cropped to the input."""
    batch, channels, *size = x_shape
    out_size = tuple(g.shape[2:])
    spatial = len(size)
    divisor = np.ones(())
    for d in range(spatial):
        counts = _window_counts(size[d], out_size[d], kernel[d], stride[d], padding[d],
                                count_include_pad)
        divisor = np.multiply.outer(divisor, counts)
    scaled = b.div(g, constant(b, divisor, dtype, g))
    flat = b.reshape(scaled, (batch * channels, 1) + out_size)
    ones = constant(b, np.ones((1, 1) + tuple(kernel)), dtype, g)
    # Positions in the padded input: element i of the input is at i + padding.
    spread = b.conv_transpose(flat, ones, None, stride, (0,) * spatial, (0,) * spatial,
                              (1,) * spatial, 1)
    kept = [max(0, min(p + n, m) - p) for p, n, m in zip(padding, size, spread.shape[2:])]
    lead = ((0, batch * channels, 1), (0, 1, 1))
    inside = lead + tuple((p, p + k, 1) for p, k in zip(padding, kept))
    if kept == list(size):
        grad = b.slice(spread, inside)
    else:
        # Input elements past the last window get nothing.
        grad = zeros(b, (batch * channels, 1) + tuple(size), dtype, g)
        if min(kept) > 0:
            grad = b.slice_assign(grad, lead + tuple((0, k, 1) for k in kept),
                                  b.slice(spread, inside))
    return (b.reshape(grad, x_shape),)


def _window_counts(size: int, out: int, kernel: int, stride: int, padding: int,
                   count_include_pad: bool) -> np.ndarray:
    """PyTorch's divisor of each window along one dim: the window clipped to the padded input,
    or to the input itself without ``count_include_pad``."""
    starts = np.arange(out) * stride - padding
    ends = np.minimum(starts + kernel, size + padding)
    if not count_include_pad:
        starts, ends = np.maximum(starts, 0), np.minimum(ends, size)
    return (ends - starts).astype(np.float64)


def adaptive_avg_pool_backward(b: Any, dtype, g: Any, x_shape: Dims) -> tuple[Any]:
    """Adaptive average pooling is separable: one averaging matrix per spatial dim, so its
    gradient is the product with each matrix's transpose in turn."""
    size = x_shape[2:]
    for d, (n, out) in enumerate(zip(size, g.shape[2:])):
        g = along_axis(b, g, 2 + d, constant(b, adaptive_matrix(n, out), dtype, g))
    return (g,)


def adaptive_matrix(size: int, out: int) -> np.ndarray:
    """``[out, size]``: row ``i`` averages ``[floor(i * size / out), ceil((i + 1) * size /
    out))``."""
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix
