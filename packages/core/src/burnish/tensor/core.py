"""What every part of Tensor shares: wrapping primitives, and the device and dtype checks."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from burnish.dtype import DType, Kind, promote
from burnish.errors import DeviceError, DTypeError, UnsupportedError

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.device import Device
    from burnish.tensor.tensor import Tensor

#: The Tensor class, bound by burnish.tensor.tensor once it is defined.
Tensor: type = None  # type: ignore[no-redef]

_new = object.__new__

#: Debug mode: the checks that must read a tensor's values (an int divisor of zero, a class
#: target out of range) also run on backends whose values live on a device, where each one
#: costs a device read and a synchronisation. ``BURNISH_DEBUG=1`` turns it on at start-up.
_debug = os.environ.get("BURNISH_DEBUG", "").strip().lower() not in ("", "0", "false", "off", "no")


def set_debug(enabled: bool) -> None:
    """Turn debug mode on or off for this process (``BURNISH_DEBUG=1`` sets it at start-up)."""
    global _debug
    _debug = bool(enabled)


def is_debug() -> bool:
    """Whether debug mode is on."""
    return _debug


def checks_values(device: Device) -> bool:
    """Whether value checks run for tensors on ``device``: always where the backend keeps
    values on the host (``Backend.values_on_host``: reading them is free), else in debug mode."""
    return _debug or device.backend.values_on_host


def make(prim: Any, device: Device, dtype: DType) -> Tensor:
    """A Tensor around a primitive, without checks (the hot path of every operation)."""
    tensor = _new(Tensor)
    tensor._prim = prim
    tensor._device = device
    tensor._dtype = dtype
    return tensor


def same_device(a: Tensor, b: Tensor, op: str) -> None:
    """Raise DeviceError naming both devices unless ``a`` and ``b`` share one."""
    if a._device is not b._device and a._device != b._device:
        raise DeviceError(
            f"{op}: tensors are on different devices: {a._device!r} vs {b._device!r}; "
            "move one with .to_device()"
        )


def check_supported(backend: Backend, dtype: DType, device: Device) -> None:
    """Raise UnsupportedError when ``device`` of ``backend`` cannot hold ``dtype``."""
    supported = backend.dtypes(device)
    if dtype not in supported:
        reason = backend.unsupported_reason(dtype, device)
        raise UnsupportedError(
            f"dtype {dtype} is not supported by backend {backend.name!r} on {device}"
            f"{f' ({reason})' if reason else ''}; it supports "
            f"{', '.join(d.name for d in supported)}"
        )


def require_kind(tensor: Tensor, kinds: tuple[Kind, ...], op: str) -> None:
    """Raise DTypeError unless ``tensor``'s kind is one of ``kinds``."""
    if tensor._dtype.kind not in kinds:
        wanted = " or ".join(k.value for k in kinds)
        raise DTypeError(f"{op} needs a {wanted} tensor, got {tensor._dtype}")


def unify(a: Tensor, b: Tensor, op: str) -> tuple[Any, Any, DType]:
    """Both operands' primitives in their promoted dtype, after the device check."""
    same_device(a, b, op)
    dtype = promote(a._dtype, b._dtype)
    pa = a._prim if a._dtype is dtype else a.cast(dtype)._prim
    pb = b._prim if b._dtype is dtype else b.cast(dtype)._prim
    return pa, pb, dtype
