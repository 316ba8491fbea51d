"""Batch normalisation with the batch's statistics (what ``nn.BatchNorm`` runs while training),
and layer normalisation (``nn.LayerNorm``'s)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish import amp as _amp
from burnish.dtype import DType, Kind, float32
from burnish.errors import DTypeError, ShapeError
from burnish.functional.conv import raise_dtype
from burnish.shape import show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor


def batch_norm(x: Tensor, weight: Tensor, bias: Tensor, epsilon: float = 1e-5,
               return_stats: bool = False) -> Tensor | tuple[Tensor, Tensor, Tensor]:
    """``(x - mean) / sqrt(var + epsilon) * weight + bias`` with ``mean`` and the biased
    ``var`` of the batch, per channel (dim 1) over every other dim: ``x`` is ``[batch,
    channels, *spatial]`` (``[batch, channels]`` too), ``weight`` and ``bias`` ``[channels]``,
    all of one float dtype; or ``x`` float16 or bfloat16 with float32 ``weight`` and ``bias``
    (mixed precision: the activations stay 16-bit, the parameters float32). 16-bit inputs
    are normalised in float32 and ``y`` rounded once to ``x``'s dtype (as cuDNN and PyTorch
    do). One backend op (cuDNN's on cuda), whose gradient is one more: under autodiff it
    keeps ``x`` as it is (16 bits stay 16 bits), not a float32 copy.

    ``return_stats``: also return the statistics, ``(y, mean, invstd)`` with ``invstd = 1 /
    sqrt(var + epsilon)``, both ``[channels]`` (float32 for 16-bit ``x``) and not
    differentiated through (what a BatchNorm's running statistics take). Raises ShapeError and
    DTypeError naming both sides.
    """
    op = "batch_norm"
    narrow = x.dtype in _amp.LOW_DTYPES  # paired with float32 parameters and statistics
    _check(op, x, weight, bias, 2, "[batch, channels, *spatial]", 1, "channels",
           float32 if narrow else None)
    if not epsilon > 0:
        raise ValueError(f"{op}: epsilon must be positive, got {epsilon}")
    if narrow:  # the backend op takes float32 parameters with 16-bit activations
        weight, bias = weight.cast(float32), bias.cast(float32)
    y, mean, invstd = x.backend.batch_norm(x._prim, weight._prim, bias._prim, float(epsilon),
                                           x.dtype)
    out = _core.make(y, x.device, x.dtype)
    if not return_stats:
        return out
    return out, _core.make(mean, x.device, weight.dtype), _core.make(invstd, x.device,
                                                                     weight.dtype)


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, epsilon: float = 1e-5) -> Tensor:
    """``(x - mean) / sqrt(var + epsilon) * weight + bias`` with each row's ``mean`` and biased
    ``var`` over the last dim: ``x`` is ``[..., d]``, ``weight`` and ``bias`` ``[d]``, all of one
    float dtype. One backend op (one pass over each row in C on cpu), whose gradient is one
    more (``layer_norm_backward``). Raises ShapeError and DTypeError naming both sides."""
    op = "layer_norm"
    _check(op, x, weight, bias, 1, "[..., features]", -1, "last dim")
    prim = x.backend.layer_norm(x._prim, weight._prim, bias._prim, float(epsilon), x.dtype)
    return _core.make(prim, x.device, x.dtype)


def _check(op: str, x: Tensor, weight: Tensor, bias: Tensor, ndim: int, layout: str, axis: int,
           what: str, also: DType | None = None) -> None:
    """TypeError, DTypeError or ShapeError naming both sides unless ``x`` is a float tensor of
    at least ``ndim`` dims (``layout``) and ``weight`` and ``bias`` are tensors of its dtype (or
    of ``also``) and device, each ``[x.shape[axis]]`` (``x``'s ``what``)."""
    if type(x) is not _core.Tensor:
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if x.dtype.kind is not Kind.FLOAT:
        raise DTypeError(f"{op} needs a float tensor, got {x.dtype}")
    if x.ndim < ndim:
        raise ShapeError(f"{op} needs a tensor of shape {layout}, got {show(x.shape)}")
    size = x.shape[axis]
    for name, other in (("weight", weight), ("bias", bias)):
        if type(other) is not _core.Tensor:
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(other).__name__}")
        if tuple(other.shape) != (size,):
            raise ShapeError(f"{op}: {name} must be [{size}] (the input's {what}, "
                             f"{show(x.shape)}), got {show(other.shape)}")
        _core.same_device(x, other, op)
        if other.dtype is not x.dtype and other.dtype is not also:
            raise_dtype(op, x, other)
