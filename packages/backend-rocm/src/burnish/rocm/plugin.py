"""Registers the rocm backend with burnish's plugin manager."""

from __future__ import annotations

from burnish.plugins import BackendInfo, hookimpl


def _make():
    from burnish.rocm.backend import RocmBackend

    return RocmBackend()


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("rocm", _make, "burnish-backend-rocm",
                        "OpenCL: ROCm, any device")]
