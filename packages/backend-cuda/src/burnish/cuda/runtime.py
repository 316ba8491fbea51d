"""``CudaRuntime``: one NVIDIA GPU through CuPy, with its own non-blocking stream; buffers come
from CuPy's memory pool and kernels are compiled by NVRTC (``cupy.RawModule``)."""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from burnish.cuda import cudnn, gemm
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
    _launch = cp.cuda.driver.launchKernel
    _current_device = cp.cuda.runtime.getDevice


class CudaHandle(int):
    """A pool buffer's handle: its device address, as an ``int`` (launches pack it as it is),
    holding CuPy's allocation (``memory``) alive."""

    def __new__(cls, memory: Any) -> CudaHandle:
        handle = super().__new__(cls, memory.ptr)
        handle.memory = memory
        return handle

    @property
    def ptr(self) -> int:
        return int(self)


class LaunchParameters:
    """The host memory a launch's parameters are read from: each buffer's device address, then
    ``info`` as the kernels' by-value ``BurnishInfo`` struct, and per buffer count the table of
    pointers to them that ``cuLaunchKernel`` takes. The driver copies the parameters before the
    call returns, so one block serves every launch of a thread (each thread that launches has
    its own: no lock). Filling it is one ``struct`` pack and one buffer copy (a few hundred
    nanoseconds); CuPy's general ``RawKernel`` call costs several microseconds."""

    def __init__(self, buffers: int = 8):
        self._zeros = memoryview(bytes(CUDA_INFO_WORDS * 4)).cast("i")
        self._allocate(buffers)

    def _allocate(self, buffers: int) -> None:
        self.capacity = buffers
        # A bytearray exported to ctypes can never be resized: its address stays valid.
        self.block = bytearray(buffers * 8 + CUDA_INFO_WORDS * 4)
        self._pinned = (ctypes.c_char * len(self.block)).from_buffer(self.block)
        self.base = ctypes.addressof(self._pinned)
        self.words = memoryview(self.block)[buffers * 8:].cast("i")
        self.used = 0  # words of info that may be non-zero
        self.info: Any = None  # the info array last written (held: its id stays its own)
        # Per buffer count: the pack of the addresses, and the pointer table (kept alive here).
        self.tables: dict[int, tuple[struct.Struct, np.ndarray, int]] = {}

    def fill(self, pointers: Sequence[int], info: np.ndarray) -> int:
        """Writes a launch's parameters (``info``: int32 words, not changed after the call);
        returns the address of its pointer table. ``info`` is copied only when it is not the
        array the block already holds (a repeated op passes its plan's array again)."""
        count = len(pointers)
        if count > self.capacity:
            self._allocate(max(count, 2 * self.capacity))
        entry = self.tables.get(count)
        if entry is None:
            base = self.base
            table = np.array([base + 8 * i for i in range(count)] + [base + 8 * self.capacity],
                             dtype=np.uint64)
            entry = self.tables[count] = (struct.Struct(f"<{count}Q"), table, table.ctypes.data)
        entry[0].pack_into(self.block, 0, *pointers)
        if info is not self.info:
            self._write_info(info)
        return entry[2]

    def _write_info(self, info: np.ndarray) -> None:
        words, used = self.words, len(info)
        if used > CUDA_INFO_WORDS:
            raise ValueError(f"cuda: a launch's metadata has {used} words, more than the "
                             f"{CUDA_INFO_WORDS} a CUDA launch carries")
        try:
            words[:used] = info
        except (TypeError, ValueError):  # not a plain int32 array: a list, another dtype
            words[:used] = memoryview(np.ascontiguousarray(info, dtype=np.int32)).cast("B") \
                .cast("i")
        if self.used > used:
            words[used:self.used] = self._zeros[:self.used - used]
        self.used = used
        self.info = info


#: How many CUDA graphs one capture keeps, each for another set of copies into its inputs.
GRAPH_VARIANTS = 4


def _pinned_writes(runtime: CudaRuntime, commands: Sequence[tuple]) -> list[tuple]:
    """``commands`` with each host write made a copy from page-locked memory (a graph's copy
    reads its source when the graph runs, and can only come from such memory)."""
    out = []
    for command in commands:
        if command[0] != "write":
            out.append(command)
            continue
        _, handle, offset, data = command
        with runtime.cuda_device:
            pinned = cp.cuda.alloc_pinned_memory(max(data.nbytes, 1))
        np.frombuffer(pinned, np.uint8, data.nbytes)[:] = data.view(np.uint8).reshape(-1)
        out.append(("call", _copy_pinned, (runtime, handle, offset, pinned, data.nbytes), None))
    return out


def _copy_pinned(runtime: CudaRuntime, handle: Any, offset: int, pinned: Any,
                 nbytes: int) -> None:
    """A host-to-device copy from page-locked memory, through the runtime API itself: CuPy's
    copy methods refuse host transfers while a stream is captured."""
    if nbytes:
        with runtime.cuda_device:
            cp.cuda.runtime.memcpyAsync(handle.ptr + offset, pinned.ptr, nbytes,
                                        cp.cuda.runtime.memcpyHostToDevice, runtime.stream_ptr)


#: The largest float32 product (multiply-adds) that fusion runs in a generated kernel with its
#: epilogue rather than in cuBLAS (a 128 x 128 x 64 product). Above it cuBLAS wins by far more
#: than the epilogue's pass costs: an LSTM's [64, 512] x [512, 2048] step product took 49 us
#: in the generated kernel (its training step 21.8 ms of GPU under fusion, against 7.8 ms with
#: cuBLAS; at 1 << 29 the MNIST MLP's step took 303 us of GPU, at this bound 270).
FUSED_PRODUCT_MACS = 1 << 20


class CudaRuntime(Runtime):
    """One GPU, one stream."""

    generator = CudaGenerator()
    max_info_words = CUDA_INFO_WORDS
    #: Pointers are kernel parameters: 64 of them and the info struct take 1 KiB of the 4 KiB
    #: a launch may pass (several optimizer updates per launch, larger fused kernels).
    max_buffers = 64

    def __init__(self, index: int):
        super().__init__()
        self.index = index
        self.cuda_device = cp.cuda.Device(index)
        with self.cuda_device:
            self.stream = cp.cuda.Stream(non_blocking=True)
        self.stream_ptr = self.stream.ptr
        self._thread = threading.local()  # per thread: its LaunchParameters
        self.properties = cp.cuda.runtime.getDeviceProperties(index)
        # Our pool sits on CuPy's, which keeps freed blocks for the whole process anyway.
        self.pool.limit = 1 << 28
        self._convolutions: Any = None  # cudnn.Convolutions, made on the first convolution
        #: Whether a CUDA graph is being captured on the stream (library calls change course).
        self.capturing = False

    def describe(self) -> str:
        name = self.properties["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def allocate(self, nbytes: int) -> Any:
        with self.cuda_device:
            return CudaHandle(cp.cuda.alloc(max(nbytes, 16)))

    def free(self, handle: Any) -> None:
        del handle  # back to CuPy's memory pool when the last reference goes

    def write(self, handle: Any, offset: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data)
        if data.nbytes:
            with self.cuda_device:
                # From pageable memory the copy is staged before this returns: data may go.
                (handle.memory + offset).copy_from_host_async(data.ctypes.data, data.nbytes,
                                                       self.stream)

    def copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        if nbytes:
            with self.cuda_device:
                (dst.memory + dst_offset).copy_from_device_async(src.memory + src_offset, nbytes,
                                                                 self.stream)

    def read(self, items: Sequence[tuple[Any, int, int]]) -> list[bytes]:
        hosts = []
        with self.cuda_device:
            for handle, offset, nbytes in items:
                host = np.empty(nbytes, dtype=np.uint8)
                if nbytes:
                    (handle.memory + offset).copy_to_host_async(host.ctypes.data, nbytes,
                                                                self.stream)
                hosts.append(host)
            self.stream.synchronize()
        return [h.tobytes() for h in hosts]

    def compile(self, kernel: ir.Kernel, source: str) -> Any:
        with self.cuda_device:
            module = cp.RawModule(code=source, options=("--std=c++17",))
            # The driver's function for this device; the module stays loaded while it is kept.
            function = module.get_function(kernel.name).kernel
        return function.ptr, kernel.workgroup, (module, function)

    def dispatch(self, compiled: Any, handles: Sequence[Any], info: np.ndarray,
                 groups: tuple[int, int, int]) -> None:
        function, workgroup, _ = compiled
        self.launches += 1
        try:
            parameters = self._thread.parameters
        except AttributeError:  # this thread's first launch on this device
            parameters = self._bind_thread()
        table = parameters.fill(handles, info)  # CudaHandles: addresses already
        if _current_device() == self.index:
            _launch(function, *groups, *workgroup, 0, self.stream_ptr, table, 0)
        else:
            with self.cuda_device:
                _launch(function, *groups, *workgroup, 0, self.stream_ptr, table, 0)

    def _bind_thread(self) -> LaunchParameters:
        """Makes this device's context current on this thread (``cuLaunchKernel`` needs it, and
        a new thread has none until some runtime call makes one) and gives the thread its own
        parameter block, so that threads launching at once need no lock."""
        with self.cuda_device:
            cp.cuda.runtime.setDevice(self.index)
        parameters = self._thread.parameters = LaunchParameters()
        return parameters

    def convolutions(self) -> Any:
        """cuDNN's convolutions on this device (``cudnn.Convolutions``), or None without it."""
        found = self._convolutions
        if found is None:
            with self._lock:
                if self._convolutions is None:
                    lib = cudnn.library()
                    try:
                        self._convolutions = cudnn.Convolutions(self, lib) if lib else False
                    except cudnn.CudnnError as error:  # loaded, but no handle on this device
                        cudnn.refuse(str(error))
                        self._convolutions = False
                found = self._convolutions
        return found or None

    def library_matmul(self, a: Any, b: Any, out: Any, batch: tuple[int, ...]) -> bool:
        return gemm.gemm(a, b, out, batch)  # cuBLAS, for every float product it can read

    def fuses_product(self, dtype: Any, macs: int) -> bool:
        # cuBLAS runs large products and every half-float one (tensor cores) much faster than
        # the generated kernel; a small float32 product with an epilogue is cheaper as one
        # generated kernel than as cuBLAS's call (tens of microseconds of host time) plus a
        # launch for the epilogue.
        return dtype.name == "float32" and macs <= FUSED_PRODUCT_MACS and not gemm.tf32_allowed()

    def view(self, handle: Any, offset: int) -> Any:
        return CudaHandle(handle.memory + offset)  # keeps the allocation alive

    def relocate(self, args: tuple, moves: Sequence[tuple[Any, Any, int]]) -> tuple:
        """Also moves the device addresses (ints or ``ctypes.c_void_p``) that cuBLAS and cuDNN
        calls take, where one points into a moved buffer."""
        spans = [(old.ptr, old.ptr + nbytes, new.ptr) for old, new, nbytes in moves]

        def move(arg: Any) -> Any:
            pointer = type(arg) is ctypes.c_void_p
            if not pointer and type(arg) is not int:
                return arg
            value = arg.value if pointer else arg
            for low, high, base in spans:
                if value and low <= value < high:
                    value = base + value - low
                    return ctypes.c_void_p(value) if pointer else value
            return arg

        return tuple(move(a) for a in super().relocate(args, moves))

    def replayer(self, commands: Sequence[tuple]):
        """A capture's commands as CUDA graphs, one launch per replay. The copies into the
        record's inputs from its own outputs (the tensors a training loop carries from step to
        step) are the same on every step: they are in the graph too, one graph per set of them
        (at most ``GRAPH_VARIANTS``); other copies (a new batch) are enqueued before it."""
        program = self.program(_pinned_writes(self, commands))
        graphs: dict[tuple, Any] = {}
        copy = CudaRuntime.copy.__get__(self)

        def enqueue(copies: Sequence[tuple]) -> None:
            for src, dst, start, end, _ in copies:
                copy(src, start, dst, start, end - start)
            for fn, args in program:
                fn(*args)

        def replay(copies: Sequence[tuple]) -> None:
            inside = tuple(c for c in copies if c[4])
            graph = graphs.get(inside)
            if graph is None and len(graphs) >= GRAPH_VARIANTS:
                inside = ()
                graph = graphs.get(inside)
            if graph is None:
                graph = graphs[inside] = self._graph(enqueue, inside)
            for src, dst, start, end, stable in copies:
                if not (stable and inside):  # not in the graph: enqueued before it
                    copy(src, start, dst, start, end - start)
            with self.cuda_device:
                graph.launch(self.stream)
            self.launches += len(program)

        return replay

    def _graph(self, enqueue, copies: tuple) -> Any:
        """The CUDA graph of ``enqueue(copies)``, captured on this runtime's stream."""
        gemm.ready_for_capture(self)
        with self.cuda_device:
            self.stream.begin_capture()
            self.capturing = True
            try:
                enqueue(copies)
            finally:
                self.capturing = False
                graph = self.stream.end_capture()
            upload = getattr(graph, "upload", None)
            if upload is not None:
                upload(self.stream)
        return graph

    def sync(self) -> None:
        self.stream.synchronize()

    def as_cupy(self, handle: Any, offset_bytes: int, shape: tuple[int, ...],
                strides_bytes: tuple[int, ...], dtype: np.dtype) -> Any:
        """A CuPy array viewing a buffer (for cuBLAS and CuPy routines)."""
        memptr = handle.memory + offset_bytes
        return cp.ndarray(shape, dtype=dtype, memptr=memptr, strides=strides_bytes)
