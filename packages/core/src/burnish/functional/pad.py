"""Padding a tensor's trailing dims: constant, reflect, replicate and circular (PyTorch's F.pad)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from burnish.errors import ShapeError
from burnish.shape import show
from burnish.tensor.layout import cat

if TYPE_CHECKING:
    from burnish.tensor import Tensor

MODES = ("constant", "reflect", "replicate", "circular")


def pad(x: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """``x`` padded on its trailing dims. ``pad`` is ``(before, after)`` for the last dim, then
    for the one before it, and so on (PyTorch's order: ``(left, right, top, bottom)`` pads the
    width then the height).

    Modes: ``"constant"`` fills with ``value``; ``"reflect"`` mirrors without repeating the edge
    (each pad smaller than its dim); ``"replicate"`` repeats the edge; ``"circular"`` wraps around
    (each pad at most its dim). Built from slices, flips and joins, so it runs on every backend
    and gradients flow through it.
    """
    if mode not in MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(MODES)}, got {mode!r}")
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ShapeError(f"pad: {len(pad)} sizes do not pair up over the dims of {show(x.shape)}")
    if any(p < 0 for p in pad):
        raise ShapeError(f"pad: sizes must be >= 0, got {pad}")
    for i in range(len(pad) // 2):
        dim = x.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if before or after:
            x = _pad_dim(x, dim, before, after, mode, value)
    return x


def _pad_dim(x: Tensor, dim: int, before: int, after: int, mode: str, value: float) -> Tensor:
    size = x.shape[dim]
    if mode == "constant":
        parts = [_filled(x, dim, before, value), x, _filled(x, dim, after, value)]
    elif size == 0:
        raise ShapeError(f"pad: {mode} padding needs a non-empty dim {dim} in {show(x.shape)}")
    elif mode == "reflect":
        if before >= size or after >= size:
            raise ShapeError(f"pad: reflect padding ({before}, {after}) must be smaller than dim "
                             f"{dim} of {show(x.shape)}")
        parts = [x.narrow(dim, 1, before).flip(dim), x,
                 x.narrow(dim, size - 1 - after, after).flip(dim)]
    elif mode == "replicate":
        parts = [x.narrow(dim, 0, 1).repeat_dim(dim, before), x,
                 x.narrow(dim, size - 1, 1).repeat_dim(dim, after)]
    else:
        if before > size or after > size:
            raise ShapeError(f"pad: circular padding ({before}, {after}) must be at most dim "
                             f"{dim} of {show(x.shape)}")
        parts = [x.narrow(dim, size - before, before), x, x.narrow(dim, 0, after)]
    return cat([p for p in parts if p.shape[dim]], dim)


def _filled(x: Tensor, dim: int, length: int, value: float) -> Tensor:
    shape = list(x.shape)
    shape[dim] = length
    return type(x).full(shape, value, device=x.device, dtype=x.dtype)
