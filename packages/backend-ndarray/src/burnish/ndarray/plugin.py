"""Registers the ndarray backend with burnish's plugin manager."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.plugins import BackendInfo, hookimpl

if TYPE_CHECKING:
    from burnish.ndarray.backend import NdArrayBackend


def _make() -> NdArrayBackend:
    from burnish.ndarray.backend import NdArrayBackend

    return NdArrayBackend()


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("ndarray", _make, "burnish-backend-ndarray", "NumPy on the CPU")]
