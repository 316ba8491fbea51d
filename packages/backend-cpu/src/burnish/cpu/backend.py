"""``CpuBackend``: the backend protocol on this machine's CPU, every op a kernel of
``burnish.jit`` rendered to C and compiled by the system's compiler."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.cpu.activation_ops import CpuActivationOps
from burnish.cpu.module_ops import CpuModuleOps
from burnish.cpu.quant_ops import CpuQuantOps
from burnish.cpu.reduce_ops import CpuReduceOps
from burnish.device import Device
from burnish.dtype import ALL_DTYPES, DType
from burnish.errors import UnsupportedError
from burnish.jit.backend.backend import JitBackend

if TYPE_CHECKING:
    from burnish.jit.runtime import Runtime


class CpuBackend(CpuActivationOps, CpuModuleOps, CpuQuantOps, CpuReduceOps, JitBackend):
    """One device, the CPU, all its cores (``OMP_NUM_THREADS`` sets how many). Every burnish
    dtype, the extended ones included; float16 and bfloat16 are stored in 16 bits, float8 and
    float4 as their one-byte codes, and all of them computed in float32. Kernels are
    compiled by ``$CC`` (else ``cc``) and cached under ``$BURNISH_CACHE_DIR/cpu-kernels``;
    without a working C compiler the backend has no device and says why.
    """

    name = "cpu"

    def _discover(self) -> list[tuple[Device, Runtime]]:
        from burnish.cpu.compiler import Compiler, CompilerMissing
        from burnish.cpu.runtime import CpuRuntime

        try:
            compiler = Compiler()
        except CompilerMissing as error:
            raise UnsupportedError(str(error)) from None
        return [(Device(self, "cpu", 0), CpuRuntime(compiler))]

    def _device_dtypes(self, runtime: Runtime) -> tuple[DType, ...]:
        return ALL_DTYPES

    def describe_device(self, device: Device) -> str:
        """The processor, the compiler that builds its kernels and the int8 products' kernel
        (``python -m burnish info``)."""
        runtime = self.runtime(device)
        return (f"{runtime.describe()}; kernels by {runtime.describe_compiler()}; "  # type: ignore[attr-defined]  # CpuRuntime's
                f"int8 products: {runtime.int8_gemm.path}")  # type: ignore[attr-defined]
