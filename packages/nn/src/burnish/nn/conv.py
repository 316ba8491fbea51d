"""Convolutions and transposed convolutions over 1, 2 and 3 spatial dims."""

from __future__ import annotations

import math
from collections.abc import Sequence

from burnish import Device, Tensor
from burnish import functional as F
from burnish.nn.config import Config
from burnish.nn.initializer import Initializer
from burnish.nn.linear import DEFAULT_INITIALIZER
from burnish.nn.module import Module
from burnish.nn.param import Param

IntOrTuple = int | tuple[int, ...]
#: Conv's padding modes (PyTorch's names) and the burnish.functional.pad mode of each.
PADDING_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "replicate",
                 "circular": "circular"}


def _per_dim(value: IntOrTuple, spatial: int) -> tuple[int, ...]:
    return (value,) * spatial if isinstance(value, int) else tuple(value)


def _padding(padding: str | IntOrTuple, kernel: Sequence[int], dilation: Sequence[int],
             stride: Sequence[int]) -> tuple[int, ...]:
    """Explicit padding from ``"valid"``, ``"same"`` (stride 1 and odd extents only) or ints."""
    if padding == "valid":
        return (0,) * len(kernel)
    if padding == "same":
        extents = [d * (k - 1) for k, d in zip(kernel, dilation)]
        if any(s != 1 for s in stride) or any(e % 2 for e in extents):
            raise ValueError(f"padding='same' needs stride 1 and odd kernel extents, got kernel "
                             f"{list(kernel)}, dilation {list(dilation)}, stride {list(stride)}")
        return tuple(e // 2 for e in extents)
    if isinstance(padding, str):
        raise ValueError(f"padding must be 'valid', 'same' or ints, got {padding!r}")
    return _per_dim(padding, len(kernel))


class ConvConfig(Config):
    """A convolution over N spatial dims, N being the length of ``kernel_size`` (an int gives
    one per subclass: 1 for Conv1dConfig...). Weights are ``[out, in / groups, *kernel]``;
    padding is ``"valid"`` (none), ``"same"`` or explicit sizes, filled as ``padding_mode``
    says: ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"`` (PyTorch's modes)."""

    channels_in: int
    channels_out: int
    kernel_size: IntOrTuple
    stride: IntOrTuple = 1
    dilation: IntOrTuple = 1
    groups: int = 1
    padding: str | IntOrTuple = "valid"
    padding_mode: str = "zeros"
    bias: bool = True
    initializer: Initializer = DEFAULT_INITIALIZER

    spatial = 0

    def init(self, device: Device | str | None = None) -> Conv:
        if self.padding_mode not in PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {', '.join(PADDING_MODES)}, got "
                             f"{self.padding_mode!r}")
        kernel = _per_dim(self.kernel_size, self.spatial or 1)
        if self.channels_in % self.groups or self.channels_out % self.groups:
            raise ValueError(f"channels {self.channels_in} -> {self.channels_out} are not "
                             f"divisible by groups={self.groups}")
        stride = _per_dim(self.stride, len(kernel))
        dilation = _per_dim(self.dilation, len(kernel))
        fan_in = self.channels_in // self.groups * math.prod(kernel)
        fan_out = self.channels_out // self.groups * math.prod(kernel)
        shape = [self.channels_out, self.channels_in // self.groups, *kernel]
        weight = self.initializer.init(shape, device, fan_in, fan_out)
        bias = self.initializer.init([self.channels_out], device, fan_in, fan_out) \
            if self.bias else None
        module = {1: Conv1d, 2: Conv2d, 3: Conv3d}.get(len(kernel), Conv)
        return module(weight, bias, stride, _padding(self.padding, kernel, dilation, stride),
                      dilation, self.groups, self.padding_mode)


class Conv1dConfig(ConvConfig):
    spatial = 1


class Conv2dConfig(ConvConfig):
    spatial = 2


class Conv3dConfig(ConvConfig):
    spatial = 3


class Conv(Module):
    """Cross-correlation of ``[batch, channels_in, *spatial]`` into ``[batch, channels_out,
    *spatial']`` (``burnish.functional.conv``)."""

    weight: Param
    bias: Param | None
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1
    padding_mode: str = "zeros"

    def forward(self, x: Tensor) -> Tensor:
        bias = None if self.bias is None else self.bias.val()
        padding = self.padding
        if self.padding_mode != "zeros" and any(padding):
            # F.pad takes (before, after) pairs from the last dim backwards.
            pairs = [n for p in reversed(padding) for n in (p, p)]
            x = F.pad(x, pairs, mode=PADDING_MODES[self.padding_mode])
            padding = (0,) * len(padding)
        return F.conv(x, self.weight.val(), bias, self.stride, padding, self.dilation,
                      self.groups)


class Conv1d(Conv):
    """A 1-d convolution: ``[batch, channels, length]``."""


class Conv2d(Conv):
    """A 2-d convolution: ``[batch, channels, height, width]``."""


class Conv3d(Conv):
    """A 3-d convolution: ``[batch, channels, depth, height, width]``."""


class ConvTransposeConfig(Config):
    """A transposed convolution over N spatial dims; weights are ``[in, out / groups,
    *kernel]``, output size ``(in - 1) * stride - 2 * padding + dilation * (kernel - 1) +
    padding_out + 1``."""

    channels_in: int
    channels_out: int
    kernel_size: IntOrTuple
    stride: IntOrTuple = 1
    dilation: IntOrTuple = 1
    groups: int = 1
    padding: IntOrTuple = 0
    padding_out: IntOrTuple = 0
    bias: bool = True
    initializer: Initializer = DEFAULT_INITIALIZER

    spatial = 0

    def init(self, device: Device | str | None = None) -> ConvTranspose:
        kernel = _per_dim(self.kernel_size, self.spatial or 1)
        n = len(kernel)
        fan_in = self.channels_out // self.groups * math.prod(kernel)
        fan_out = self.channels_in // self.groups * math.prod(kernel)
        shape = [self.channels_in, self.channels_out // self.groups, *kernel]
        weight = self.initializer.init(shape, device, fan_in, fan_out)
        bias = self.initializer.init([self.channels_out], device, fan_in, fan_out) \
            if self.bias else None
        module = {1: ConvTranspose1d, 2: ConvTranspose2d, 3: ConvTranspose3d}.get(n, ConvTranspose)
        return module(weight, bias, _per_dim(self.stride, n), _per_dim(self.padding, n),
                      _per_dim(self.padding_out, n), _per_dim(self.dilation, n), self.groups)


class ConvTranspose1dConfig(ConvTransposeConfig):
    spatial = 1


class ConvTranspose2dConfig(ConvTransposeConfig):
    spatial = 2


class ConvTranspose3dConfig(ConvTransposeConfig):
    spatial = 3


class ConvTranspose(Module):
    """Transposed convolution (``burnish.functional.conv_transpose``)."""

    weight: Param
    bias: Param | None
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    padding_out: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1

    def forward(self, x: Tensor) -> Tensor:
        bias = None if self.bias is None else self.bias.val()
        return F.conv_transpose(x, self.weight.val(), bias, self.stride, self.padding,
                                self.padding_out, self.dilation, self.groups)


class ConvTranspose1d(ConvTranspose):
    """A 1-d transposed convolution."""


class ConvTranspose2d(ConvTranspose):
    """A 2-d transposed convolution."""


class ConvTranspose3d(ConvTranspose):
    """A 3-d transposed convolution."""
