"""Convolutions and transposed convolutions over 1, 2 or 3 spatial dims, and unfold."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish import amp as _amp
from burnish.errors import ShapeError
from burnish.functional._args import IntOrTuple, float_input, per_dim, window_output
from burnish.shape import show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.dtype import DType
    from burnish.tensor import Tensor


def _check_weight(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int, op: str,
                  transposed: bool) -> None:
    if weight.ndim != x.ndim:
        raise ShapeError(f"{op}: weight must have {x.ndim} dims, got {show(weight.shape)}")
    if groups < 1:
        raise ShapeError(f"{op}: groups must be >= 1, got {groups}")
    in_channels = x.shape[1]
    if in_channels % groups:
        raise ShapeError(f"{op}: {in_channels} input channels are not divisible by groups={groups}")
    if transposed:
        ok = weight.shape[0] == in_channels
        out_channels = weight.shape[1] * groups
        expected = f"[{in_channels}, out_channels / groups, ...]"
    else:
        ok = weight.shape[1] * groups == in_channels and weight.shape[0] % groups == 0
        out_channels = weight.shape[0]
        expected = f"[out_channels, {in_channels // groups}, ...] with out_channels divisible by " \
                   f"groups={groups}"
    if not ok:
        raise ShapeError(f"{op}: input {show(x.shape)} and weight {show(weight.shape)} do not fit;"
                         f" the weight must be {expected}")
    if bias is not None and list(bias.shape) != [out_channels]:
        raise ShapeError(f"{op}: bias must have shape [{out_channels}], got {show(bias.shape)}")
    for other in (weight, bias):
        if other is not None:
            _core.same_device(x, other, op)
            if other.dtype is not x.dtype:
                raise_dtype(op, x, other)


def _autocast(x: Tensor, weight: Tensor, bias: Tensor | None,
              low: DType) -> tuple[Tensor, Tensor, Tensor | None]:
    """The input, weight and bias in this thread's autocast dtype, ``low``."""
    return (_amp.low(x, low), _amp.low(weight, low),
            None if bias is None else _amp.low(bias, low))


def raise_dtype(op: str, x: Tensor, other: Tensor) -> None:
    from burnish.errors import DTypeError

    raise DTypeError(f"{op}: input is {x.dtype} but a parameter is {other.dtype}; cast one")


def conv(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
         padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """N-d convolution (cross-correlation), N = ``x.ndim - 2``: ``x`` is ``[batch, in_channels,
    *spatial]``, ``weight`` ``[out_channels, in_channels / groups, *kernel]``, zero padding."""
    spatial = x.ndim - 2
    op = f"conv{spatial}d"
    float_input(x, spatial, op)
    if _amp.entered and _amp.state.dtype is not None:
        x, weight, bias = _autocast(x, weight, bias, _amp.state.dtype)
    _check_weight(x, weight, bias, groups, op, transposed=False)
    stride = per_dim(stride, spatial, "stride", 1)
    padding = per_dim(padding, spatial, "padding", 0)
    dilation = per_dim(dilation, spatial, "dilation", 1)
    for d in range(spatial):
        if window_output(x.shape[2 + d], weight.shape[2 + d], stride[d], padding[d],
                         dilation[d]) < 1:
            raise ShapeError(f"{op}: the kernel {show(weight.shape[2:])} (dilation "
                             f"{list(dilation)}) is larger than the padded input "
                             f"{show(x.shape[2:])} (padding {list(padding)})")
    prim = x.backend.conv(x._prim, weight._prim, None if bias is None else bias._prim, stride,
                          padding, dilation, groups)
    return _core.make(prim, x.device, x.dtype)


def conv1d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
           padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """1-d convolution: ``x`` ``[batch, channels, length]``."""
    float_input(x, 1, "conv1d")
    return conv(x, weight, bias, stride, padding, dilation, groups)


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
           padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """2-d convolution: ``x`` ``[batch, channels, height, width]``."""
    float_input(x, 2, "conv2d")
    return conv(x, weight, bias, stride, padding, dilation, groups)


def conv3d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrTuple = 1,
           padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """3-d convolution: ``x`` ``[batch, channels, depth, height, width]``."""
    float_input(x, 3, "conv3d")
    return conv(x, weight, bias, stride, padding, dilation, groups)


def conv_transpose(x: Tensor, weight: Tensor, bias: Tensor | None = None,
                   stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                   output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                   groups: int = 1) -> Tensor:
    """N-d transposed convolution: ``weight`` is ``[in_channels, out_channels / groups,
    *kernel]``; output size ``(in - 1) * stride - 2 * padding + dilation * (kernel - 1) +
    output_padding + 1`` per dim."""
    spatial = x.ndim - 2
    op = f"conv_transpose{spatial}d"
    float_input(x, spatial, op)
    if _amp.entered and _amp.state.dtype is not None:
        x, weight, bias = _autocast(x, weight, bias, _amp.state.dtype)
    _check_weight(x, weight, bias, groups, op, transposed=True)
    stride = per_dim(stride, spatial, "stride", 1)
    padding = per_dim(padding, spatial, "padding", 0)
    output_padding = per_dim(output_padding, spatial, "output_padding", 0)
    dilation = per_dim(dilation, spatial, "dilation", 1)
    for d in range(spatial):
        if output_padding[d] >= max(stride[d], dilation[d]):
            raise ShapeError(f"{op}: output_padding {output_padding[d]} must be smaller than "
                             f"stride ({stride[d]}) or dilation ({dilation[d]})")
        size = ((x.shape[2 + d] - 1) * stride[d] - 2 * padding[d]
                + dilation[d] * (weight.shape[2 + d] - 1) + output_padding[d] + 1)
        if size < 1:
            raise ShapeError(f"{op}: padding {list(padding)} leaves no output for input "
                             f"{show(x.shape)}")
    prim = x.backend.conv_transpose(x._prim, weight._prim, None if bias is None else bias._prim,
                                    stride, padding, output_padding, dilation, groups)
    return _core.make(prim, x.device, x.dtype)


def conv_transpose1d(x: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                     output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                     groups: int = 1) -> Tensor:
    """1-d transposed convolution."""
    float_input(x, 1, "conv_transpose1d")
    return conv_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups)


def conv_transpose2d(x: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                     output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                     groups: int = 1) -> Tensor:
    """2-d transposed convolution."""
    float_input(x, 2, "conv_transpose2d")
    return conv_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups)


def conv_transpose3d(x: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                     output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                     groups: int = 1) -> Tensor:
    """3-d transposed convolution."""
    float_input(x, 3, "conv_transpose3d")
    return conv_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups)


def unfold(x: Tensor, kernel_size: IntOrTuple, stride: IntOrTuple = 1, padding: IntOrTuple = 0,
           dilation: IntOrTuple = 1) -> Tensor:
    """Sliding blocks of ``x`` ([batch, channels, h, w]) as columns ``[batch, channels * kh * kw,
    blocks]`` (PyTorch's ``F.unfold``)."""
    float_input(x, 2, "unfold")
    kernel = per_dim(kernel_size, 2, "kernel_size", 1)
    stride = per_dim(stride, 2, "stride", 1)
    padding = per_dim(padding, 2, "padding", 0)
    dilation = per_dim(dilation, 2, "dilation", 1)
    for d in range(2):
        if window_output(x.shape[2 + d], kernel[d], stride[d], padding[d], dilation[d]) < 1:
            raise ShapeError(f"unfold: kernel {list(kernel)} does not fit input "
                             f"{show(x.shape[2:])} with padding {list(padding)}")
    prim = x.backend.unfold(x._prim, kernel, stride, padding, dilation, x.dtype)
    return _core.make(prim, x.device, x.dtype)
