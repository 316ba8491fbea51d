"""Registers the cuda backend with burnish's plugin manager."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.plugins import BackendInfo, hookimpl

if TYPE_CHECKING:
    from burnish.cuda.backend import CudaBackend


def _make() -> CudaBackend:
    from burnish.cuda.backend import CudaBackend

    return CudaBackend()


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("cuda", _make, "burnish-backend-cuda",
                        "NVIDIA GPUs through CuPy (cuBLAS, NVRTC kernels)")]
