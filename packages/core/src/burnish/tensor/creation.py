"""Making tensors: from data, filled, ranges, identity, random, and their ``*_like`` forms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from burnish.device import Device
from burnish.distribution import Distribution
from burnish.dtype import DEFAULT_FLOAT, DEFAULT_INT, DType, bool_, get_dtype
from burnish.errors import DeviceError, ShapeError
from burnish.shape import Shape
from burnish.tensor import core as _core
from burnish.tensor_data import TensorData

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.tensor.tensor import Tensor

DeviceLike = Device | str | None


def resolve_device(device: DeviceLike | Backend) -> Device:
    """A Device from a Device, a backend, a backend name (``"ndarray"``), or None (the default)."""
    from burnish import registry
    from burnish.backend import Backend

    if isinstance(device, Device):
        return device
    if device is None:
        return registry.default_device()
    if isinstance(device, Backend):
        return device.default_device()
    if isinstance(device, str):
        name, _, index = device.partition(":")
        backend = registry.backend(name)
        if not index:
            return backend.default_device()
        for candidate in backend.devices():
            if str(candidate.index) == index or str(candidate) == f"{candidate.type}:{index}":
                return candidate
        raise DeviceError(f"backend {name!r} has no device {index}; it has "
                          f"{', '.join(str(d) for d in backend.devices())}")
    raise DeviceError(f"expected a Device, a backend or a backend name, got {device!r}")


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    return tuple(Shape(shape))


class CreationMixin:
    """Constructors. ``device`` is a Device, a backend, a backend name or None (the default
    backend's default device); ``dtype`` a DType or its name."""

    __slots__ = ()

    @classmethod
    def from_data(cls, data: Any, device: DeviceLike = None, dtype: DType | str | None = None
                  ) -> Tensor:
        """A tensor holding ``data``: nested lists, a NumPy array, TensorData, a scalar or a
        tensor. Python floats give float32 and ints int64; NumPy arrays keep their dtype."""
        if isinstance(data, _core.Tensor):
            data = data.into_data()
        data = TensorData(data, dtype)
        device = resolve_device(device)
        _core.check_supported(device.backend, data.dtype, device)
        return _core.make(device.backend.from_data(data, device), device, data.dtype)

    @classmethod
    def from_numpy(cls, array: np.ndarray, device: DeviceLike = None) -> Tensor:
        """A tensor from a NumPy array, keeping its dtype (shared, not copied, on ndarray)."""
        return cls.from_data(np.asarray(array), device)

    @classmethod
    def _filled(cls, op: str, shape: Sequence[int] | int, device: DeviceLike,
                dtype: DType | str | None, *args: Any) -> Tensor:
        dtype = DEFAULT_FLOAT if dtype is None else get_dtype(dtype)
        device = resolve_device(device)
        _core.check_supported(device.backend, dtype, device)
        fn = getattr(device.backend, op)
        return _core.make(fn(_shape(shape), *args, dtype, device), device, dtype)

    @classmethod
    def zeros(cls, shape: Sequence[int] | int, device: DeviceLike = None,
              dtype: DType | str | None = None) -> Tensor:
        """A tensor of zeros (float32 unless ``dtype`` says otherwise)."""
        return cls._filled("zeros", shape, device, dtype)

    @classmethod
    def ones(cls, shape: Sequence[int] | int, device: DeviceLike = None,
             dtype: DType | str | None = None) -> Tensor:
        """A tensor of ones (float32 unless ``dtype`` says otherwise)."""
        return cls._filled("ones", shape, device, dtype)

    @classmethod
    def empty(cls, shape: Sequence[int] | int, device: DeviceLike = None,
              dtype: DType | str | None = None) -> Tensor:
        """A tensor whose values are unspecified (float32 unless ``dtype`` says otherwise)."""
        return cls._filled("empty", shape, device, dtype)

    @classmethod
    def full(cls, shape: Sequence[int] | int, value: bool | int | float,
             device: DeviceLike = None, dtype: DType | str | None = None) -> Tensor:
        """A tensor with every element ``value``; the dtype follows the value's Python type
        (bool, int64, float32) unless ``dtype`` is given."""
        if dtype is None:
            dtype = bool_ if isinstance(value, bool) else (
                DEFAULT_INT if isinstance(value, int) else DEFAULT_FLOAT)
        return cls._filled("full", shape, device, dtype, value)

    @classmethod
    def arange(cls, start: int | float, end: int | float | None = None, step: int | float = 1,
               device: DeviceLike = None, dtype: DType | str | None = None) -> Tensor:
        """``[start, end)`` by ``step`` as Python's ``range`` (``arange(n)`` is ``0..n``); int64
        unless a bound is a float or ``dtype`` says otherwise."""
        if end is None:
            start, end = 0, start
        if step == 0:
            raise ValueError("arange: step must not be 0")
        if dtype is None:
            is_float = any(isinstance(v, float) for v in (start, end, step))
            dtype = DEFAULT_FLOAT if is_float else DEFAULT_INT
        dtype = get_dtype(dtype)
        device = resolve_device(device)
        _core.check_supported(device.backend, dtype, device)
        prim = device.backend.arange(start, end, step, dtype, device)
        return _core.make(prim, device, dtype)

    @classmethod
    def linspace(cls, start: float, end: float, steps: int, device: DeviceLike = None,
                 dtype: DType | str | None = None) -> Tensor:
        """``steps`` evenly spaced values from ``start`` to ``end``, both included."""
        if steps < 0:
            raise ShapeError(f"linspace: steps must be >= 0, got {steps}")
        values = np.linspace(start, end, steps, dtype=np.float64)
        return cls.from_data(values, device, DEFAULT_FLOAT if dtype is None else dtype)

    @classmethod
    def eye(cls, n: int, m: int | None = None, device: DeviceLike = None,
            dtype: DType | str | None = None) -> Tensor:
        """The ``n`` by ``m`` (default ``n``) identity matrix."""
        rows = cls.arange(n, device=device).unsqueeze(1)
        cols = cls.arange(n if m is None else m, device=device).unsqueeze(0)
        return (rows == cols).cast(DEFAULT_FLOAT if dtype is None else dtype)

    @classmethod
    def random(cls, shape: Sequence[int] | int, distribution: Distribution | None = None,
               device: DeviceLike = None, dtype: DType | str | None = None) -> Tensor:
        """Values drawn from ``distribution`` (default: uniform on [0, 1)); seed with
        ``burnish.seed``."""
        distribution = Distribution.default() if distribution is None else distribution
        return cls._filled("random", shape, device, dtype, distribution)

    # -- the same, shaped like another tensor -------------------------------------------------

    def zeros_like(self, dtype: DType | str | None = None) -> Tensor:
        """Zeros with this tensor's shape, device and (unless given) dtype."""
        return type(self).zeros(self.shape, self._device, dtype or self._dtype)

    def ones_like(self, dtype: DType | str | None = None) -> Tensor:
        """Ones with this tensor's shape, device and (unless given) dtype."""
        return type(self).ones(self.shape, self._device, dtype or self._dtype)

    def full_like(self, value: bool | int | float, dtype: DType | str | None = None) -> Tensor:
        """``value`` everywhere, with this tensor's shape, device and (unless given) dtype."""
        return type(self).full(self.shape, value, self._device, dtype or self._dtype)

    def empty_like(self, dtype: DType | str | None = None) -> Tensor:
        """Unspecified values with this tensor's shape, device and (unless given) dtype."""
        return type(self).empty(self.shape, self._device, dtype or self._dtype)

    def random_like(self, distribution: Distribution | None = None,
                    dtype: DType | str | None = None) -> Tensor:
        """Random values with this tensor's shape, device and (unless given) dtype."""
        return type(self).random(self.shape, distribution, self._device, dtype or self._dtype)

