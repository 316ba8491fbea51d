"""The ndarray backend's core: its one CPU device, dtypes, random numbers, data in and out."""

from __future__ import annotations

import numpy as np

from burnish.backend.base import BackendBase, Scalar
from burnish.device import Device
from burnish.distribution import Distribution
from burnish.dtype import ALL_DTYPES, DType
from burnish.ndarray.dtypes import FLOAT32, FLOAT64, HALF_FLOATS, element, quiet
from burnish.tensor_data import TensorData


class NdArrayBase(BackendBase):
    """Primitives are plain ``np.ndarray`` (or NumPy scalars for 0-d results, which behave alike);
    views are fine because no op ever writes into an array it did not allocate itself. Holds the
    one device, ``cpu:0``, and the random generator that ``seed`` replaces."""

    def __init__(self) -> None:
        self._device = Device(self, "cpu", 0)  # type: ignore[arg-type]  # a mixin of Backend
        self._rng = np.random.default_rng()

    # -- devices and dtypes -------------------------------------------------------------------

    def devices(self) -> list[Device]:
        return [self._device]

    def default_device(self) -> Device:
        return self._device

    def _device_of(self, x: np.ndarray) -> Device:
        return self._device

    def dtypes(self, device: Device) -> tuple[DType, ...]:
        return ALL_DTYPES

    def seed(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    # -- data in and out ----------------------------------------------------------------------

    def from_data(self, data: TensorData, device: Device) -> np.ndarray:
        # Shared, not copied: TensorData already holds an array of the right dtype.
        return np.asarray(data.to_numpy(), dtype=data.dtype.numpy)

    def into_data(self, x: np.ndarray, dtype: DType) -> TensorData:
        return TensorData(np.asarray(x), dtype)

    def to_device(self, x: np.ndarray, dtype: DType, device: Device) -> np.ndarray:
        return x

    # -- creation -----------------------------------------------------------------------------

    def empty(self, shape: tuple[int, ...], dtype: DType, device: Device) -> np.ndarray:
        return np.empty(shape, dtype.numpy)

    def zeros(self, shape: tuple[int, ...], dtype: DType, device: Device) -> np.ndarray:
        return np.zeros(shape, dtype.numpy)

    def ones(self, shape: tuple[int, ...], dtype: DType, device: Device) -> np.ndarray:
        return np.ones(shape, dtype.numpy)

    def full(self, shape: tuple[int, ...], value: Scalar, dtype: DType,
             device: Device) -> np.ndarray:
        return np.full(shape, element(value, dtype.numpy), dtype.numpy)

    def arange(self, start: int | float, end: int | float, step: int | float, dtype: DType,
               device: Device) -> np.ndarray:
        if dtype.is_float:
            # Computed in float64 and rounded once, so float16 ranges do not drift.
            return np.arange(start, end, step, dtype=FLOAT64).astype(dtype.numpy, copy=False)
        return np.arange(start, end, step, dtype=np.int64).astype(dtype.numpy, copy=False)

    def random(self, shape: tuple[int, ...], distribution: Distribution, dtype: DType,
               device: Device) -> np.ndarray:
        target = dtype.numpy
        kind, a, b = distribution.kind, distribution.a, distribution.b
        rng = self._rng
        if kind == "bernoulli":
            return (rng.random(shape) < a).astype(target)
        if kind == "normal":
            draw_dtype = FLOAT32 if target == FLOAT32 or target in HALF_FLOATS else FLOAT64
            values = rng.standard_normal(shape, dtype=draw_dtype)
            values *= b
            values += a
        elif kind == "uniform":
            values = rng.random(shape)
            values *= b - a
            values += a
            if dtype.is_float and target != FLOAT64:
                # Rounding to a narrower float can reach ``b``; keep the interval half-open.
                values = values.astype(target)
                below = np.nextafter(np.array(b, target), np.array(-np.inf, target))
                return np.minimum(values, below, out=values)
        else:
            raise ValueError(f"ndarray backend: unknown distribution {kind!r}")
        if not dtype.is_float:
            values = np.floor(values, out=values)
        return values.astype(target, copy=False)

    def cast(self, x: np.ndarray, from_dtype: DType, to_dtype: DType) -> np.ndarray:
        if not np.can_cast(from_dtype.numpy, to_dtype.numpy, casting="unsafe"):
            # ml_dtypes registers no cast between some pairs of its own types (float8_e4m3fn to
            # float8_e8m0fnu, int4 to float4_e2m1fn...): go through float64 or int64, which hold
            # every value of both, so the one rounding is the final cast's.
            wide = np.float64 if from_dtype.is_float else np.int64
            x = _astype_quietly(x, np.dtype(wide))
        if from_dtype.is_float:
            # NaN has no int value and 1e6 none in float16; NumPy warns, PyTorch does not.
            return _astype_quietly(x, to_dtype.numpy)
        return np.asarray(x).astype(to_dtype.numpy)


@quiet
def _astype_quietly(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.asarray(x).astype(dtype)
