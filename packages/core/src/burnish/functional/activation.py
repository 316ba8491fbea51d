"""Activation functions on tensors (the modules in burnish.nn wrap these)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish import amp as _amp
from burnish.dtype import DEFAULT_FLOAT
from burnish.shape import normalize_dim
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor


def _apply(x: Tensor, op: str, *args) -> Tensor:
    x = x if x.dtype.is_float else x.cast(DEFAULT_FLOAT)
    prim = getattr(x.backend, op)(x._prim, *args, x.dtype)
    return _core.make(prim, x.device, x.dtype)


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)``."""
    return _apply(x, "relu")


def gelu(x: Tensor) -> Tensor:
    """The exact GELU: ``x * (1 + erf(x / sqrt(2))) / 2``."""
    return _apply(x, "gelu")


def sigmoid(x: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))``, stable for large ``|x|``."""
    return _apply(x, "sigmoid")


def log_sigmoid(x: Tensor) -> Tensor:
    """``log(sigmoid(x))``, stable for any ``x``."""
    return _apply(x, "log_sigmoid")


def hard_sigmoid(x: Tensor, alpha: float = 0.2, beta: float = 0.5) -> Tensor:
    """``clamp(alpha * x + beta, 0, 1)`` (ONNX's and Burn's defaults; PyTorch's
    ``hardsigmoid`` is ``alpha=1/6``)."""
    return _apply(x, "hard_sigmoid", float(alpha), float(beta))


def hard_swish(x: Tensor) -> Tensor:
    """``x * clamp(x + 3, 0, 6) / 6``."""
    return _apply(x, "hard_swish")


def softmax(x: Tensor, dim: int) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim`` (in float32 under autocast)."""
    return _apply(_amp.full(x), "softmax", normalize_dim(dim, x.ndim))


def log_softmax(x: Tensor, dim: int) -> Tensor:
    """``x - log(sum(exp(x)))`` along ``dim`` (in float32 under autocast)."""
    return _apply(_amp.full(x), "log_softmax", normalize_dim(dim, x.ndim))


def silu(x: Tensor) -> Tensor:
    """``x * sigmoid(x)`` (swish)."""
    return x * sigmoid(x)


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return x.tanh()
