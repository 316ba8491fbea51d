"""``RouterFuser``: what ``burnish.fusion`` drives on a router (``fusion+router(wgpu,ndarray)``)."""

from __future__ import annotations

from typing import Any

from burnish.device import Device


class RouterFuser:
    """What ``Fusion`` drives on a router: every member's fuser records between ``begin()``
    and ``end()``; flushing, programs and launches are the fuser of the device's member."""

    def __init__(self, fusers: dict[int, Any]):
        self._fusers = fusers
        begins: list[Any] = []
        ends: list[Any] = []
        for fuser in fusers.values():
            # Members on one lazy layer (wgpu and rocm both on burnish.jit) share begin/end.
            if not any(fuser.begin == b for b in begins):
                begins.append(fuser.begin)
                ends.append(fuser.end)
        self._begins = tuple(begins)
        self._ends = tuple(reversed(ends))
        eager: frozenset[str] | None = None
        for fuser in fusers.values():
            names = frozenset(getattr(fuser, "eager", frozenset()))
            eager = names if eager is None else eager & names
        self.eager = eager or frozenset()

    def begin(self) -> None:
        for begin in self._begins:
            begin()

    def end(self) -> None:
        for end in self._ends:
            end()

    def _of(self, device: Device) -> tuple[Any, Device]:
        native = device.native
        return self._fusers.get(id(native.backend)), native

    def flush(self, device: Device) -> None:
        fuser, native = self._of(device)
        if fuser is not None:
            fuser.flush(native)

    def programs(self, device: Device) -> list[Any]:
        fuser, native = self._of(device)
        return [] if fuser is None else list(fuser.programs(native))

    def launches(self, device: Device) -> int | None:
        fuser, native = self._of(device)
        return None if fuser is None else fuser.launches(native)
