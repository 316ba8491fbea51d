"""Activation functions as modules, so a model can hold them as fields."""

from __future__ import annotations

from burnish import Device, Tensor, where
from burnish import functional as F
from burnish.nn.config import Config
from burnish.nn.linear import Linear, LinearConfig
from burnish.nn.module import Module
from burnish.nn.param import Param

# SELU's constants (Klambauer et al., 2017), as PyTorch spells them.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    bx = x * beta
    # relu(bx) + log1p(exp(-|bx|)) equals log1p(exp(bx)) and never overflows.
    smooth = (F.relu(bx) + (-bx.abs()).exp().log1p()) * (1.0 / beta)
    return where(bx > threshold, x, smooth)

def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""
    # exp of the clamped input: the unused branch must not overflow to inf (inf * 0 is NaN).
    return where(x > 0, x, (x.clamp_max(0.0).exp() - 1.0) * alpha)

class Relu(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)

class Gelu(Module):
    """The exact GELU."""

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x)

class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)

class LogSigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.log_sigmoid(x)

class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()

class Silu(Module):
    """``x * sigmoid(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)

class LeakyRelu(Module):
    """``x`` where positive, ``negative_slope * x`` elsewhere."""

    negative_slope: float = 0.01

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x) - F.relu(-x) * self.negative_slope

class PReluConfig(Config):
    num_parameters: int = 1
    alpha: float = 0.25

    def init(self, device: Device | str | None = None) -> PRelu:
        return PRelu(Param(Tensor.full([self.num_parameters], float(self.alpha), device)))

class PRelu(Module):
    """Leaky ReLU with a learned slope, one per channel (dim 1) or one for all."""

    alpha: Param

    def forward(self, x: Tensor) -> Tensor:
        alpha = self.alpha.val()
        if alpha.numel() > 1:
            alpha = alpha.reshape([1, alpha.numel()] + [1] * (x.ndim - 2))
        return F.relu(x) - F.relu(-x) * alpha

class Elu(Module):
    alpha: float = 1.0

    def forward(self, x: Tensor) -> Tensor:
        return elu(x, self.alpha)

class Celu(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    alpha: float = 1.0

    def forward(self, x: Tensor) -> Tensor:
        return elu(x * (1.0 / self.alpha), 1.0) * self.alpha

class Selu(Module):
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""

    def forward(self, x: Tensor) -> Tensor:
        return elu(x, SELU_ALPHA) * SELU_SCALE

class Softplus(Module):
    beta: float = 1.0
    threshold: float = 20.0

    def forward(self, x: Tensor) -> Tensor:
        return softplus(x, self.beta, self.threshold)

class Mish(Module):
    """``x * tanh(softplus(x))``."""

    def forward(self, x: Tensor) -> Tensor:
        return x * softplus(x).tanh()

class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x / (x.abs() + 1.0)

class HardSigmoid(Module):
    """``clamp(alpha * x + beta, 0, 1)`` (Burn's defaults: alpha 0.2, beta 0.5)."""

    alpha: float = 0.2
    beta: float = 0.5

    def forward(self, x: Tensor) -> Tensor:
        return F.hard_sigmoid(x, self.alpha, self.beta)

class HardSwish(Module):
    """``x * relu6(x + 3) / 6``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.hard_swish(x)

class Hardtanh(Module):
    min: float = -1.0
    max: float = 1.0

    def forward(self, x: Tensor) -> Tensor:
        return x.clamp(self.min, self.max)

class Relu6(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.clamp(0.0, 6.0)

class Glu(Module):
    """``a * sigmoid(b)`` for the two halves ``a``, ``b`` of ``dim``."""

    dim: int = -1

    def forward(self, x: Tensor) -> Tensor:
        a, b = x.chunk(2, self.dim)
        return a * F.sigmoid(b)

class SwiGluConfig(Config):
    d_input: int
    d_output: int
    bias: bool = False

    def init(self, device: Device | str | None = None) -> SwiGlu:
        linear = LinearConfig(self.d_input, self.d_output, self.bias)
        return SwiGlu(linear.init(device), linear.init(device))

class SwiGlu(Module):
    """``silu(linear_inner(x)) * linear_outer(x)`` (Shazeer, 2020), as Burn's SwiGlu."""

    linear_inner: Linear
    linear_outer: Linear

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(self.linear_inner(x)) * self.linear_outer(x)

