"""``JitFuser``: what ``burnish.fusion`` drives on a ``burnish.jit`` backend (see ``lazy`` and
``kernels.fused`` for how ops are recorded and fused)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.device import Device
from burnish.jit import lazy
from burnish.jit.kernels.fused import FusedProgram

if TYPE_CHECKING:
    from burnish.jit.backend.base import JitBase


class JitFuser:
    """Records elementwise ops of a jit backend lazily and fuses them into generated kernels.

    ``begin()``/``end()`` bracket the ops to record (per thread); ``flush(device)`` computes
    what is pending; ``programs(device)`` lists the fused kernels made so far and
    ``launches(device)`` counts every kernel launched on the device.
    """

    def __init__(self, backend: JitBase):
        self.backend = backend

    begin = staticmethod(lazy.begin)
    end = staticmethod(lazy.end)

    def flush(self, device: Device) -> None:
        lazy.flush(self.backend.runtime(device))

    def programs(self, device: Device) -> list[FusedProgram]:
        return list(self.backend.runtime(device).fused_programs.values())

    def launches(self, device: Device) -> int:
        return self.backend.runtime(device).launches
