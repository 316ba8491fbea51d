"""Resizing images: Interpolate, and PixelShuffle and PixelUnshuffle (depth to space and back)."""

from __future__ import annotations

from collections.abc import Sequence

from burnish import Tensor
from burnish import functional as F
from burnish.errors import ShapeError
from burnish.nn.module import Module
from burnish.shape import show


class Interpolate(Module):
    """``[batch, channels, height, width]`` resized to ``size`` or by ``scale_factor`` (give
    one) with ``burnish.functional.interpolate``: ``mode`` ``"nearest"``, ``"bilinear"`` or
    ``"bicubic"``, as PyTorch's ``nn.Upsample``."""

    size: int | Sequence[int] | None = None
    scale_factor: float | Sequence[float] | None = None
    mode: str = "nearest"
    align_corners: bool = False

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners)


def _check_image(x: Tensor, op: str) -> list[int]:
    if x.ndim != 4:
        raise ShapeError(f"{op}: input must be [batch, channels, height, width], got "
                         f"{show(x.shape)}")
    return x.dims()


class PixelShuffle(Module):
    """``[batch, channels * r^2, height, width]`` to ``[batch, channels, height * r, width * r]``
    with ``r = upscale_factor``: each group of ``r^2`` channels becomes an ``r`` by ``r`` block
    (Shi et al., 2016; PyTorch's channel order)."""

    upscale_factor: int

    def forward(self, x: Tensor) -> Tensor:
        batch, channels, height, width = _check_image(x, "pixel shuffle")
        r = self.upscale_factor
        if channels % (r * r):
            raise ShapeError(f"pixel shuffle: {channels} channels are not divisible by "
                             f"upscale_factor^2 = {r * r}")
        blocks = x.reshape([batch, channels // (r * r), r, r, height, width])
        return blocks.permute([0, 1, 4, 2, 5, 3]).reshape(
            [batch, channels // (r * r), height * r, width * r])


class PixelUnshuffle(Module):
    """The inverse of ``PixelShuffle``: ``[batch, channels, height * r, width * r]`` to
    ``[batch, channels * r^2, height, width]`` with ``r = downscale_factor``."""

    downscale_factor: int

    def forward(self, x: Tensor) -> Tensor:
        batch, channels, height, width = _check_image(x, "pixel unshuffle")
        r = self.downscale_factor
        if height % r or width % r:
            raise ShapeError(f"pixel unshuffle: height and width {show([height, width])} are "
                             f"not divisible by downscale_factor {r}")
        blocks = x.reshape([batch, channels, height // r, r, width // r, r])
        return blocks.permute([0, 1, 3, 5, 2, 4]).reshape(
            [batch, channels * r * r, height // r, width // r])
