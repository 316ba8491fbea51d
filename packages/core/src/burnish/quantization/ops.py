"""Computing with quantized tensors: matmul, linear and conv with quantized operands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.dtype import DType, float32
from burnish.errors import DeviceError, DTypeError, ShapeError
from burnish.quantization.tensor import QuantizedTensor
from burnish.shape import show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.functional._args import IntOrTuple
    from burnish.tensor.tensor import Tensor

def _result_dtype(op: str, *operands: Tensor | QuantizedTensor | None) -> DType:
    """The float dtype of the result: that of the float operands (which must agree), else
    float32; the device check between all of them."""
    dtype = None
    first = None
    for x in operands:
        if x is None:
            continue
        if first is None:
            first = x
        elif x.device != first.device:
            raise DeviceError(f"{op}: operands are on different devices: {first.device!r} "
                                    f"vs {x.device!r}; move one with .to_device()")
        if isinstance(x, QuantizedTensor):
            continue
        if not x.dtype.is_float:
            raise DTypeError(f"{op} needs float or quantized operands, got {x.dtype}")
        if dtype is None:
            dtype = x.dtype
        elif x.dtype is not dtype:
            raise DTypeError(f"{op}: float operands of different dtypes, {dtype} and {x.dtype}")
    return float32 if dtype is None else dtype


def _prim(x: Tensor | QuantizedTensor):
    return x.primitive if isinstance(x, QuantizedTensor) else x._prim


def matmul(lhs: Tensor | QuantizedTensor, rhs: Tensor | QuantizedTensor) -> Tensor:
    """``lhs @ rhs`` where either or both are quantized (``Tensor.matmul``'s shapes: at least
    2-d, batch dims broadcast); the result has the float operand's dtype (float32 when both
    are quantized). Raises ShapeError naming both shapes when the inner dims differ."""
    dtype = _result_dtype("matmul", lhs, rhs)
    a, b = tuple(lhs.shape), tuple(rhs.shape)
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        raise ShapeError(f"matmul: shapes {show(a)} and {show(b)} do not fit (both at least "
                         "2-d, lhs's last dim equal to rhs's second-to-last)")
    try:
        _broadcast(a[:-2], b[:-2])
    except ValueError:
        raise ShapeError(f"matmul: the batch dims of {show(a)} and {show(b)} do not "
                         "broadcast") from None
    prim = lhs.backend.quantized_matmul(_prim(lhs), _prim(rhs), dtype)
    return _core.make(prim, lhs.device, dtype)


def linear(x: Tensor | QuantizedTensor, weight: QuantizedTensor, bias: Tensor | None = None
           ) -> Tensor:
    """``x @ weight + bias`` with a quantized ``weight`` ``[d_input, d_output]`` (Burn's
    layout), ``x`` ``[..., d_input]`` (float or quantized), ``bias`` ``[d_output]``."""
    if not isinstance(weight, QuantizedTensor):
        raise TypeError(f"quantized linear takes a QuantizedTensor weight, got "
                        f"{type(weight).__name__} (use burnish.functional.linear)")
    dtype = _result_dtype("linear", x, weight, bias)
    shape, w = tuple(x.shape), tuple(weight.shape)
    if len(w) != 2 or not shape or shape[-1] != w[0]:
        raise ShapeError(f"linear: input {show(shape)} does not fit the weight {show(w)} "
                         "([d_input, d_output])")
    if bias is not None and tuple(bias.shape) != (w[1],):
        raise ShapeError(f"linear: bias {show(bias.shape)} where the weight {show(w)} needs "
                         f"[{w[1]}]")
    prim = weight.backend.quantized_linear(_prim(x), weight.primitive,
                                           None if bias is None else bias._prim, dtype)
    return _core.make(prim, weight.device, dtype)


def conv(x: Tensor | QuantizedTensor, weight: QuantizedTensor, bias: Tensor | None = None,
         stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
         groups: int = 1) -> Tensor:
    """``burnish.functional.conv`` with a quantized ``weight`` ``[out_channels, in_channels /
    groups, *kernel]`` and ``x`` ``[batch, in_channels, *spatial]`` float or quantized."""
    if not isinstance(weight, QuantizedTensor):
        raise TypeError(f"quantized conv takes a QuantizedTensor weight, got "
                        f"{type(weight).__name__} (use burnish.functional.conv)")
    from burnish.functional._args import per_dim, window_output

    dtype = _result_dtype("conv", x, weight, bias)
    shape, w = tuple(x.shape), tuple(weight.shape)
    spatial = len(shape) - 2
    op = f"conv{spatial}d"
    if spatial < 1 or len(w) != len(shape) or groups < 1 or shape[1] != w[1] * groups or \
            w[0] % groups:
        raise ShapeError(f"{op}: input {show(shape)} does not fit the weight {show(w)} with "
                         f"groups={groups} ([out, in / groups, *kernel])")
    if bias is not None and tuple(bias.shape) != (w[0],):
        raise ShapeError(f"{op}: bias {show(bias.shape)} where the weight needs [{w[0]}]")
    stride = per_dim(stride, spatial, "stride", 1)
    padding = per_dim(padding, spatial, "padding", 0)
    dilation = per_dim(dilation, spatial, "dilation", 1)
    for d in range(spatial):
        if window_output(shape[2 + d], w[2 + d], stride[d], padding[d], dilation[d]) < 1:
            raise ShapeError(f"{op}: the kernel {show(w[2:])} is larger than the padded input "
                             f"{show(shape[2:])} (padding {list(padding)})")
    prim = weight.backend.quantized_conv(_prim(x), weight.primitive,
                                         None if bias is None else bias._prim, stride, padding,
                                         dilation, groups, dtype)
    return _core.make(prim, weight.device, dtype)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        m = a[-i] if i <= len(a) else 1
        n = b[-i] if i <= len(b) else 1
        if m != n and 1 not in (m, n):
            raise ValueError
        out.append(max(m, n))
    return tuple(reversed(out))
