"""``WgpuBackend``: the backend protocol on WebGPU, every op a WGSL kernel of ``burnish.jit``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.device import Device
from burnish.dtype import (
    EXTENDED_DTYPES,
    DType,
    bfloat16,
    bool_,
    float16,
    float32,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint64,
)
from burnish.errors import UnsupportedError
from burnish.jit.backend.backend import JitBackend
from burnish.wgpu.runtime import WgpuRuntime, adapters

if TYPE_CHECKING:
    from burnish.jit.runtime import Runtime


class WgpuBackend(JitBackend):
    """Devices are the WebGPU adapters (discrete GPUs first, then integrated, virtual, CPU).

    dtypes: float32, bfloat16 (stored as float32, rounded at every store), int32, int16, int8
    and uint8 (stored as int32, wrapped at every store) and bool everywhere; float16 where the
    adapter has ``shader-f16``, int64 where it has ``shader-int64``. The extended dtypes the
    same way: float8 and float4 stored as float32 (rounded to the format at every store),
    uint16 and the 4- and 2-bit ints as int32 (wrapped), uint32 as u32, uint64 as int64's bits
    (with ``shader-int64``). float64 is not offered: WGSL's math built-ins take 16- and 32-bit
    floats only.
    """

    name = "wgpu"

    def _discover(self) -> list[tuple[Device, Runtime]]:
        found = adapters()
        if not found:
            raise UnsupportedError(
                "wgpu backend: no WebGPU adapter found (install a Vulkan, Metal or DX12 driver; "
                "on Linux without a GPU, Mesa's lavapipe: apt install mesa-vulkan-drivers)")
        return [(Device(self, "wgpu", i, native=a), WgpuRuntime(a)) for i, a in enumerate(found)]

    def describe_device(self, device: Device) -> str:
        """The adapter and how burnish's kernels are compiled on it (``python -m burnish
        info``)."""
        runtime = self.runtime(device)
        return f"{runtime.describe()}; kernels {runtime.kernel_checks()}"  # type: ignore[attr-defined]  # WgpuRuntime's

    # JitBase passes each backend its own runtime: the narrower type is safe.
    def _device_dtypes(self, runtime: WgpuRuntime) -> tuple[DType, ...]:  # type: ignore[override]
        dtypes = [float32, bfloat16, int32, int16, int8, uint8, bool_]
        if "shader-f16" in runtime.features:
            dtypes.insert(1, float16)
        if "shader-int64" in runtime.features:
            dtypes.insert(-5, int64)
        # The extended dtypes are stored as bfloat16 and the narrow ints are (a wider type,
        # narrowed at every store); uint64 is int64's bits.
        extended = [d for d in EXTENDED_DTYPES
                    if d is not uint64 or "shader-int64" in runtime.features]
        return (*dtypes, *extended)

    def _unsupported_reason(self, dtype: DType, runtime: WgpuRuntime) -> str:  # type: ignore[override]
        if dtype.name == "float64":
            return "WGSL's math built-ins take 16- and 32-bit floats only"
        feature = {"float16": "shader-f16", "int64": "shader-int64",
                   "uint64": "shader-int64"}.get(dtype.name)
        return f"the adapter lacks the {feature!r} feature" if feature else "not supported"
