"""``RocmBackend``: the backend protocol on OpenCL, every op an OpenCL C kernel of
``burnish.jit``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from burnish.device import Device
from burnish.dtype import ALL_DTYPES, DType, float64
from burnish.errors import UnsupportedError
from burnish.jit.backend.backend import JitBackend
from burnish.rocm.runtime import OpenCLRuntime, opencl_devices

if TYPE_CHECKING:
    from burnish.jit.runtime import Runtime


class RocmBackend(JitBackend):
    """Devices are the OpenCL devices, GPUs first (``BURNISH_ROCM_PLATFORM`` keeps only the
    platforms whose name contains it, e.g. ``AMD`` or ``Portable``).

    dtypes: all of burnish's, the extended ones included; float16 and bfloat16 are stored in
    16 bits, float8 and float4 as their one-byte codes, and all of them computed in float32;
    float64 needs the device's ``cl_khr_fp64``.
    """

    name = "rocm"

    def _discover(self) -> list[tuple[Device, Runtime]]:
        wanted = os.environ.get("BURNISH_ROCM_PLATFORM", "").lower()
        found = [(p, d) for p, d in opencl_devices() if wanted in p.name.lower()]
        if not found:
            raise UnsupportedError(
                "rocm backend: no OpenCL device found"
                + (f" on a platform matching {wanted!r}" if wanted else "")
                + " (install ROCm's OpenCL runtime, a GPU vendor's OpenCL driver, or PoCL for "
                "the CPU: pip install 'burnish-backend-rocm[pocl]')")
        return [(Device(self, "rocm", i, native=d), OpenCLRuntime(p, d))
                for i, (p, d) in enumerate(found)]

    # JitBase passes each backend its own runtime: the narrower type is safe.
    def _device_dtypes(self, runtime: OpenCLRuntime) -> tuple[DType, ...]:  # type: ignore[override]
        if runtime.has_fp64:
            return ALL_DTYPES
        return tuple(d for d in ALL_DTYPES if d is not float64)

    def _unsupported_reason(self, dtype: DType, runtime: OpenCLRuntime) -> str:  # type: ignore[override]
        if dtype is float64:
            return "the device lacks cl_khr_fp64"
        return "not supported"
