"""Deterministic sample values per dtype, the dtype groups tests are parametrised over, and
tensors with the same values reached through non-contiguous layouts."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from burnish import Device, DType, Tensor
from burnish.dtype import STANDARD_DTYPES, bool_

#: The dtypes the general cases run on (the extended ones have test_extended_dtypes.py).
ALL = STANDARD_DTYPES
FLOATS = tuple(d for d in ALL if d.is_float)
INTS = tuple(d for d in ALL if d.is_int)
NUMERIC = FLOATS + INTS
SIGNED = tuple(d for d in NUMERIC if d.signed)
#: The float dtypes whose results are checked closely; half precisions get looser tolerances.
WIDE_FLOATS = FLOATS[:2]

#: How a tensor's values are reached: directly, or as a view through permute, slice or flip.
LAYOUTS = ("contiguous", "permuted", "strided", "flipped")


def rng(*key: object) -> np.random.Generator:
    """A generator seeded by ``key`` (a test's parameters), so every run draws the same values."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def sample(shape: Sequence[int], dtype: DType, low: float = -4.0, high: float = 4.0,
           key: object = 0) -> np.ndarray:
    """Values of ``dtype`` (as its NumPy dtype) in ``[low, high]``, clipped to the dtype's range:
    floats are rounded to the dtype, ints are whole, bools are about half true."""
    gen = rng(tuple(shape), dtype.name, low, high, key)
    shape = tuple(shape)
    if dtype is bool_:
        return gen.random(shape) < 0.5
    if dtype.is_int:
        info = np.iinfo(dtype.numpy)
        lo, hi = max(int(np.ceil(low)), int(info.min)), min(int(np.floor(high)), int(info.max))
        return gen.integers(lo, hi, size=shape, endpoint=True).astype(dtype.numpy)
    return gen.uniform(low, high, size=shape).astype(dtype.numpy)


def whole(shape: Sequence[int], dtype: DType, low: int = 0, high: int = 4,
          key: object = 0) -> np.ndarray:
    """Whole numbers in ``[low, high]`` as ``dtype``: sums of a few of them are exact in every
    dtype, so results that accumulate in any order can be compared exactly."""
    return sample(shape, INTS[0], low, high, key).astype(dtype.numpy)


def tensor(values: object, device: Device, dtype: DType | None = None) -> Tensor:
    """``values`` (a NumPy array or nested lists) as a tensor on ``device``."""
    return Tensor.from_data(np.asarray(values) if dtype is None else values, device, dtype)


def laid_out(values: np.ndarray, device: Device, dtype: DType, layout: str) -> Tensor:
    """A tensor holding ``values`` reached through ``layout`` (see ``LAYOUTS``), so that backends
    with strided views are checked on inputs that are not contiguous."""
    values = np.asarray(values, dtype=dtype.numpy)
    ndim = values.ndim
    if layout == "contiguous" or ndim == 0:
        return Tensor.from_data(values, device, dtype)
    if layout == "permuted":
        axes = tuple(reversed(range(ndim)))
        return Tensor.from_data(np.ascontiguousarray(values.transpose(axes)), device,
                                dtype).permute(axes)
    if layout == "strided":
        big = np.zeros([2 * n + 1 for n in values.shape], dtype=values.dtype)
        big[(slice(1, None, 2),) * ndim] = values
        return Tensor.from_data(big, device, dtype)[(slice(1, None, 2),) * ndim]
    if layout == "flipped":
        axes = tuple(range(ndim))
        return Tensor.from_data(np.ascontiguousarray(np.flip(values)), device, dtype).flip(axes)
    raise ValueError(f"unknown layout {layout!r}")


def ids(values: Sequence[object]) -> list[str]:
    """Readable test ids: dtype names, shapes as ``2x3``."""
    return [_id(v) for v in values]


def _id(value: object) -> str:
    if isinstance(value, DType):
        return value.name
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return "x".join(map(str, value)) if value else "scalar"
    return str(value)
