"""burnish.cpu: burnish on the CPU through kernels compiled at run time (C, on a thread pool
of its own)."""

from __future__ import annotations

from burnish.cpu.backend import CpuBackend

__all__ = ["CpuBackend"]
