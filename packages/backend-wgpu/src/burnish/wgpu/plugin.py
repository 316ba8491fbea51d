"""Registers the wgpu backend with burnish's plugin manager."""

from __future__ import annotations

from burnish.plugins import BackendInfo, hookimpl


def _make():
    from burnish.wgpu.backend import WgpuBackend

    return WgpuBackend()


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("wgpu", _make, "burnish-backend-wgpu",
                        "WebGPU: Vulkan, Metal, DX12")]
