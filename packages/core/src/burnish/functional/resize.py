"""Resizing images: nearest, bilinear and bicubic interpolation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from burnish.errors import ShapeError
from burnish.functional._args import float_input, per_dim
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor

MODES = ("nearest", "bilinear", "bicubic")


def interpolate(x: Tensor, size: int | Sequence[int] | None = None,
                scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                align_corners: bool = False) -> Tensor:
    """``x`` ([batch, channels, height, width]) resized to ``size`` or by ``scale_factor``.

    Modes follow PyTorch: ``"nearest"`` takes ``floor(i * in / out)``; ``"bilinear"`` and
    ``"bicubic"`` (a = -0.75, borders clamped) honour ``align_corners``.
    """
    float_input(x, 2, "interpolate")
    if mode not in MODES:
        raise ValueError(f"interpolate: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    if size is None:
        assert scale_factor is not None  # exactly one of them, checked above
        factors = (scale_factor,) * 2 if isinstance(scale_factor, int | float) else \
            tuple(scale_factor)
        if len(factors) != 2 or any(f <= 0 for f in factors):
            raise ShapeError(f"interpolate: scale_factor must be positive, got {scale_factor!r}")
        size = tuple(int(n * f) for n, f in zip(x.shape[2:], factors))
    out = per_dim(size, 2, "size", 1)
    if mode == "nearest" and align_corners:
        raise ValueError("interpolate: align_corners only applies to bilinear and bicubic")
    prim = x.backend.interpolate(x._prim, out, mode, align_corners)
    return _core.make(prim, x.device, x.dtype)
