"""burnish.fusion: lazy execution and automatic kernel fusion as a backend decorator.

``Fusion(inner)`` (``burnish.backend("fusion+wgpu")``) records elementwise ops instead of
running them and turns each run of them into one generated kernel through the inner backend's
fuser (``Backend.fuser()``; the burnish.jit backends have one). ``programs(device)`` shows the
fused kernels made so far, with their generated source, and ``launches(device)`` counts kernel
launches. See docs/fusion.md.
"""

from __future__ import annotations

from typing import Any

from burnish.device import Device
from burnish.fusion.backend import Fusion

__all__ = ["Fusion", "flush", "launches", "programs"]


def _fusion_device(device: Device) -> Device:
    """``device`` or the device it wraps that belongs to a ``Fusion`` backend
    (``autodiff+fusion+wgpu`` devices wrap ``fusion+wgpu`` ones)."""
    at = device
    while not isinstance(at.backend, Fusion):
        if not isinstance(at.native, Device):
            raise ValueError(f"{device} of backend {device.backend.name} has no fusion layer; "
                             "use a fusion backend such as 'fusion+wgpu'")
        at = at.native
    return at


def programs(device: Device) -> list[Any]:
    """The fused kernels made on ``device`` so far: each has ``ops`` (the ops it evaluates, in
    order), ``outputs`` (their dtypes), ``launches`` and ``source`` (the generated code)."""
    at = _fusion_device(device)
    return at.backend.programs(at)  # type: ignore[attr-defined]  # a Fusion


def launches(device: Device) -> int | None:
    """How many kernels were launched on ``device`` so far (``None``: the inner backend has no
    fuser and launches nothing burnish can count)."""
    at = _fusion_device(device)
    return at.backend.launches(at)  # type: ignore[attr-defined]  # a Fusion


def flush(device: Device) -> None:
    """Compute every pending tensor on ``device`` that is still referenced."""
    at = _fusion_device(device)
    at.backend.flush(at)  # type: ignore[attr-defined]  # a Fusion
