"""burnish.wgpu: burnish on any GPU through WebGPU (wgpu-py: Vulkan, Metal, DX12)."""

from __future__ import annotations

from burnish.wgpu.backend import WgpuBackend

__all__ = ["WgpuBackend"]
