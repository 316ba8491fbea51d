"""Argument checks shared by the functional ops: per-dim options and the float input rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from burnish.dtype import Kind
from burnish.errors import DTypeError, ShapeError
from burnish.shape import show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor

IntOrTuple = int | Sequence[int]


def per_dim(value: IntOrTuple, spatial: int, name: str, minimum: int = 0) -> tuple[int, ...]:
    """An int repeated per spatial dim, or a tuple of exactly ``spatial`` ints >= ``minimum``."""
    values = (value,) * spatial if isinstance(value, int) else tuple(value)
    if len(values) != spatial or any(not isinstance(v, int) or v < minimum for v in values):
        raise ShapeError(f"{name} must be an int >= {minimum} or {spatial} of them, got {value!r}")
    return values


def float_input(x: Tensor, spatial: int, op: str) -> None:
    """``x`` is a float tensor of shape ``[batch, channels, *spatial]``."""
    if type(x) is not _core.Tensor:
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if x.dtype.kind is not Kind.FLOAT:
        raise DTypeError(f"{op} needs a float tensor, got {x.dtype}")
    if x.ndim != spatial + 2:
        raise ShapeError(f"{op} needs a tensor of shape [batch, channels, {spatial} spatial "
                         f"dim{'s' if spatial > 1 else ''}], got {show(x.shape)}")


def window_output(size: int, kernel: int, stride: int, padding: int, dilation: int,
                  ceil_mode: bool = False) -> int:
    """Output length of a sliding window (conv or pool) along one dim."""
    span = dilation * (kernel - 1) + 1
    room = size + 2 * padding - span
    if room < 0:
        return 0
    steps = -(-room // stride) if ceil_mode else room // stride
    out = steps + 1
    # PyTorch: the last window must start inside the input or the left padding.
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out
