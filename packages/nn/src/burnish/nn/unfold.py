"""Unfold: the sliding blocks of an image as columns (im2col)."""

from __future__ import annotations

from burnish import Tensor
from burnish import functional as F
from burnish.nn.module import Module

IntOrTuple = int | tuple[int, ...]


class Unfold(Module):
    """``[batch, channels, height, width]`` to ``[batch, channels * kh * kw, blocks]``, one
    column per position of the kernel window (PyTorch's ``nn.Unfold``, Burn's ``Unfold4d``);
    a convolution is then a matmul of the flattened weight with the columns."""

    kernel_size: IntOrTuple
    stride: IntOrTuple = 1
    padding: IntOrTuple = 0
    dilation: IntOrTuple = 1

    def forward(self, x: Tensor) -> Tensor:
        return F.unfold(x, self.kernel_size, self.stride, self.padding, self.dilation)
