"""``CpuRuntime``: host memory as device memory, kernels as compiled C run at once.

Launches run when they are enqueued (the call returns when the kernel is done), so the queue
is trivially in order and reading back needs no wait. Buffers are aligned host allocations
that NumPy can see, which lets products go to NumPy's BLAS (``library_matmul``).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from burnish.cpu.compiler import Compiler
from burnish.jit import ir
from burnish.jit.codegen.cpu import CpuGenerator
from burnish.jit.runtime import Runtime
from burnish.jit.tensor import JitTensor

_ALIGN = 64
_memmove = ctypes.memmove
_VOID_P = ctypes.c_void_p
_INT = ctypes.c_int

#: The dtypes whose products NumPy hands to BLAS.
_BLAS_DTYPES = frozenset({"float32", "float64"})


class HostBuffer:
    """An aligned block of host memory: the NumPy bytes that own it and its address."""

    __slots__ = ("array", "address", "nbytes")

    def __init__(self, nbytes: int):
        raw = np.empty(nbytes + _ALIGN, np.uint8)
        start = -raw.ctypes.data % _ALIGN
        self.array = raw[start:start + nbytes]
        self.address = raw.ctypes.data + start
        self.nbytes = nbytes


class CpuRuntime(Runtime):
    """This machine's cores, through kernels the system's C compiler builds."""

    generator = CpuGenerator()
    max_buffers = 64
    #: Convolutions as a patch matrix times NumPy's BLAS: the implicit-GEMM kernels are the
    #: tiled product's loops, which BLAS outruns many times on a CPU.
    implicit_convolutions = False
    library_bias = True
    serial_scatter = True
    workgroup_reductions = False

    def __init__(self, compiler: Compiler):
        super().__init__()
        self.compiler = compiler
        self.generator = CpuGenerator(vector_math=compiler.vector_math)
        self.threads = os.cpu_count() or 1
        self.library_products = os.environ.get("BURNISH_CPU_BLAS", "1").lower() not in (
            "0", "false", "off", "no")

    def describe(self) -> str:
        import platform

        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                name = next((line.split(":", 1)[1].strip() for line in f
                             if line.startswith("model name")), name)
        except OSError:
            pass
        return name

    def describe_compiler(self) -> str:
        threads = (f"OpenMP on {self.threads} threads" if self.compiler.openmp
                   else "one thread (the compiler has no OpenMP)")
        vector = "; vector math from libmvec" if self.compiler.vector_math else ""
        return f"{self.compiler.version}; {threads}{vector}"

    def allocate(self, nbytes: int) -> HostBuffer:
        return HostBuffer(nbytes)

    def free(self, handle: HostBuffer) -> None:
        pass  # NumPy owns the memory: dropping the handle frees it

    def write(self, handle: HostBuffer, offset: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data)
        if data.nbytes:
            _memmove(handle.address + offset, data.ctypes.data, data.nbytes)

    def read(self, items: Sequence[tuple[Any, int, int]]) -> list[bytes]:
        return [handle.array[offset:offset + nbytes].tobytes()
                for handle, offset, nbytes in items]

    def copy(self, src: HostBuffer, src_offset: int, dst: HostBuffer, dst_offset: int,
             nbytes: int) -> None:
        if nbytes:
            _memmove(dst.address + dst_offset, src.address + src_offset, nbytes)

    def compile(self, kernel: ir.Kernel, source: str) -> Any:
        function = getattr(self.compiler.build(source), kernel.name)
        function.argtypes = [_VOID_P] * (len(kernel.buffers) + 1) + [_INT] * 3
        function.restype = None
        return function

    def dispatch(self, compiled: Any, handles: Sequence[HostBuffer], info: np.ndarray,
                 groups: tuple[int, int, int]) -> None:
        self.launches += 1
        compiled(*[h.address for h in handles], info.ctypes.data, *groups)

    def sync(self) -> None:
        pass  # every launch has finished when it returns

    def blas(self, dtype: Any) -> bool:
        """Whether products of ``dtype`` go to NumPy's BLAS."""
        return self.library_products and dtype.name in _BLAS_DTYPES

    def fuses_product(self, dtype: Any, macs: int) -> bool:
        # BLAS outruns the tiled kernel (compiled for the CPU) far more than a separate pass
        # for a bias or an activation costs.
        return not self.blas(dtype)

    def fused_attention(self, dtype: Any) -> bool:
        # The flash kernels' workgroup tiles, written for GPUs' on-chip memory, run here as
        # loops over arrays; materialised scores go through BLAS.
        return not self.blas(dtype)

    def library_matmul(self, a: JitTensor, b: JitTensor, out: JitTensor,
                       batch: tuple[int, ...], bias: JitTensor | None = None,
                       groups: int = 1) -> bool:
        """float32 and float64 products through NumPy's ``matmul`` (its BLAS), straight on
        the buffers, and the bias added in place."""
        if not self.blas(a.dtype):
            return False
        if bias is None:
            self.host(_product, (a, b), (out,))
        else:
            m = out.shape[-2]
            self.host(_product_bias, (a, b, bias.view((groups, m, 1), (m, 1, 0), bias.offset)),
                      (out,), groups)
        return True

    def host(self, fn: Any, inputs: Sequence[JitTensor], outputs: Sequence[JitTensor],
             *extra: Any) -> None:
        """Run ``fn(*arrays, *extra)`` on NumPy arrays over the memory of ``inputs`` and then
        ``outputs`` (no copies), through ``call``: a capture records it like a kernel launch
        and replays it on the buffers the replay uses."""
        tensors = (*inputs, *outputs)
        layouts = tuple((t.shape, t.strides, t.offset, t.dtype.name) for t in tensors)
        self.call(_on_arrays, (fn, layouts, extra, *[t.buffer.handle for t in tensors]),
                  [t.buffer.handle for t in inputs], [t.buffer.handle for t in outputs],
                  key=(fn, layouts, extra))
        self.launches += 1


class _OneBlasThread:
    """NumPy's BLAS on the calling thread alone while it runs burnish's work, its thread count
    restored after. Its own threads spin for work after each call (OpenBLAS: about 0.1 s), on
    the cores burnish's kernels then need: on 2 cores that made training steps 3x slower
    (bench/RESULTS.md). Found through threadpoolctl; without it, nothing is changed."""

    def __init__(self) -> None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - a dependency; kept optional for vendored NumPy
            self.libraries: list[Any] = []
        else:
            self.libraries = ThreadpoolController().select(user_api="blas").lib_controllers
        self.saved: list[int] = []

    def __enter__(self) -> None:
        self.saved = [library.get_num_threads() for library in self.libraries]
        for library, threads in zip(self.libraries, self.saved):
            if threads != 1:
                library.set_num_threads(1)

    def __exit__(self, *exc: Any) -> None:
        for library, threads in zip(self.libraries, self.saved):
            if threads != 1:
                library.set_num_threads(threads)


_ONE_BLAS_THREAD: _OneBlasThread | None = None


def _on_arrays(fn: Any, layouts: tuple, extra: tuple, *handles: HostBuffer) -> None:
    global _ONE_BLAS_THREAD
    if _ONE_BLAS_THREAD is None:
        _ONE_BLAS_THREAD = _OneBlasThread()
    arrays = []
    for handle, (shape, strides, offset, dtype) in zip(handles, layouts):
        kind = np.dtype(dtype)  # float32, float64 and the ints: NumPy's types are the storage
        size = kind.itemsize
        arrays.append(np.ndarray(shape, kind, buffer=handle.array, offset=offset * size,
                                 strides=tuple(s * size for s in strides)))
    with np.errstate(all="ignore"), _ONE_BLAS_THREAD:  # NaN and inf propagate, as in kernels
        fn(*arrays, *extra)


def _product(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.matmul(a, b, out=out)


def _product_bias(a: np.ndarray, b: np.ndarray, bias: np.ndarray, out: np.ndarray,
                  groups: int) -> None:
    np.matmul(a, b, out=out)
    rows = out.reshape(-1, groups, *out.shape[-2:])  # out is plain: a view
    rows += bias
