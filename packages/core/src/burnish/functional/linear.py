"""The affine map of the last dim (``nn.Linear``'s computation)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish import amp as _amp

if TYPE_CHECKING:
    from burnish.tensor import Tensor


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight + bias``: ``x`` ``[..., d_input]``, ``weight`` ``[d_input, d_output]`` (Burn's
    layout, the transpose of PyTorch's), ``bias`` ``[d_output]``; returns ``[..., d_output]``.

    Under ``burnish.autocast`` the three are cast to its dtype, so the result stays in it (a
    float32 bias would otherwise promote the sum back to float32). Errors are ``matmul``'s and
    the addition's (ShapeError, DTypeError, DeviceError).
    """
    if _amp.entered and (low := _amp.state.dtype) is not None:
        x, weight = _amp.low(x, low), _amp.low(weight, low)
        bias = None if bias is None else _amp.low(bias, low)
    y = x.matmul(weight)
    return y if bias is None else y + bias
