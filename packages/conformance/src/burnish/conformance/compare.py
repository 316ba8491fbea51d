"""Comparing a tensor with its NumPy reference: exact for ints and bools, per-dtype tolerances
for floats."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from burnish import DType, Tensor, TensorData
from burnish.dtype import get_dtype
from burnish.tensor_data import tolerance


def assert_equal(actual: Tensor, expected: Any, dtype: DType | None = None) -> None:
    """``actual`` has ``expected``'s shape, exactly its values (NaN matches NaN), and ``dtype``
    (when given)."""
    got = host(actual, np.asarray(expected).shape, dtype)
    expected = np.asarray(expected)
    if actual.dtype.is_float or expected.dtype.kind == "f":
        got, expected = got.astype(np.float64), expected.astype(np.float64)
        same = np.array_equal(got, expected, equal_nan=True)
    else:
        same = np.array_equal(got, expected)
    if not same:
        raise AssertionError(f"values differ from the reference ({actual.dtype}):\n"
                             f"{_diff(got, expected)}")


def assert_close(actual: Tensor, expected: Any, dtype: DType | None = None, *,
                 rtol: float | None = None, atol: float | None = None) -> None:
    """``actual`` has ``expected``'s shape and ``dtype`` (when given), and its values are within
    ``atol + rtol * |expected|`` of the float64 reference; NaN must match NaN and infinities must
    match in sign. Tolerances default to ``burnish.tensor_data.tolerance(actual.dtype)``."""
    expected = np.asarray(expected, dtype=np.float64)
    got = host(actual, expected.shape, dtype).astype(np.float64)
    default_rtol, default_atol = tolerance(actual.dtype)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    if not np.allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True):
        raise AssertionError(f"values differ from the reference beyond rtol={rtol}, "
                             f"atol={atol} ({actual.dtype}):\n{_diff(got, expected, rtol, atol)}")


def host(actual: Tensor, shape: tuple[int, ...] | None = None, dtype: DType | None = None
         ) -> np.ndarray:
    """``actual``'s values as a NumPy array, after checking that the data the backend returns
    agrees with the tensor's shape and dtype (and with ``shape`` and ``dtype`` when given)."""
    if not isinstance(actual, Tensor):
        raise AssertionError(f"expected a Tensor, got {type(actual).__name__}")
    if dtype is not None and actual.dtype is not dtype:
        raise AssertionError(f"dtype {actual.dtype} differs from the expected {dtype}")
    if shape is not None and tuple(actual.shape) != tuple(shape):
        raise AssertionError(f"shape {list(actual.shape)} differs from the reference's "
                             f"{list(shape)}")
    with _conversions() as converted:
        data = actual.into_data()
    if data.dtype is not actual.dtype:
        raise AssertionError(f"the backend returned {data.dtype} data for a {actual.dtype} tensor")
    if converted:
        given, asked = converted[0]
        raise AssertionError(f"the backend read back values of {given} for a tensor of "
                             f"{actual.dtype} (TensorData converted them to {asked}): the op "
                             f"that made the tensor returned the wrong dtype")
    if tuple(data.shape) != tuple(actual.shape):
        raise AssertionError(f"the backend returned data of shape {list(data.shape)} for a "
                             f"tensor of shape {list(actual.shape)}")
    return np.asarray(data.to_numpy())


@contextmanager
def _conversions() -> Iterator[list[tuple[np.dtype, DType]]]:
    """Every conversion ``TensorData(values, dtype)`` makes while the block runs, as (the
    dtype of the NumPy values given, the dtype asked for).

    A backend reads a primitive back by handing its values to ``TensorData`` with the tensor's
    dtype, which converts them silently: an int sum that returns int64 for int32 inputs would
    read back as int32 and match its reference. Watching the constructor during the read sees
    the backend's own output dtype, before any conversion, whatever the primitive is.
    """
    seen: list[tuple[np.dtype, DType]] = []
    construct = TensorData.__init__

    def watched(self: TensorData, values: Any, dtype: DType | str | None = None) -> None:
        if dtype is not None:
            array = values.to_numpy() if isinstance(values, TensorData) else values
            if isinstance(array, np.ndarray) and array.dtype != get_dtype(dtype).numpy:
                seen.append((array.dtype, get_dtype(dtype)))
        construct(self, values, dtype)

    TensorData.__init__ = watched
    try:
        yield seen
    finally:
        TensorData.__init__ = construct


def _diff(got: np.ndarray, expected: np.ndarray, rtol: float = 0.0, atol: float = 0.0,
          limit: int = 6) -> str:
    if got.ndim == 0:
        return f"  got {got.item()!r}, expected {expected.item()!r}"
    if got.dtype.kind == "f":
        bad = ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = got != expected
    where = np.argwhere(bad)
    lines = [f"  at {list(map(int, i))}: got {got[tuple(i)]!r}, expected {expected[tuple(i)]!r}"
             for i in where[:limit]]
    if len(where) > limit:
        lines.append(f"  ... {len(where) - limit} more of {got.size} elements")
    return "\n".join(lines)


def accumulated_atol(dtype: DType, magnitude: Any) -> float:
    """An absolute tolerance for a result accumulated from terms whose absolute values add up
    to ``magnitude`` (sums, means, dot products): rounding in any order of accumulation stays
    within the dtype's relative tolerance of that total."""
    rtol, atol = tolerance(dtype)
    return atol + rtol * float(np.max(magnitude, initial=0.0))
