"""Pooling layers: max, average and adaptive average over 1 or 2 (adaptive: 1 to 3) dims."""

from __future__ import annotations

from burnish import Tensor
from burnish import functional as F
from burnish.nn.module import Module

IntOrTuple = int | tuple[int, ...]


class MaxPool1d(Module):
    """Max over windows of ``[batch, channels, length]``; stride defaults to the kernel."""

    kernel_size: IntOrTuple
    stride: IntOrTuple | None = None
    padding: IntOrTuple = 0
    dilation: IntOrTuple = 1

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation)


class MaxPool2d(Module):
    """Max over windows of ``[batch, channels, height, width]``; stride defaults to the
    kernel."""

    kernel_size: IntOrTuple
    stride: IntOrTuple | None = None
    padding: IntOrTuple = 0
    dilation: IntOrTuple = 1

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation)


class AvgPool1d(Module):
    """Mean over windows of ``[batch, channels, length]``; stride defaults to the kernel."""

    kernel_size: IntOrTuple
    stride: IntOrTuple | None = None
    padding: IntOrTuple = 0
    count_include_pad: bool = True

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding,
                            self.count_include_pad)


class AvgPool2d(Module):
    """Mean over windows of ``[batch, channels, height, width]``; stride defaults to the
    kernel."""

    kernel_size: IntOrTuple
    stride: IntOrTuple | None = None
    padding: IntOrTuple = 0
    count_include_pad: bool = True

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding,
                            self.count_include_pad)


class AdaptiveAvgPool1d(Module):
    """Mean over windows chosen so the output length is ``output_size``."""

    output_size: IntOrTuple

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveAvgPool2d(Module):
    """Mean over windows chosen so the output is ``output_size`` (height, width)."""

    output_size: IntOrTuple

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveAvgPool3d(Module):
    """Mean over windows chosen so the output is ``output_size`` (depth, height, width)."""

    output_size: IntOrTuple

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool3d(x, self.output_size)
