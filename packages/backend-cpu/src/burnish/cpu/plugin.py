"""Registers the cpu backend with burnish's plugin manager."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.plugins import BackendInfo, hookimpl

if TYPE_CHECKING:
    from burnish.cpu.backend import CpuBackend


def _make() -> CpuBackend:
    from burnish.cpu.backend import CpuBackend

    return CpuBackend()


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("cpu", _make, "burnish-backend-cpu",
                        "CPU: compiled C kernels, its own threads")]
