"""burnish.rocm: burnish on AMD GPUs through ROCm's OpenCL, and on any OpenCL 1.2+ device."""

from __future__ import annotations

from burnish.rocm.backend import RocmBackend

__all__ = ["RocmBackend"]
