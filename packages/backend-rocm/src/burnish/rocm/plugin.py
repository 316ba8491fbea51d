"""Registers the rocm backend with burnish's plugin manager."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.plugins import BackendInfo, hookimpl

if TYPE_CHECKING:
    from burnish.rocm.backend import RocmBackend


def _make() -> RocmBackend:
    from burnish.rocm.backend import RocmBackend

    return RocmBackend()


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("rocm", _make, "burnish-backend-rocm",
                        "OpenCL: ROCm, any device")]
