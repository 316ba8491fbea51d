"""What every backend decorator shares: its devices stand for the inner backend's."""

from __future__ import annotations

from typing import Any

from burnish.device import Device
from burnish.dtype import DType


class WrapsDevices:
    """Devices, dtypes, seeding and waiting of a decorator (``Autodiff``, ``Fusion``...) that
    wraps ``self._inner``: each of its devices wraps one of the inner backend's
    (``device.native``), made once, and everything about a device is the inner backend's."""

    _inner: Any
    #: The decorator's device for each of the inner backend's, made once.
    _wrapped: dict[Device, Device]

    def wrap_device(self, device: Device) -> Device:
        """The device of this backend that stands for ``device`` of the inner backend."""
        found = self._wrapped.get(device)
        if found is None:
            found = self._wrapped.setdefault(
                device, Device(self, device.type, device.index, native=device))
        return found

    def devices(self) -> list[Device]:
        return [self.wrap_device(d) for d in self._inner.devices()]

    def default_device(self) -> Device:
        return self.wrap_device(self._inner.default_device())

    def dtypes(self, device: Device) -> tuple[DType, ...]:
        return self._inner.dtypes(device.native)

    def describe_device(self, device: Device) -> str:
        return self._inner.describe_device(device.native)

    def unsupported_reason(self, dtype: DType, device: Device) -> str:
        return self._inner.unsupported_reason(dtype, device.native)

    def seed(self, seed: int) -> None:
        self._inner.seed(seed)

    def sync(self, device: Device) -> None:
        self._inner.sync(device.native)
