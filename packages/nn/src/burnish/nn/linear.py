"""Linear and Bilinear: affine maps of the last dim."""

from __future__ import annotations

import math

from burnish import Device, Tensor
from burnish import functional as F
from burnish.nn.config import Config
from burnish.nn.initializer import Initializer, KaimingUniform
from burnish.nn.module import Module
from burnish.nn.param import Param

#: PyTorch's and Burn's default for linear and conv weights: uniform on ±1/sqrt(fan_in).
DEFAULT_INITIALIZER = KaimingUniform(gain=1 / math.sqrt(3.0), fan_out_only=False)


class LinearConfig(Config):
    d_input: int
    d_output: int
    bias: bool = True
    initializer: Initializer = DEFAULT_INITIALIZER

    def init(self, device: Device | str | None = None) -> Linear:
        weight = self.initializer.init([self.d_input, self.d_output], device,
                                       self.d_input, self.d_output)
        bias = None
        if self.bias:
            bias = self.initializer.init([self.d_output], device, self.d_input, self.d_output)
        return Linear(weight, bias)


class Linear(Module):
    """``x @ weight + bias`` over the last dim: ``[..., d_input]`` to ``[..., d_output]``;
    ``weight`` is ``[d_input, d_output]`` as in Burn (the transpose of PyTorch's)."""

    weight: Param
    bias: Param | None = None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight.val(), None if self.bias is None else self.bias.val())


class BilinearConfig(Config):
    d_input1: int
    d_input2: int
    d_output: int
    bias: bool = True
    initializer: Initializer = DEFAULT_INITIALIZER

    def init(self, device: Device | str | None = None) -> Bilinear:
        shape = [self.d_output, self.d_input1, self.d_input2]
        weight = self.initializer.init(shape, device, self.d_input1, self.d_output)
        bias = None
        if self.bias:
            bias = self.initializer.init([self.d_output], device, self.d_input1, self.d_output)
        return Bilinear(weight, bias)


class Bilinear(Module):
    """``y_k = x1 @ weight[k] @ x2 + bias_k`` for ``x1`` ``[..., d_input1]`` and ``x2``
    ``[..., d_input2]``; ``weight`` is ``[d_output, d_input1, d_input2]``."""

    weight: Param
    bias: Param | None = None

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        # [..., 1, 1, d1] @ [d_out, d1, d2] -> [..., d_out, 1, d2], then against x2.
        left = x1.unsqueeze(-2).unsqueeze(-2).matmul(self.weight.val())
        y = left.matmul(x2.unsqueeze(-2).unsqueeze(-1)).squeeze(-1).squeeze(-1)
        return y if self.bias is None else y + self.bias.val()
