"""Pools over 1, 2 or 3 spatial dims: average, max (with indices) and adaptive."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.dtype import int64
from burnish.errors import ShapeError
from burnish.functional._args import IntOrTuple, float_input, per_dim, window_output
from burnish.shape import show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor


def _window_args(x: Tensor, spatial: int, op: str, kernel_size: IntOrTuple,
                 stride: IntOrTuple | None, padding: IntOrTuple, dilation: IntOrTuple,
                 ceil_mode: bool) -> tuple[tuple[int, ...], ...]:
    float_input(x, spatial, op)
    kernel = per_dim(kernel_size, spatial, "kernel_size", 1)
    strides = kernel if stride is None else per_dim(stride, spatial, "stride", 1)
    paddings = per_dim(padding, spatial, "padding", 0)
    dilations = per_dim(dilation, spatial, "dilation", 1)
    for d in range(spatial):
        if paddings[d] * 2 > kernel[d]:
            raise ShapeError(f"{op}: padding {paddings[d]} must be at most half the kernel size "
                             f"{kernel[d]}")
        if window_output(x.shape[2 + d], kernel[d], strides[d], paddings[d], dilations[d],
                         ceil_mode) < 1:
            raise ShapeError(f"{op}: kernel {list(kernel)} is larger than the padded input "
                             f"{show(x.shape[2:])}")
    return kernel, strides, paddings, dilations


def avg_pool(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, count_include_pad: bool = True,
             ceil_mode: bool = False) -> Tensor:
    """Mean over windows (stride defaults to the kernel size), N = ``x.ndim - 2``."""
    spatial = x.ndim - 2
    kernels, strides, paddings, _ = _window_args(x, spatial, f"avg_pool{spatial}d",
                                                   kernel_size, stride, padding, 1, ceil_mode)
    prim = x.backend.avg_pool(x._prim, kernels, strides, paddings, count_include_pad, ceil_mode)
    return _core.make(prim, x.device, x.dtype)


def avg_pool1d(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, count_include_pad: bool = True,
               ceil_mode: bool = False) -> Tensor:
    """1-d average pool over ``[batch, channels, length]``."""
    float_input(x, 1, "avg_pool1d")
    return avg_pool(x, kernel_size, stride, padding, count_include_pad, ceil_mode)


def avg_pool2d(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, count_include_pad: bool = True,
               ceil_mode: bool = False) -> Tensor:
    """2-d average pool over ``[batch, channels, height, width]``."""
    float_input(x, 2, "avg_pool2d")
    return avg_pool(x, kernel_size, stride, padding, count_include_pad, ceil_mode)


def max_pool_with_indices(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                          padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                          ceil_mode: bool = False) -> tuple[Tensor, Tensor]:
    """Max over windows and the int64 index of each max, flattened over the input's spatial
    dims (PyTorch's ``return_indices=True``)."""
    spatial = x.ndim - 2
    kernels, strides, paddings, dilations = _window_args(x, spatial, f"max_pool{spatial}d",
                                                         kernel_size, stride, padding, dilation,
                                                         ceil_mode)
    values, indices = x.backend.max_pool_with_indices(x._prim, kernels, strides, paddings,
                                                      dilations, ceil_mode)
    return _core.make(values, x.device, x.dtype), _core.make(indices, x.device, int64)


def max_pool(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False
             ) -> Tensor:
    """Max over windows (padding counts as -inf), N = ``x.ndim - 2``."""
    spatial = x.ndim - 2
    kernels, strides, paddings, dilations = _window_args(x, spatial, f"max_pool{spatial}d",
                                                         kernel_size, stride, padding, dilation,
                                                         ceil_mode)
    prim = x.backend.max_pool(x._prim, kernels, strides, paddings, dilations, ceil_mode)
    return _core.make(prim, x.device, x.dtype)


def max_pool1d(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False
               ) -> Tensor:
    """1-d max pool."""
    float_input(x, 1, "max_pool1d")
    return max_pool(x, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False
               ) -> Tensor:
    """2-d max pool."""
    float_input(x, 2, "max_pool2d")
    return max_pool(x, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool1d_with_indices(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                            padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                            ceil_mode: bool = False) -> tuple[Tensor, Tensor]:
    """1-d max pool with indices."""
    float_input(x, 1, "max_pool1d")
    return max_pool_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d_with_indices(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                            padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                            ceil_mode: bool = False) -> tuple[Tensor, Tensor]:
    """2-d max pool with indices."""
    float_input(x, 2, "max_pool2d")
    return max_pool_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)


def _adaptive_size(x: Tensor, output_size: IntOrTuple, op: str) -> tuple[int, ...]:
    spatial = x.ndim - 2
    float_input(x, spatial, op)
    size = per_dim(output_size, spatial, "output_size", 1)
    if any(n == 0 for n in x.shape[2:]):
        raise ShapeError(f"{op}: input {show(x.shape)} has an empty spatial dim")
    return size


def adaptive_avg_pool(x: Tensor, output_size: IntOrTuple) -> Tensor:
    """Mean over the windows that split each spatial dim into ``output_size`` parts."""
    size = _adaptive_size(x, output_size, f"adaptive_avg_pool{x.ndim - 2}d")
    return _core.make(x.backend.adaptive_avg_pool(x._prim, size), x.device, x.dtype)


def adaptive_max_pool_with_indices(x: Tensor, output_size: IntOrTuple) -> tuple[Tensor, Tensor]:
    """Max over adaptive windows, and the flattened int64 index of each max."""
    size = _adaptive_size(x, output_size, f"adaptive_max_pool{x.ndim - 2}d")
    values, indices = x.backend.adaptive_max_pool_with_indices(x._prim, size)
    return _core.make(values, x.device, x.dtype), _core.make(indices, x.device, int64)


def adaptive_max_pool(x: Tensor, output_size: IntOrTuple) -> Tensor:
    """Max over the windows that split each spatial dim into ``output_size`` parts."""
    size = _adaptive_size(x, output_size, f"adaptive_max_pool{x.ndim - 2}d")
    return _core.make(x.backend.adaptive_max_pool(x._prim, size), x.device, x.dtype)


def adaptive_avg_pool1d(x: Tensor, output_size: IntOrTuple) -> Tensor:
    """1-d adaptive average pool."""
    float_input(x, 1, "adaptive_avg_pool1d")
    return adaptive_avg_pool(x, output_size)


def adaptive_avg_pool2d(x: Tensor, output_size: IntOrTuple) -> Tensor:
    """2-d adaptive average pool."""
    float_input(x, 2, "adaptive_avg_pool2d")
    return adaptive_avg_pool(x, output_size)


def adaptive_avg_pool3d(x: Tensor, output_size: IntOrTuple) -> Tensor:
    """3-d adaptive average pool."""
    float_input(x, 3, "adaptive_avg_pool3d")
    return adaptive_avg_pool(x, output_size)


def adaptive_max_pool1d(x: Tensor, output_size: IntOrTuple) -> Tensor:
    """1-d adaptive max pool."""
    float_input(x, 1, "adaptive_max_pool1d")
    return adaptive_max_pool(x, output_size)


def adaptive_max_pool2d(x: Tensor, output_size: IntOrTuple) -> Tensor:
    """2-d adaptive max pool."""
    float_input(x, 2, "adaptive_max_pool2d")
    return adaptive_max_pool(x, output_size)
