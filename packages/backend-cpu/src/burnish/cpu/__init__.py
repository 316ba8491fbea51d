"""burnish.cpu: burnish on the CPU through kernels compiled at run time (C, OpenMP)."""

from __future__ import annotations

from burnish.cpu.backend import CpuBackend

__all__ = ["CpuBackend"]
