"""Devices: where a tensor lives, always tied to the backend that owns it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from burnish.backend import Backend


class Device:
    """A place tensors live on: a backend plus the backend's own name for one of its devices.

    ``type`` is what kind of device it is (``"cpu"``, ``"cuda"``, ``"gpu"``...), ``index`` which
    one of that type. ``native`` is whatever the backend needs to reach it (an adapter, a CuPy
    device, an OpenCL queue, or for a decorator backend the inner backend's Device).
    """

    __slots__ = ("backend", "type", "index", "native", "__weakref__")

    def __init__(self, backend: Backend, type: str, index: int = 0, native: Any = None):
        self.backend = backend
        self.type = type
        self.index = index
        self.native = native

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Device):
            return NotImplemented
        return (
            self.backend is other.backend and self.type == other.type and self.index == other.index
        )

    def __hash__(self) -> int:
        return hash((id(self.backend), self.type, self.index))

    def __str__(self) -> str:
        return f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"Device({self.backend.name}, {self.type}:{self.index})"
