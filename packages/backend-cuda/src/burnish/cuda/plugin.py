"""Registers the cuda backend with burnish's plugin manager."""

from __future__ import annotations

from burnish.plugins import BackendInfo, hookimpl


def _make():
    from burnish.cuda.backend import CudaBackend

    return CudaBackend()


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("cuda", _make, "burnish-backend-cuda",
                        "NVIDIA GPUs through CuPy (cuBLAS, NVRTC kernels)")]
