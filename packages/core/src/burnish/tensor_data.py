"""TensorData: a tensor's values on the host (bytes, dtype and shape), independent of backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from burnish.dtype import DType, get_dtype
from burnish.errors import DTypeError, ShapeError
from burnish.shape import Shape, show


class TensorData:
    """Values of a tensor on the host: a NumPy array seen as bytes, a dtype and a shape.

    ``TensorData`` is what backends exchange with the outside world (``from_data``/``into_data``)
    and what records store. Conversions to and from NumPy do not copy when the layout allows it.
    """

    __slots__ = ("_array", "dtype")
    _array: np.ndarray
    dtype: DType

    def __init__(self, values: Any, dtype: DType | str | None = None):
        if isinstance(values, TensorData):
            array = values._array
        elif isinstance(values, np.ndarray):
            array = values
        else:
            array = _array_from_nested(values)
        if dtype is not None:
            dtype = get_dtype(dtype)
            if array.dtype != dtype.numpy:
                array = array.astype(dtype.numpy)
        else:
            dtype = get_dtype(array.dtype)
        self._array = array
        self.dtype = dtype

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, shape: Sequence[int],
                   dtype: DType | str) -> TensorData:
        """Data from raw little-endian bytes; raises ShapeError when the byte count does not fit."""
        dtype = get_dtype(dtype)
        shape = Shape(shape)
        expected = shape.numel * dtype.itemsize
        if len(data) != expected:
            raise ShapeError(
                f"{len(data)} bytes do not hold a {dtype} tensor of shape {show(shape)} "
                f"({expected} bytes expected)"
            )
        array = np.frombuffer(data, dtype=dtype.numpy.newbyteorder("<")).reshape(shape)
        return cls(array.astype(dtype.numpy, copy=False), dtype)

    @property
    def shape(self) -> Shape:
        return Shape(self._array.shape)

    @property
    def numel(self) -> int:
        return int(self._array.size)

    def to_numpy(self) -> np.ndarray:
        """The values as a NumPy array (no copy; treat it as read-only unless you own the data)."""
        return self._array

    def as_bytes(self) -> bytes:
        """The values as C-ordered little-endian bytes."""
        array = np.ascontiguousarray(self._array)
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        return array.tobytes()

    def tolist(self) -> Any:
        """The values as nested Python lists of Python scalars."""
        if self.dtype.name == "bfloat16":
            return self._array.astype(np.float32).tolist()
        return self._array.tolist()

    def convert(self, dtype: DType | str) -> TensorData:
        """The same values in another dtype."""
        return TensorData(self._array, dtype)

    def assert_eq(self, other: TensorData | Any, *, strict_dtype: bool = True) -> None:
        """Assert exact equality of shape, values (NaN equals NaN) and, by default, dtype."""
        other = other if isinstance(other, TensorData) else TensorData(other)
        self._check_like(other, strict_dtype)
        a, b = self._comparable(other)
        if not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            raise AssertionError(f"values differ:\n{_diff(a, b)}")

    def assert_approx_eq(
        self, other: TensorData | Any, *, rtol: float | None = None, atol: float | None = None
    ) -> None:
        """Assert equal shapes and values within tolerances (defaults chosen from the dtype)."""
        other = other if isinstance(other, TensorData) else TensorData(other)
        self._check_like(other, strict_dtype=False)
        default_rtol, default_atol = tolerance(self.dtype)
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
        a, b = self._comparable(other)
        if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            raise AssertionError(f"values differ beyond rtol={rtol}, atol={atol}:\n{_diff(a, b)}")

    def _check_like(self, other: TensorData, strict_dtype: bool) -> None:
        if self.shape != other.shape:
            raise AssertionError(f"shapes differ: {show(self.shape)} vs {show(other.shape)}")
        if strict_dtype and self.dtype is not other.dtype:
            raise AssertionError(f"dtypes differ: {self.dtype} vs {other.dtype}")

    def _comparable(self, other: TensorData) -> tuple[np.ndarray, np.ndarray]:
        if self.dtype.is_float or other.dtype.is_float:
            return self._array.astype(np.float64), other._array.astype(np.float64)
        return self._array, other._array

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorData):
            return NotImplemented
        return (
            self.dtype is other.dtype
            and self.shape == other.shape
            and bool(np.array_equal(self._array, other._array))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TensorData(shape={show(self.shape)}, dtype={self.dtype}, values={self.tolist()!r})"


def tolerance(dtype: DType) -> tuple[float, float]:
    """Default (rtol, atol) for comparing results computed in ``dtype``: for float8 and
    float4, one step of the format at 1 (its ``eps``) for both."""
    if dtype.is_float and dtype.bits <= 8:
        eps = float(ml_dtypes.finfo(dtype.numpy).eps)
        return eps, eps
    return {
        "float64": (1e-10, 1e-12),
        "float32": (1e-5, 1e-6),
        "float16": (1e-2, 1e-3),
        "bfloat16": (5e-2, 1e-2),
    }.get(dtype.name, (0.0, 0.0))


def _array_from_nested(values: Any) -> np.ndarray:
    try:
        array = np.asarray(values)
    except ValueError:  # NumPy refuses ragged nesting: say where it is
        _nested_shape(values, ())
        raise
    if array.dtype == object:
        _nested_shape(values, ())
        raise ShapeError("nested sequences must be rectangular and hold numbers or bools")
    if array.dtype.kind == "f" and array.dtype != np.float32 and not isinstance(values, np.generic):
        # Python floats become the default float dtype, as in Burn and PyTorch.
        array = array.astype(np.float32)
    elif array.dtype.kind not in "fiub":
        raise DTypeError(f"cannot make tensor data from values of NumPy kind {array.dtype}")
    return array


def _nested_shape(values: Any, path: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of nested lists and tuples, or ShapeError naming the first ragged position."""
    if isinstance(values, np.ndarray):
        return values.shape
    if not isinstance(values, list | tuple):
        return ()
    shapes = [_nested_shape(item, (*path, i)) for i, item in enumerate(values)]
    for i, shape in enumerate(shapes[1:], 1):
        if shape != shapes[0]:
            raise ShapeError(
                f"nested sequences are ragged: item {show((*path, i))} {_holding(shape)} where "
                f"item {show((*path, 0))} {_holding(shapes[0])}; every item at one depth must "
                "have the same length"
            )
    return (len(values), *(shapes[0] if shapes else ()))


def _holding(shape: tuple[int, ...]) -> str:
    return "is a number" if not shape else f"has shape {show(shape)}"


def _diff(a: np.ndarray, b: np.ndarray, limit: int = 5) -> str:
    if a.ndim == 0:
        return f"  {a.item()} != {b.item()}"
    bad = np.argwhere(~np.isclose(a, b, equal_nan=True) if a.dtype.kind == "f" else a != b)
    lines = [f"  at {list(map(int, i))}: {a[tuple(i)]} != {b[tuple(i)]}" for i in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"  ... {len(bad) - limit} more of {a.size}")
    return "\n".join(lines)
