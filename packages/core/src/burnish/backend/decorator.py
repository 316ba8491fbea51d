"""What every backend decorator shares: its devices stand for the inner backend's, and the
ops it does not define go to the inner backend."""

from __future__ import annotations

import abc
import inspect
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
                # A mixin of a decorator, which is a Backend.
                device, Device(self, device.type, device.index, native=device))  # type: ignore[arg-type]
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

    def _device_of(self, x: Any) -> Device:
        return self.wrap_device(self._inner._device_of(x))


#: The protocol methods about devices that ``WrapsDevices`` defines (and a decorator that
#: forwards ops does not forward).
DEVICE_METHODS = frozenset({"devices", "default_device", "_device_of", "dtypes",
                            "describe_device", "unsupported_reason", "seed", "sync"})


def forward_ops(cls: type, own: frozenset[str] = frozenset()) -> dict[str, int | None]:
    """Give decorator class ``cls`` every protocol method it does not define itself (nor the
    device methods, nor ``own``) as a method that calls what each instance holds under that
    name in its ``__dict__`` (the instance binds its ops once: ``on_inner_device`` and the
    decorator's own wrapping); documented as the protocol's method, and known to ``abc``.
    Returns each such name with where the method takes its device (``None``: nowhere)."""
    from burnish.backend import Backend

    forwarded: dict[str, int | None] = {}
    for name in dir(Backend):
        if (name.startswith("__") or name in DEVICE_METHODS or name in own
                or name in cls.__dict__ or not inspect.isfunction(getattr(Backend, name))):
            continue
        params = list(inspect.signature(getattr(Backend, name)).parameters)[1:]
        forwarded[name] = params.index("device") if "device" in params else None
        setattr(cls, name, _forward(cls, name))
    abc.update_abstractmethods(cls)
    return forwarded


def _forward(cls: type, name: str) -> Any:
    def op(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__[name](*args, **kwargs)

    from burnish.backend import Backend

    op.__name__ = name
    op.__qualname__ = f"{cls.__name__}.{name}"
    op.__doc__ = getattr(Backend, name).__doc__
    return op


def on_inner_device(method: Any, device_at: int) -> Any:
    """``method`` called with the decorator's device among its arguments (at position
    ``device_at``, or as ``device=``) replaced by the inner backend's."""

    def run(*args: Any, **kwargs: Any) -> Any:
        if len(args) > device_at:
            args = (*args[:device_at], args[device_at].native, *args[device_at + 1:])
        elif "device" in kwargs:
            kwargs["device"] = kwargs["device"].native
        return method(*args, **kwargs)

    return run
