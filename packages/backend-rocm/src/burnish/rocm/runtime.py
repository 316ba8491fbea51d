"""``OpenCLRuntime``: one OpenCL device through PyOpenCL, with an in-order queue; reading data
back is the one synchronisation."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from burnish.jit import ir
from burnish.jit.codegen.c import OpenCLGenerator
from burnish.jit.runtime import Runtime

# PyOpenCL asks interactively which platform to use when several exist and this is unset.
os.environ.setdefault("PYOPENCL_CTX", "")

import pyopencl as cl  # noqa: E402

#: Launch metadata buffers each device keeps for reuse (the oldest go first).
INFO_BUFFERS = 1024


def opencl_devices() -> list[tuple[Any, Any]]:
    """``(platform, device)`` for every OpenCL device, GPUs first, in platform order."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD registered at all: PLATFORM_NOT_FOUND_KHR
        return []
    found = []
    for platform in platforms:
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        found += [(platform, d) for d in devices]
    return sorted(found, key=lambda pd: 0 if pd[1].type & cl.device_type.GPU else 1)


class OpenCLRuntime(Runtime):
    """One device's context and in-order queue."""

    generator = OpenCLGenerator()

    def __init__(self, platform: Any, device: Any):
        super().__init__()
        self.platform = platform
        self.cl_device = device
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.has_fp64 = "cl_khr_fp64" in device.extensions or device.double_fp_config != 0
        self.max_workgroup = device.max_work_group_size
        self.local_memory = device.local_mem_size
        self.byte_words = bool(device.endian_little)
        self._infos: OrderedDict[bytes, Any] = OrderedDict()

    def describe(self) -> str:
        return f"{self.cl_device.name.strip()} ({self.platform.name.strip()})"

    def allocate(self, nbytes: int) -> Any:
        return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=max(nbytes, 16))

    def free(self, handle: Any) -> None:
        handle.release()

    def write(self, handle: Any, offset: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data)
        if data.nbytes:
            # Blocking: the host array may be gone before a non-blocking copy would run.
            cl.enqueue_copy(self.queue, handle, data, dst_offset=offset, is_blocking=True)

    def copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        if nbytes:
            cl.enqueue_copy(self.queue, dst, src, byte_count=nbytes, src_offset=src_offset,
                            dst_offset=dst_offset)

    def read(self, items: Sequence[tuple[Any, int, int]]) -> list[bytes]:
        out = []
        for handle, offset, nbytes in items:
            host = np.empty(nbytes, dtype=np.uint8)
            if nbytes:
                cl.enqueue_copy(self.queue, host, handle, src_offset=offset, is_blocking=False)
            out.append(host)
        self.queue.finish()
        return [h.tobytes() for h in out]

    def compile(self, kernel: ir.Kernel, source: str) -> Any:
        try:
            program = cl.Program(self.context, source).build(options=["-cl-std=CL1.2"])
        except cl.RuntimeError as error:
            hint = ""
            if "unknown target CPU" in str(error):
                hint = (f"{self.describe()} cannot compile for this CPU: its LLVM is older than "
                        "the CPU (PyPI's pocl-binary-distribution has LLVM 14). Use a newer "
                        "OpenCL driver, e.g. Debian's: apt install pocl-opencl-icd, and pip "
                        "uninstall pocl-binary-distribution.\n")
            raise RuntimeError(f"OpenCL could not build kernel {kernel.name}:\n{hint}{error}\n"
                               f"--- source ---\n{source}") from None
        return getattr(program, kernel.name), kernel.workgroup

    def dispatch(self, compiled: Any, handles: Sequence[Any], info: np.ndarray,
                 groups: tuple[int, int, int]) -> None:
        function, workgroup = compiled
        self.launches += 1
        # A buffer per distinct metadata, kept: a training loop repeats the same shapes, and
        # making a buffer per launch cost NVIDIA's OpenCL about 0.1 ms each.
        key = info.tobytes()
        info_buffer = self._infos.get(key)
        if info_buffer is None:
            info_buffer = cl.Buffer(self.context,
                                    cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                    hostbuf=info)
            self._infos[key] = info_buffer
            if len(self._infos) > INFO_BUFFERS:
                # OpenCL frees a released buffer only after the launches using it are done.
                self._infos.popitem(last=False)
        global_size = tuple(g * w for g, w in zip(groups, workgroup))
        function(self.queue, global_size, workgroup, *handles, info_buffer)

    def sync(self) -> None:
        self.queue.finish()
