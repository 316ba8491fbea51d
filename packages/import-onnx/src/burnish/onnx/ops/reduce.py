"""ONNX's reductions: axes from an input or an attribute, keepdims, empty axes, empty sets."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import burnish as bn
from burnish import Tensor


def _axes(x: Tensor, axes: Sequence[int] | None, noop: int) -> list[int] | None:
    if not axes:
        return None if noop else list(range(x.ndim))
    return sorted(a + x.ndim if a < 0 else a for a in axes)


def _identity(op: str, x: Tensor) -> float:
    if x.kind is bn.Kind.BOOL and op in ("max", "min"):
        return op == "min"  # the empty set's Or is False, its And True
    if op in ("max",):
        return -math.inf if x.dtype.is_float else int(np.iinfo(x.dtype.numpy).min)
    if op in ("min",):
        return math.inf if x.dtype.is_float else int(np.iinfo(x.dtype.numpy).max)
    if op in ("prod",):
        return 1
    if op == "log_sum_exp" or op == "log_sum":
        return -math.inf
    return 0


def reduce(x: Tensor, op: str, axes: Sequence[int] | None = None, keepdims: int = 1,
           noop_with_empty_axes: int = 0) -> Tensor:
    """ONNX Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}: ``op`` is
    ``sum``, ``mean``, ``max``, ``min``, ``prod``, ``l1``, ``l2``, ``log_sum``,
    ``log_sum_exp`` or ``sum_square``."""
    dims = _axes(x, axes, noop_with_empty_axes)
    if dims is None:
        return x
    keep = bool(keepdims)
    shape = [1 if i in dims else n for i, n in enumerate(x.shape)]
    if not keep:
        shape = [n for i, n in enumerate(x.shape) if i not in dims]
    if any(x.shape[d] == 0 for d in dims):
        fill = _identity(op, x)
        if op == "mean":
            fill = math.nan
        return Tensor.full(shape, fill, x.device, x.dtype)
    dims_t = tuple(dims)
    if op == "sum":
        out = x.sum(dims_t, keep)
    elif op == "mean":
        out = x.mean(dims_t, keep) if x.dtype.is_float else x.sum(dims_t, keep) // math.prod(
            x.shape[d] for d in dims)
    elif op == "max":
        out = x.max(dims_t, keep)
    elif op == "min":
        out = x.min(dims_t, keep)
    elif op == "prod":
        out = x.prod(dims_t, keep)
    elif op == "l1":
        out = x.abs().sum(dims_t, keep)
    elif op == "l2":
        out = (x * x).sum(dims_t, keep)
        out = out.sqrt() if x.dtype.is_float else out.double().sqrt().round()
    elif op == "sum_square":
        out = (x * x).sum(dims_t, keep)
    elif op == "log_sum":
        out = x.sum(dims_t, keep).log()
    elif op == "log_sum_exp":
        top = x.max(dims_t, True).detach()
        top = top.mask_fill(top.is_inf(), 0.0) if x.dtype.is_float else top
        out = (x - top).exp().sum(dims_t, True).log() + top
        if not keep:
            out = out.reshape(shape)
    else:
        raise ValueError(f"unknown reduction {op!r}")
    return out.cast(x.dtype)
