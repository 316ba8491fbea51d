"""Registers the wgpu backend with burnish's plugin manager."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.plugins import BackendInfo, hookimpl

if TYPE_CHECKING:
    from burnish.wgpu.backend import WgpuBackend


def _make() -> WgpuBackend:
    from burnish.wgpu.backend import WgpuBackend

    return WgpuBackend()


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("wgpu", _make, "burnish-backend-wgpu",
                        "WebGPU: Vulkan, Metal, DX12")]
