"""Small computations on the inner backend's primitives that many backward rules share."""

from __future__ import annotations

from typing import Any

import numpy as np

from burnish.dtype import DType
from burnish.tensor_data import TensorData


def unbroadcast(b: Any, grad: Any, shape: tuple[int, ...]) -> Any:
    """``grad`` summed down to ``shape``: the reverse of NumPy's broadcasting of an input of
    that shape (leading dims and dims of size 1 are summed over)."""
    have = tuple(grad.shape)
    if have == tuple(shape):
        return grad
    lead = len(have) - len(shape)
    summed = [d < lead or (shape[d - lead] == 1 and have[d] != 1) for d in range(len(have))]
    # Neighbouring dims summed alike merge into one (a bias's gradient over [batch, seq, d] is
    # one reduction of [batch * seq, d], not two).
    merged: list[int] = []
    reduced: list[bool] = []
    for extent, flag in zip(have, summed):
        if reduced and reduced[-1] == flag:
            merged[-1] *= extent
        else:
            merged.append(extent)
            reduced.append(flag)
    if len(merged) < len(have):
        grad = b.reshape(grad, tuple(merged))
    for d, flag in enumerate(reduced):
        if flag:
            grad = b.sum(grad, d)
    return b.reshape(grad, tuple(shape))


def scalar(b: Any, value: float, dtype: DType, like: Any) -> Any:
    """A 0-d primitive holding ``value``, on ``like``'s device."""
    return b.full((), value, dtype, b._device_of(like))


def one_minus(b: Any, x: Any, dtype: DType) -> Any:
    """``1 - x``."""
    return b.add_scalar(b.neg(x, dtype), 1.0, dtype)


def zeros(b: Any, shape: tuple[int, ...], dtype: DType, like: Any) -> Any:
    """Zeros of ``shape`` on ``like``'s device."""
    return b.zeros(shape, dtype, b._device_of(like))


def constant(b: Any, values: np.ndarray, dtype: DType, like: Any) -> Any:
    """The host array ``values`` (made from shapes alone: weights, divisors) as a primitive of
    ``dtype`` on ``like``'s device."""
    return b.from_data(TensorData(np.ascontiguousarray(values).astype(dtype.numpy), dtype),
                       b._device_of(like))


def swap_last(b: Any, x: Any) -> Any:
    """``x`` with its last two dims exchanged."""
    if len(x.shape) == 2:
        return b.permute(x, (1, 0))
    axes = list(range(len(x.shape)))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return b.permute(x, tuple(axes))


def expand_to(b: Any, grad: Any, shape: tuple[int, ...]) -> Any:
    """A reduced gradient (0-d, or with the reduced dim kept at size 1) spread over ``shape``."""
    return grad if grad.shape == shape else b.expand(grad, shape)


def scatter_zeros(b: Any, grad: Any, indices: Any, shape: tuple[int, ...], dim: int,
                       dtype: DType) -> Any:
    """Zeros of ``shape`` with ``grad`` added at ``indices`` along ``dim`` (the backward of every
    op that picks elements by index: gather, max with indices, sort)."""
    return b.scatter_add(zeros(b, shape, dtype, grad), dim, indices, grad)


def along_axis(b: Any, x: Any, axis: int, matrix: Any) -> Any:
    """``x`` contracted along ``axis`` with ``matrix`` (``[x.shape[axis], n]``): that dim
    becomes ``n``. The backward of separable linear resamplings (adaptive pools, resizing)."""
    last = len(x.shape) - 1
    if axis == last:
        return b.matmul(x, matrix)
    axes = list(range(last + 1))
    axes[axis], axes[last] = last, axis
    order = tuple(axes)
    return b.permute(b.matmul(b.permute(x, order), matrix), order)
