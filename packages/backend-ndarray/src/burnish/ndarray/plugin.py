"""Registers the ndarray backend with burnish's plugin manager."""

from __future__ import annotations

from burnish.plugins import BackendInfo, hookimpl


def _make():
    from burnish.ndarray.backend import NdArrayBackend

    return NdArrayBackend()


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("ndarray", _make, "burnish-backend-ndarray", "NumPy on the CPU")]
