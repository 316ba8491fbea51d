"""A stand-in second backend that only holds data: tensors on it meet tensors on the backend
under test in the device-mismatch tests, and it refuses every computation."""

from __future__ import annotations

import numpy as np

from burnish import Device, TensorData, bool_, float32, int64
from burnish.backend import Backend, required_ops
from burnish.errors import UnsupportedError


def _refuse(name: str):
    def op(self, *args, **kwargs):
        raise UnsupportedError(f"the foreign stand-in backend holds data only; it cannot {name}")

    op.__name__ = name
    return op


class ForeignBackend(type("_Refusing", (Backend,), {n: _refuse(n) for n in required_ops()})):
    """Holds float32, int64 and bool NumPy arrays on one device, ``host:0``."""

    name = "foreign"

    def __init__(self) -> None:
        self._devices = [Device(self, "host", 0)]

    def devices(self) -> list[Device]:
        return self._devices

    def dtypes(self, device: Device) -> tuple:
        return (float32, int64, bool_)

    def seed(self, seed: int) -> None:
        """Nothing is random here."""

    def from_data(self, data: TensorData, device: Device) -> np.ndarray:
        return np.array(data.to_numpy(), copy=True)

    def into_data(self, x: np.ndarray, dtype) -> TensorData:
        return TensorData(np.array(x, copy=True), dtype)

    def full(self, shape, value, dtype, device) -> np.ndarray:
        return np.full(shape, value, dtype=dtype.numpy)
