"""What a GPU backend's runtime provides (buffers, copies, kernel launches) and the memory pool.

A runtime owns one device and one in-order queue. Every operation is enqueued in order, so a
buffer whose tensor has died can be handed to the next allocation at once: whatever still reads
it was enqueued earlier and runs first. Reading data back is the only synchronisation.
"""

from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from burnish.jit import ir
from burnish.jit.codegen.base import Generator

_new = object.__new__

#: Launches are split into at most this many workgroups along x (WebGPU's and CUDA's limit on y).
MAX_GROUPS_X = 65535


def grid(groups: int) -> tuple[int, int, int]:
    """A launch of ``groups`` workgroups, split across x and y where x would exceed
    ``MAX_GROUPS_X`` (kernels number them ``x + y * groups_x``; the last row may run past the
    end)."""
    gx = min(groups, MAX_GROUPS_X)
    return (gx, -(-groups // gx), 1)


class Runtime(ABC):
    """One device of a GPU API: allocation, transfers, compilation and launches."""

    #: The generator whose language this runtime compiles.
    generator: Generator

    #: The most int32 words of ``info`` one launch carries.
    max_info_words: int = 1 << 16
    #: The most buffers one kernel binds.
    max_buffers: int = 30

    def __init__(self) -> None:
        self.pool = BufferPool(self)
        self._kernels: dict[Any, Any] = {}
        self._lock = threading.RLock()
        #: Kernels launched so far (generated and custom ones; library calls such as cuBLAS
        #: are not counted). Each runtime's ``dispatch`` counts.
        self.launches = 0
        from burnish.jit.lazy import Stream  # lazy imports this module

        #: The elementwise ops recorded and not yet computed (``lazy``).
        self.lazy_stream = Stream()
        #: The launches each flush of a given structure makes, by its key (``lazy.flush``).
        self.lazy_plans: dict[Any, Any] = {}
        #: Ops predicted to be flushed alone, run at once instead of recorded, with how many
        #: more times the prediction is trusted (``lazy.LONE_TRUST``).
        self.lazy_lone: dict[Any, int] = {}
        #: What ``lazy_lone`` keys its predictions by: the last flush's plan (its id).
        self.lazy_context: int | None = None
        #: Optimizer updates deferred while recording (``lazy.defer_update``).
        self.lazy_updates: list[Any] = []
        #: Errors kernels found on the device, raised at the next read (``DeviceErrors``),
        #: made by the first check that needs them.
        self.device_errors: DeviceErrors | None = None
        #: The random generator's seed and draw count on the device (``kernels.random``), made
        #: by the first draw.
        self.random_state: DeviceBuffer | None = None
        #: What ``burnish.capture`` records and replays this device with (``JitBase.capturer``).
        self.capturer: Any = None
        #: The fused kernels made on this device, by key (``kernels.fused.FusedProgram``).
        self.fused_programs: dict[Any, Any] = {}

    # -- what a runtime implements --------------------------------------------------------------

    @abstractmethod
    def describe(self) -> str:
        """The device's name as the API reports it (for messages and the autotune cache)."""

    @abstractmethod
    def allocate(self, nbytes: int) -> Any:
        """A new device buffer of ``nbytes`` (the pool calls this when it has none to reuse)."""

    @abstractmethod
    def free(self, handle: Any) -> None:
        """Give a device buffer back to the API."""

    @abstractmethod
    def write(self, handle: Any, offset: int, data: np.ndarray) -> None:
        """Enqueue a copy of ``data``'s bytes into ``handle`` at byte ``offset``."""

    @abstractmethod
    def read(self, items: Sequence[tuple[Any, int, int]]) -> list[bytes]:
        """The bytes of each ``(handle, offset, nbytes)``, after all enqueued work: one sync."""

    @abstractmethod
    def copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        """Enqueue a device-to-device copy."""

    @abstractmethod
    def compile(self, kernel: ir.Kernel, source: str) -> Any:
        """The API's compiled form of ``source`` (``kernel`` tells bindings and workgroup)."""

    @abstractmethod
    def dispatch(self, compiled: Any, handles: Sequence[Any], info: np.ndarray,
                 groups: tuple[int, int, int]) -> None:
        """Enqueue one launch of ``groups`` workgroups; ``info`` is the int32 metadata."""

    def library_matmul(self, a: Any, b: Any, out: Any, batch: tuple[int, ...],
                       bias: Any = None, groups: int = 1) -> bool:
        """Let a vendor library write ``out = a @ b`` (``JitTensor`` operands of one dtype, batch
        dims broadcast to ``batch``, ``out`` plain at its offset) instead of the tiled kernel;
        False, with nothing enqueued, leaves the product to ``burnish.jit``. Only runtimes
        whose ``library_bias`` is true are asked with a ``bias`` (plain, ``[groups * M]``):
        batch ``i``'s row ``m`` also gets ``bias[(i % groups) * M + m]`` added. Runtimes
        without such a library keep this default."""
        return False

    def library_conv(self, x: Any, matrix: Any, bias: Any, out: Any, groups: int,
                     kernel: tuple[int, ...], stride: tuple[int, ...],
                     padding: tuple[int, ...], dilation: tuple[int, ...],
                     transposed: bool) -> bool:
        """Let a library write a convolution's ``out`` (plain, ``[batch, groups * M,
        *out_size]``) = ``matrix`` (plain, ``[groups, M, in / groups * taps]``) times the
        patches of ``x`` (``kernels.conv.columns``'s, ``transposed`` as there), plus ``bias``
        (plain ``[groups * M]`` or None); False, with nothing enqueued, leaves it to
        ``burnish.jit``'s kernels. Runtimes without such a library keep this default."""
        return False

    def library_max_pool(self, x: Any, out: Any, index: Any, kernel: tuple[int, ...],
                         stride: tuple[int, ...], padding: tuple[int, ...],
                         dilation: tuple[int, ...]) -> bool:
        """Let a library write a max pooling's ``out`` (plain ``[batch, channels,
        *out_size]``) and, unless None, ``index`` (plain int64, the flat spatial index of each
        max, as ``kernels.pool`` gives it); False, with nothing enqueued, leaves it to
        ``burnish.jit``'s kernel. Runtimes without such a library keep this default."""
        return False

    def library_attention(self, q: Any, k: Any, v: Any, mask: Any, scale: float,
                          causal: bool) -> tuple[Any, Any] | None:
        """Let a library run ``AttentionOps.attention`` (its arguments, ``JitTensor`` operands;
        the output and log-sum-exp as new plain tensors); None, with nothing enqueued, leaves
        it to ``burnish.jit``. Runtimes without such a library keep this default."""
        return None

    def library_attention_backward(self, q: Any, k: Any, v: Any, mask: Any, grad: Any,
                                   scale: float, causal: bool) -> tuple[Any, Any, Any] | None:
        """Let a library run ``AttentionOps.attention_backward`` (the weights recomputed from
        q and k); None leaves it to ``burnish.jit``."""
        return None

    def library_recurrent(self, input_gates: Any, hidden_weight: Any, hidden_bias: Any,
                          hidden: Any, cell: Any, reverse: bool) -> tuple[Any, ...] | None:
        """Let a library run a whole recurrent layer: ``RecurrentOps.lstm_sequence`` where
        ``cell`` is given (``hidden_bias`` is then None), else ``gru_sequence`` (their
        arguments, ``JitTensor`` operands; the results as new plain tensors). None, with
        nothing enqueued, leaves it to the protocol's default: a product and a cell kernel per
        step. Runtimes without such a library keep this default."""
        return None

    def library_select(self, out: Any, x: Any, dim: int, indices: Any) -> bool:
        """Let a library write ``out`` (plain) = the slices of ``x`` (any strides) along
        ``dim`` at the 1-d int ``indices`` (any stride, at least one), each index clamped into
        the dim as the ``gather`` kernel does; False, with nothing enqueued, leaves it to that
        kernel. Runtimes without such a library keep this default."""
        return False

    def library_cat(self, out: Any, parts: Sequence[tuple[Any, int]], dim: int) -> bool:
        """Let a library write ``out`` (plain) from ``parts``: ``(x, start)`` with ``x`` at
        ``start`` along ``dim``, side by side and together all of ``out`` (``JitTensor``s of
        one dtype, any strides); False, with nothing enqueued, leaves it to ``burnish.jit``'s
        ``cat_into`` kernel. Runtimes without such a library keep this default."""
        return False

    #: Whether ``library_matmul`` takes a bias (else biased products stay in burnish.jit's
    #: kernel, which adds it in the product's epilogue).
    library_bias: bool = False

    #: Whether large convolutions take burnish.jit's implicit-GEMM kernels (``kernels.conv``);
    #: False sends them through a patch matrix and ``library_matmul`` (the CPU, whose BLAS
    #: is much faster than the tiled kernel compiled for it).
    implicit_convolutions: bool = True

    #: Whether accumulating scatters (``scatter_add``, ``select_add``) add each line of index
    #: entries in one invocation (``kernels.index.accumulate_lines``) rather than one
    #: invocation per output element searching its entries: the CPU's way, with few cores.
    serial_scatter: bool = False

    #: Whether reductions may share a reduced run among a workgroup's invocations (the
    #: ``tree`` strategy of ``kernels.reduce``, tuned against ``loop``); False keeps to one
    #: invocation per output (or chunk): the CPU's way, where a workgroup's invocations are a
    #: loop and its barriers split it into many.
    workgroup_reductions: bool = True

    #: Whether an ``int8`` buffer holds one element a byte, four to an int32 word in
    #: little-endian order (element ``4w + j`` in bits ``8j`` of word ``w``): quantized
    #: products (``kernels.quant``) then read int8 operands whose rows are whole words where
    #: they lie instead of packing them. WGSL stores int8 in 32 bits; big-endian devices
    #: order the bytes the other way.
    byte_words: bool = False

    def fused_attention(self, dtype: Any) -> bool:
        """Whether attention of ``dtype`` runs as burnish.jit's flash kernels (``kernels.
        attention``) rather than the protocol's composition (scores materialised, products,
        softmax): the cpu backend says no where its BLAS takes the products."""
        return True

    def fuses_product(self, dtype: Any, macs: int) -> bool:
        """Whether ``burnish.fusion`` may record a product of ``dtype`` and ``macs``
        multiply-adds, to run it in ``burnish.jit``'s kernel together with the elementwise ops
        that follow it (a bias, an activation). Runtimes whose products go to a vendor library
        say no where that library is much faster on the GPU."""
        return True

    def call(self, fn, args: tuple, reads: Sequence[Any], writes: Sequence[Any],
             key: Any = None) -> None:
        """Enqueue ``fn(*args)``: work a vendor library enqueues on this runtime's queue (a
        cuBLAS product, a cuDNN convolution), reading the buffers ``reads`` and writing
        ``writes``. Going through here lets a capture record it (``key``: what, besides the
        buffers, makes two such calls the same work)."""
        fn(*args)

    #: ``view(handle, offset)``: a handle for the memory of ``handle`` from byte ``offset`` on,
    #: valid as long as ``handle``'s buffer is, on runtimes whose API can point into a buffer
    #: (cuda): a capture's record then places its allocations at offsets of one buffer. None
    #: (wgpu, rocm: their bindings take whole buffers): records share whole buffers.
    view: Callable[[Any, int], Any] | None = None

    def relocate(self, args: tuple, moves: Sequence[tuple[Any, Any, int]]) -> tuple:
        """The arguments of a recorded ``call`` with its buffers moved: each ``(old, new,
        nbytes)`` of ``moves`` puts ``new`` where ``old`` was (a capture packing its memory).
        This default replaces the buffers themselves; a runtime whose library calls take
        addresses moves those too."""
        new = {id(old): to for old, to, _ in moves}
        return tuple(new.get(id(a), a) for a in args)

    def replayer(self, commands: Sequence[tuple]):
        """A function that enqueues a capture's recorded ``commands`` again
        (``burnish.jit.capture``), after ``copies``: ``(src, dst, start, end, stable)``, the
        bytes ``[start, end)`` of buffer ``src`` into ``dst``. This one calls ``dispatch`` and
        the rest once per command, with everything worked out beforehand; a runtime whose API
        can hold a whole sequence (a CUDA graph) does better."""
        program = self.program(commands)
        copy = type(self).copy.__get__(self)

        def replay(copies: Sequence[tuple]) -> None:
            for src, dst, start, end, _ in copies:
                copy(src, start, dst, start, end - start)
            for fn, args in program:
                fn(*args)

        return replay

    def joined(self, commands: Sequence[tuple]) -> list[int]:
        """Indices ``i`` of recorded ``commands`` that ``program`` runs together with
        command ``i + 1`` (the cpu backend's convolutions with the activation after them):
        a capture keeps the memory command ``i`` reads apart from what command ``i + 1``
        writes. None here."""
        return []

    def program(self, commands: Sequence[tuple]) -> list[tuple[Any, tuple]]:
        """Recorded commands as ``(function, arguments)`` pairs that enqueue them."""
        cls = type(self)
        methods = {"launch": cls.dispatch.__get__(self), "write": cls.write.__get__(self),
                   "copy": cls.copy.__get__(self)}
        program = []
        for command in commands:
            kind = command[0]
            if kind == "call":
                program.append((command[1], command[2]))
            else:
                program.append((methods[kind], command[1:]))
        return program

    @abstractmethod
    def sync(self) -> None:
        """Wait for every enqueued operation."""

    # -- shared behaviour -----------------------------------------------------------------------

    @functools.cached_property
    def device_name(self) -> str:
        """``describe()``, asked once: kernel choices are looked up by it on every launch."""
        return self.describe()

    def kernel(self, key: Any, build) -> tuple[Any, ir.Kernel]:
        """The compiled kernel for ``key``, generated by ``build()`` (an ``ir.Kernel``) once.
        ``build()`` may instead give ``(ir.Kernel, source)``: hand-written source in this
        runtime's language, whose parameters the kernel's buffers describe (custom kernels)."""
        entry = self._kernels.get(key)
        if entry is None:
            with self._lock:
                entry = self._kernels.get(key)
                if entry is None:
                    built = build()
                    if isinstance(built, tuple):
                        kernel, source = built
                    else:
                        kernel, source = built, self.generator.generate(built)
                    entry = (self.compile(kernel, source), kernel, source)
                    self._kernels[key] = entry
        return entry[0], entry[1]

    def source_of(self, key: Any) -> str:
        """The generated source of a compiled kernel (for users who want to look)."""
        return self._kernels[key][2]

    def prepare(self, key: Any, build, info: Sequence[int], invocations: int | None = None,
                groups: int | None = None) -> tuple[Any, np.ndarray, tuple[int, int, int]]:
        """What ``launch`` hands to ``dispatch``: the compiled kernel (compiled once), the
        metadata as int32 words and the grid, for callers that keep them to launch again."""
        compiled, kernel = self.kernel(key, build)
        if groups is None:
            groups = -(-max(invocations or 0, 1) // kernel.workgroup[0])
        meta = np.asarray(info if len(info) else [0], dtype=np.int32)
        return compiled, meta, grid(groups)

    def launch(self, key: Any, build, buffers: Sequence[DeviceBuffer], info: Sequence[int],
               invocations: int | None = None, groups: int | None = None
               ) -> tuple[Any, np.ndarray, tuple[int, int, int]]:
        """Compile (once) and enqueue a kernel over ``invocations`` (rounded up to whole
        workgroups) or over ``groups`` workgroups, split across x and y when there are many.
        Returns what ``prepare`` gives, as launched."""
        prepared = self.prepare(key, build, info, invocations, groups)
        self.dispatch(prepared[0], [b.handle for b in buffers], prepared[1], prepared[2])
        return prepared


class DeviceErrors:
    """Two device words that checking kernels set where they find a bad value (an index out
    of bounds): a code naming the check's message, and the value. The check costs no
    synchronisation: reads read the words along with their data and raise the message (one
    bad value found since the last read is reported)."""

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.buffer = runtime.pool.alloc(8)
        runtime.write(self.buffer.handle, 0, np.zeros(2, np.int32))
        self.messages: list[str] = [""]
        self._codes: dict[str, int] = {}

    def code(self, message: str) -> int:
        """The code a kernel writes for ``message``."""
        found = self._codes.get(message)
        if found is None:
            found = self._codes[message] = len(self.messages)
            self.messages.append(message)
        return found

    def item(self) -> tuple[Any, int, int]:
        """The words, as an item of ``Runtime.read``."""
        return (self.buffer.handle, 0, 8)

    def raise_pending(self, raw: bytes) -> None:
        """Raise the error ``raw`` (the words read back) holds, clearing it first."""
        code, value = (int(v) for v in np.frombuffer(raw, np.int32))
        if code:
            self.runtime.write(self.buffer.handle, 0, np.zeros(2, np.int32))
            from burnish.errors import ShapeError

            raise ShapeError(self.messages[code].format(value=value) + " (found on the device "
                             "by an earlier operation, reported at this read)")


class DeviceBuffer:
    """A pooled device allocation; going out of scope returns it to its pool."""

    __slots__ = ("pool", "handle", "nbytes", "__weakref__")

    def __init__(self, pool: BufferPool, handle: Any, nbytes: int):
        self.pool = pool
        self.handle = handle
        self.nbytes = nbytes

    def __del__(self) -> None:
        # Back to the pool's free list (the pool's per-op path, kept in one frame: see
        # BufferPool).
        pool = self.pool
        if pool is not None:
            nbytes = self.nbytes
            bucket = pool._free.get(nbytes)
            if bucket is None:
                bucket = pool._free.setdefault(nbytes, [])
            bucket.append(self.handle)
            pool._free_bytes += nbytes
            if pool._free_bytes > pool.limit:
                pool._trim()


def size_class(nbytes: int) -> int:
    """The allocation size for a request: 256-byte steps up to 64 KiB, then eighths of a power
    of two (at most 12.5% unused), so freed buffers fit later requests of similar size."""
    nbytes = max(nbytes, 4)
    if nbytes <= 65536:
        return -(-nbytes // 256) * 256
    step = 1 << (nbytes.bit_length() - 4)
    return -(-nbytes // step) * step


class BufferPool:
    """Free device buffers by size class, reused before the API is asked for new memory.

    ``limit`` bounds the bytes kept free; beyond it the oldest free buffers go back to the API.

    Taking and returning a buffer happens on every op, so that path takes no lock: each free
    list is only ever changed by one ``pop`` or ``append`` at a time, which are atomic, and an
    empty list found by a racing thread sends it to the API like a miss. ``free_bytes`` is kept
    without a lock too (under the GIL an ``int`` update is not interrupted); trimming, which
    walks every list, holds the lock.
    """

    def __init__(self, runtime: Runtime, limit: int = 1 << 30):
        self.runtime = runtime
        self.limit = limit
        self._free: dict[int, list[Any]] = {}
        # Request size -> size class, for the sizes seen (bounded): a dict lookup per op
        # instead of the arithmetic.
        self._classes: dict[int, int] = {}
        # Every handle the pool made, by id: a handle is always reachable from here, so the
        # garbage collector never finalizes one (wgpu-py releases buffers in __del__) in the
        # same pass where its DeviceBuffer hands it back.
        self._handles: dict[int, Any] = {}
        self._free_bytes = 0
        self.allocated_bytes = 0
        self._lock = threading.Lock()
        #: The capture recording this pool's allocations (``burnish.jit.capture``), if any.
        self.recorder: Any = None

    def alloc(self, nbytes: int, exact: bool = False) -> DeviceBuffer:
        """A buffer of at least ``nbytes``: of its size class (so that freed buffers serve
        later requests of similar size), or, ``exact``, of ``nbytes`` in 256-byte steps (one
        large buffer kept for a long time: a capture's arena)."""
        size = self._classes.get(nbytes) if not exact else -(-max(nbytes, 4) // 256) * 256
        if size is None:
            size = size_class(nbytes)
            if len(self._classes) >= 4096:
                self._classes.clear()
            self._classes[nbytes] = size
        if self.recorder is not None:
            return self._recorded_alloc(size, nbytes)
        handle = None
        bucket = self._free.get(size)
        if bucket:
            try:
                handle = bucket.pop()
            except IndexError:  # another thread took the last one
                pass
            else:
                self._free_bytes -= size
        if handle is None:
            handle = self.runtime.allocate(size)
            with self._lock:
                self._handles[id(handle)] = handle
                self.allocated_bytes += size
        # DeviceBuffer(self, handle, size) without the call of its __init__.
        buffer = _new(DeviceBuffer)
        buffer.pool, buffer.handle, buffer.nbytes = self, handle, size
        return buffer

    def _recorded_alloc(self, size: int, nbytes: int) -> DeviceBuffer:
        """``alloc`` while a capture records: the recorder hears of every handle given out,
        and of the bytes asked for."""
        recorder, self.recorder = self.recorder, None
        try:
            buffer = self.alloc(size, exact=True)  # ``size`` is final already
        finally:
            self.recorder = recorder
        recorder.allocated_handle(buffer.handle, nbytes)
        return buffer

    def _trim(self) -> None:
        """Gives the largest free buffers back to the API until half the limit is free (never
        while a capture records: a recorded command may name a free buffer)."""
        if self.recorder is not None:
            return
        victims = []
        with self._lock:
            for size in sorted(self._free, reverse=True):
                bucket = self._free[size]
                while bucket and self._free_bytes > self.limit // 2:
                    try:
                        victim = bucket.pop(0)
                    except IndexError:
                        break
                    del self._handles[id(victim)]
                    victims.append(victim)
                    self._free_bytes -= size
                    self.allocated_bytes -= size
        for victim in victims:
            self.runtime.free(victim)

    def stats(self) -> dict[str, int]:
        """Bytes held from the API, and how many of them are free for reuse."""
        return {"allocated_bytes": self.allocated_bytes, "free_bytes": self._free_bytes}
