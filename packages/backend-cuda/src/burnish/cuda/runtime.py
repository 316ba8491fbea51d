"""``CudaRuntime``: one NVIDIA GPU through CuPy, with its own non-blocking stream; buffers come
from CuPy's memory pool and kernels are compiled by NVRTC (``cupy.RawModule``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from burnish.jit import ir
from burnish.jit.codegen.c import CUDA_INFO_WORDS, CudaGenerator
from burnish.jit.runtime import Runtime

try:
    import cupy as cp
except ImportError as error:  # the plugin turns this into BackendNotInstalled-style advice
    cp = None
    CUPY_ERROR: Exception | None = error
else:
    CUPY_ERROR = None

#: ``info`` as the kernels' by-value parameter struct.
INFO_DTYPE = np.dtype([("v", np.int32, (CUDA_INFO_WORDS,))])


class CudaRuntime(Runtime):
    """One GPU, one stream."""

    generator = CudaGenerator()
    max_info_words = CUDA_INFO_WORDS

    def __init__(self, index: int):
        super().__init__()
        self.index = index
        self.cuda_device = cp.cuda.Device(index)
        with self.cuda_device:
            self.stream = cp.cuda.Stream(non_blocking=True)
        self.properties = cp.cuda.runtime.getDeviceProperties(index)
        # Our pool sits on CuPy's, which keeps freed blocks for the whole process anyway.
        self.pool.limit = 1 << 28

    def describe(self) -> str:
        name = self.properties["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def allocate(self, nbytes: int) -> Any:
        with self.cuda_device:
            return cp.cuda.alloc(max(nbytes, 16))

    def free(self, handle: Any) -> None:
        del handle  # back to CuPy's memory pool when the last reference goes

    def write(self, handle: Any, offset: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data)
        if data.nbytes:
            with self.cuda_device:
                # From pageable memory the copy is staged before this returns: data may go.
                (handle + offset).copy_from_host_async(data.ctypes.data, data.nbytes,
                                                       self.stream)

    def copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        if nbytes:
            with self.cuda_device:
                (dst + dst_offset).copy_from_device_async(src + src_offset, nbytes, self.stream)

    def read(self, items: Sequence[tuple[Any, int, int]]) -> list[bytes]:
        hosts = []
        with self.cuda_device:
            for handle, offset, nbytes in items:
                host = np.empty(nbytes, dtype=np.uint8)
                if nbytes:
                    (handle + offset).copy_to_host_async(host.ctypes.data, nbytes, self.stream)
                hosts.append(host)
            self.stream.synchronize()
        return [h.tobytes() for h in hosts]

    def compile(self, kernel: ir.Kernel, source: str) -> Any:
        with self.cuda_device:
            module = cp.RawModule(code=source, options=("--std=c++17",))
            function = module.get_function(kernel.name)
        return function, kernel.workgroup

    def dispatch(self, compiled: Any, handles: Sequence[Any], info: np.ndarray,
                 groups: tuple[int, int, int]) -> None:
        function, workgroup = compiled
        self.launches += 1
        if len(info) > CUDA_INFO_WORDS:
            raise ValueError(f"cuda: a launch's metadata has {len(info)} words, more than the "
                             f"{CUDA_INFO_WORDS} a CUDA launch carries")
        packed = np.zeros((), dtype=INFO_DTYPE)
        packed["v"][:len(info)] = info
        args = [np.uint64(h.ptr) for h in handles]
        args.append(packed)
        with self.cuda_device:
            function(groups, workgroup, tuple(args), stream=self.stream)

    def sync(self) -> None:
        self.stream.synchronize()

    def as_cupy(self, handle: Any, offset_bytes: int, shape: tuple[int, ...],
                strides_bytes: tuple[int, ...], dtype: np.dtype) -> Any:
        """A CuPy array viewing a buffer (for cuBLAS and CuPy routines)."""
        memptr = handle + offset_bytes
        return cp.ndarray(shape, dtype=dtype, memptr=memptr, strides=strides_bytes)
