"""burnish.cuda: burnish on NVIDIA GPUs through CuPy (cuBLAS, NVRTC-compiled kernels)."""

from __future__ import annotations

from burnish.cuda.backend import CudaBackend

__all__ = ["CudaBackend"]
