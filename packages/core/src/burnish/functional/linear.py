"""The affine map of the last dim (``nn.Linear``'s computation)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish import amp as _amp
from burnish.dtype import Kind
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight + bias``: ``x`` ``[..., d_input]``, ``weight`` ``[d_input, d_output]`` (Burn's
    layout, the transpose of PyTorch's), ``bias`` ``[d_output]``; returns ``[..., d_output]``.

    Under ``burnish.autocast`` the three are cast to its dtype, so the result stays in it (a
    float32 bias would otherwise promote the sum back to float32). Float operands of one dtype
    and device, ``x`` at least 2-d, are one backend op (cpu adds the bias within its BLAS
    call); the rest is ``matmul`` and an addition. Errors are ``matmul``'s and the addition's
    (ShapeError, DTypeError, DeviceError).
    """
    if _amp.entered and (low := _amp.state.dtype) is not None:
        x, weight = _amp.low(x, low), _amp.low(weight, low)
        bias = None if bias is None else _amp.low(bias, low)
    if (bias is not None and type(x) is _core.Tensor and type(weight) is _core.Tensor
            and type(bias) is _core.Tensor and x.ndim >= 2 and weight.ndim == 2
            and bias.ndim == 1 and x.dtype.kind is Kind.FLOAT
            and x.dtype is weight.dtype is bias.dtype
            and x.device == weight.device == bias.device
            and x.shape[-1] == weight.shape[0] and bias.shape[0] == weight.shape[1]):
        return _core.make(x.backend.linear(x._prim, weight._prim, bias._prim), x.device,
                          x.dtype)
    y = x.matmul(weight)
    return y if bias is None else y + bias
