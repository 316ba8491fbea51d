"""``Communicator``: one rank's NCCL communicator on one GPU, and its collectives on burnish
tensors, enqueued on the stream where the cuda backend runs that GPU's ops."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import burnish as bn
from burnish import Tensor
from burnish.backend.autodiff_ops import AutodiffOps
from burnish.cuda import runtime as cuda_runtime
from burnish.cuda.backend import CudaBackend
from burnish.device import Device
from burnish.distributed import buckets, gradients
from burnish.distributed.communicator import Pending
from burnish.dtype import DType, int32
from burnish.errors import DeviceError, DTypeError, UnsupportedError
from burnish.jit.tensor import JitTensor

#: NCCL's element type per dtype, by the name CuPy gives it (``cupy.cuda.nccl.NCCL_FLOAT32``...).
#: NCCL has no 16-bit integer and no bool: reductions refuse them (broadcasts move bytes).
NCCL_TYPES = {
    "float64": "NCCL_FLOAT64", "float32": "NCCL_FLOAT32", "float16": "NCCL_FLOAT16",
    "bfloat16": "NCCL_BFLOAT16", "int64": "NCCL_INT64", "int32": "NCCL_INT32",
    "int8": "NCCL_INT8", "uint8": "NCCL_UINT8",
}
#: NCCL's reduction per ``op``; ``mean`` is ``ncclAvg`` (sum, then division by the world size).
NCCL_OPS = {"sum": "NCCL_SUM", "prod": "NCCL_PROD", "max": "NCCL_MAX", "min": "NCCL_MIN",
            "mean": "NCCL_AVG"}
#: ncclAvg appeared in NCCL 2.10; before it, ``mean`` is a sum and a multiplication.
_AVG_VERSION = 21000


def load_nccl() -> Any:
    """CuPy's NCCL bindings (``cupy.cuda.nccl``). Raises ``UnsupportedError`` saying what to
    install when CuPy, or the NCCL library it loads, is missing."""
    if cuda_runtime.cp is None:
        raise UnsupportedError(
            f"cuda distributed: CuPy is not importable ({cuda_runtime.CUPY_ERROR}); install the "
            "wheel for your driver: pip install 'burnish-backend-cuda[cuda12]' or [cuda13]")
    try:
        # Imported by name: ``cupy.cuda.nccl`` is not an attribute of ``cupy.cuda`` until then.
        from cupy.cuda import nccl
    except ImportError as error:
        reason = str(error)
    else:
        if getattr(nccl, "available", False) and hasattr(nccl, "NcclCommunicator"):
            return nccl
        reason = _nccl_import_error()
    raise UnsupportedError(
        f"cuda distributed: CuPy has no NCCL ({reason}); install NCCL for your CUDA version, "
        "e.g. pip install nvidia-nccl-cu12 (or -cu13), or python -m cupyx.tools.install_library "
        "--library nccl --cuda 12.x")


def _nccl_import_error() -> str:
    """Why CuPy's NCCL module did not load (CuPy only warns): its import error, again."""
    try:
        import cupy_backends.cuda.libs.nccl  # noqa: F401
    except ImportError as error:
        return str(error)
    return "cupy.cuda.nccl.available is False"


def unique_id() -> bytes:
    """A new NCCL unique id (128 bytes): what every rank of one communicator is created with.
    ``launch`` makes one; processes started another way share one made by one of them."""
    return as_id(load_nccl().get_unique_id())


def as_id(value: bytes | Sequence[int]) -> bytes:
    """An NCCL unique id as bytes (CuPy gives bytes; older CuPy gave a tuple of C chars)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return bytes(b & 0xFF for b in value)


def reduction(dtype: DType, op: str) -> tuple[str, str]:
    """CuPy's names of NCCL's element type and reduction for ``op`` over ``dtype``. Raises
    ValueError for an unknown ``op``, DTypeError for bool, for ``mean`` of integers, and
    UnsupportedError for a dtype NCCL lacks (int16)."""
    if op not in NCCL_OPS:
        raise ValueError(f"all_reduce: op must be one of {', '.join(NCCL_OPS)}, got {op!r}")
    if dtype.is_bool:
        raise DTypeError("all_reduce: bool tensors cannot be reduced; cast them with .int() "
                         "(sum counts the ranks where an element is true)")
    if op == "mean" and not dtype.is_float:
        raise DTypeError(f"all_reduce: the mean of {dtype} values is not an integer; cast to a "
                         "float dtype first, or reduce with op='sum'")
    if dtype.name not in NCCL_TYPES:
        raise UnsupportedError(f"all_reduce: NCCL has no {dtype} type; cast to int32 first")
    return NCCL_TYPES[dtype.name], NCCL_OPS[op]


def cuda_operand(tensor: Tensor, op: str) -> tuple[JitTensor, Callable[[JitTensor], Tensor]]:
    """``tensor``'s primitive on the cuda backend beneath its decorators (autodiff's inner
    primitive; fusion shares the cuda backend's), and a function wrapping a cuda primitive
    back into a tensor of ``tensor``'s backend and device (not tracked by autodiff).

    Raises TypeError for a non-tensor and DeviceError naming the backend of a tensor that is
    not on cuda."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected a burnish Tensor, got {type(tensor).__name__}")
    backend, prim, layers = tensor.backend, tensor.primitive, []
    while not isinstance(backend, CudaBackend):
        if isinstance(backend, AutodiffOps):
            layers.append(backend)
            prim = backend.inner(prim)
            backend = backend.inner_backend
        elif _is_fusion(backend):
            backend = backend.inner  # its primitives are the inner backend's
        else:
            raise DeviceError(
                f"{op}: the tensor is on backend {tensor.backend.name!r} ({tensor.device}), not "
                "on cuda; NCCL moves GPU memory only: move it with "
                ".to_device(communicator.device)")

    def wrap(out: JitTensor) -> Tensor:
        for layer in reversed(layers):
            out = layer.from_inner(out)
        return Tensor.from_primitive(out, tensor.device, tensor.dtype)

    return prim, wrap


def _is_fusion(backend: Any) -> bool:
    try:
        from burnish.fusion import Fusion
    except ImportError:
        return False
    return isinstance(backend, Fusion)


@dataclass
class _Issued:
    """A group of collectives on the communication stream: its number (from 1), its first
    collective's name, when it was issued, the event recorded after it, and the buffers it
    reads and writes, kept from the memory pool until the event has passed."""

    number: int
    name: str
    since: float
    done: Any
    buffers: list[JitTensor]


class Communicator:
    """The NCCL implementation of ``burnish.distributed.Communicator``: rank ``rank`` of
    ``world_size`` processes, each driving one GPU: ``device`` (a device of
    the ``cuda`` backend, ``cuda:rank`` by default). Made by ``launch`` for the function it
    runs; processes started another way make it themselves from one shared ``unique_id()``.

    Every collective is called by every rank, in the same order, with tensors of the same
    shape and dtype (NCCL cannot tell otherwise: mismatched calls hang or mix up data). They
    run on a communication stream of their own, after every op enqueued before them on the
    stream where the cuda backend runs ``device``'s ops (an event between the two); they return
    at once, like other ops. The ops that use a result wait for it on the GPU: at once for
    ``all_reduce`` and the other single collectives, at ``wait()`` for ``all_reduce_start``,
    so kernels enqueued in between (the rest of a backward pass) run while the collective
    does. Results are new tensors (tensors are values); a tensor of an autodiff backend is
    reduced through its inner primitive, and the result is not tracked.

    ``watchdog``: set by ``burnish.distributed.init`` (a ``burnish.distributed.watchdog.
    Watchdog``): it ends the process, naming the rank, when another rank dies or a collective
    does not complete in time; ``close`` ends it cleanly.
    """

    #: ``GradientReducer`` reduces the buckets after the backward pass by default: starting
    #: them during the pass (they would run on the communication stream beside it) measured
    #: slower on the GPT-style model of bench/bench_distributed.py, whose eager steps are
    #: bound by the host. ``GradientReducer(..., overlap_backward=True)`` overlaps anyway.
    overlaps_backward = False

    def __init__(self, rank: int, world_size: int, unique_id: bytes | Sequence[int],
                 device: Device | int | None = None):
        self._comm = None
        nccl = load_nccl()
        if not 0 <= rank < world_size:
            raise ValueError(f"Communicator: rank {rank} is outside 0..{world_size - 1} of a "
                             f"world of {world_size}")
        backend = bn.backend("cuda")
        devices = backend.devices()
        if device is None:
            device = rank
        if isinstance(device, int):
            if not 0 <= device < len(devices):
                raise DeviceError(f"Communicator: there is no cuda:{device}; CuPy sees "
                                  f"{len(devices)} GPU(s)")
            device = devices[device]
        if device.backend is not backend:
            raise DeviceError(f"Communicator: {device!r} is not a device of the cuda backend")
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self._nccl = nccl
        self._backend: CudaBackend = backend
        self._runtime = backend.runtime(device)
        self._avg = nccl.get_version() >= _AVG_VERSION
        # NCCL binds a communicator to the current device; this process drives that one.
        self._runtime.cuda_device.use()
        cp = cuda_runtime.cp
        with self._runtime.cuda_device:
            self._stream = cp.cuda.Stream(non_blocking=True)
        self._event = cp.cuda.Event
        self._issued: deque[_Issued] = deque()
        self._count = 0
        self.watchdog: Any = None
        ident = as_id(unique_id)
        try:
            self._comm = nccl.NcclCommunicator(world_size, ident, rank)
        except TypeError:  # CuPy before 13 takes the id as a tuple of C chars
            signed = tuple(b - 256 if b > 127 else b for b in ident)
            self._comm = nccl.NcclCommunicator(world_size, signed, rank)

    def __repr__(self) -> str:
        return f"Communicator(rank={self.rank}, world_size={self.world_size}, {self.device})"

    # -- collectives ------------------------------------------------------------------------

    def all_reduce(self, tensor: Tensor, op: str = "sum") -> Tensor:
        """The elementwise ``op`` (``"sum"``, ``"mean"``, ``"max"``, ``"min"``, ``"prod"``) of
        ``tensor`` over all ranks, on every rank: a new tensor of ``tensor``'s backend, shape
        and dtype. Raises as ``reduction`` says for dtypes and ops, and DeviceError for a
        tensor not on this communicator's device."""
        prim, wrap = self._operand(tensor, "all_reduce")
        reduction(tensor.dtype, op)
        return wrap(self._all_reduce([prim], op)[0])

    def all_reduce_start(self, tensors: Sequence[Tensor], op: str = "sum") -> Pending:
        """``all_reduce`` of each tensor, in one flat buffer per dtype and one NCCL group,
        enqueued now; ``wait()`` returns the results (already enqueued on the device's stream,
        so it does not block)."""
        issued: list[_Issued] = []
        results = buckets.bucketed(list(tensors), lambda flats: self._all_reduce_tensors(
            flats, op, issued))

        def finish() -> list[Tensor]:
            for group in issued:
                self._runtime.stream.wait_event(group.done)
            return results

        return Pending(finish)

    def all_gather(self, tensor: Tensor) -> Tensor:
        """Every rank's ``tensor`` stacked in rank order: shape ``[world_size, *shape]``."""
        prim, wrap = self._operand(tensor, "all_gather")
        x = self._backend.contiguous(prim)
        out = self._backend.empty((self.world_size, *x.shape), x.dtype, x.device)
        if x.numel:
            self._collectives([("allGather", self._pointer(x), self._pointer(out),
                                x.numel * self._itemsize(x.dtype), self._nccl.NCCL_UINT8)],
                              [x, out])
        return wrap(out)

    def reduce_scatter(self, tensor: Tensor, op: str = "sum") -> Tensor:
        """Part ``rank`` (of ``world_size`` equal parts along the first dim) of the ``op`` over
        the ranks. Raises ValueError when the first dim is not a multiple of the world size."""
        reduction(tensor.dtype, op)
        prim, wrap = self._operand(tensor, "reduce_scatter")
        shape = tuple(prim.shape)
        if not shape or shape[0] % self.world_size:
            raise ValueError(f"reduce_scatter: the first dim of shape {list(shape)} must be a "
                             f"multiple of the world size {self.world_size}")
        x = self._backend.contiguous(prim)
        out = self._backend.empty((shape[0] // self.world_size, *shape[1:]), x.dtype, x.device)
        divide = op == "mean" and not self._avg
        nccl_op = getattr(self._nccl, NCCL_OPS["sum" if divide else op])
        if out.numel:
            self._collectives([("reduceScatter", self._pointer(x), self._pointer(out),
                                out.numel, self._nccl_type(x.dtype), nccl_op)], [x, out])
        if divide:
            out = self._backend.mul_scalar(out, 1.0 / self.world_size, out.dtype)
        return wrap(out)

    def broadcast(self, tensor: Tensor, root: int = 0) -> Tensor:
        """Rank ``root``'s ``tensor`` on every rank, as a new tensor. Every rank passes a tensor
        of the same shape and dtype (the others' values are not read); any dtype."""
        self._check_root(root)
        prim, wrap = self._operand(tensor, "broadcast")
        return wrap(self._broadcast([prim], root)[0])

    def all_reduce_gradients(self, grads: Any, params_or_module: Any, op: str = "mean") -> Any:
        """``grads`` with every trained parameter's gradient averaged over the ranks (``op``:
        ``"mean"``, or ``"sum"``), as a new object of ``grads``' type; pass the result to the
        optimizer as you would ``grads``.

        ``grads`` is what ``loss.backward()`` returned (``burnish.autodiff.Gradients``) or a
        ``burnish.optim.GradientsParams``; ``params_or_module`` the module (or its Params) whose
        gradients to reduce. The gradients go in one flat buffer per dtype, so a whole model
        costs one NCCL call per dtype, all in one NCCL group. A trained parameter without a
        gradient on this rank counts as zeros. Averaged gradients on every rank and the same
        starting parameters (``broadcast_module``) keep the ranks' models identical.
        """
        if op not in ("mean", "sum"):
            raise ValueError(f"all_reduce_gradients: op must be 'mean' or 'sum', got {op!r}")
        return gradients.reduce_gradients(grads, params_or_module,
                                          lambda flats: self._all_reduce_tensors(flats, op))

    def broadcast_module(self, module: Any, root: int = 0) -> Any:
        """A copy of ``module`` holding rank ``root``'s parameter values (frozen ones and batch
        norm statistics included) on this rank's device; ids and flags stay this rank's. Call
        it once before training so every rank starts from the same model. One NCCL call per
        dtype of the parameters."""
        self._check_root(root)

        def collective(flats: list[Tensor]) -> list[Tensor]:
            prims, wraps = zip(*(self._operand(flat, "broadcast_module") for flat in flats))
            return [wrap(out) for wrap, out in zip(wraps, self._broadcast(list(prims), root))]

        return gradients.replace_params(module, collective)

    def barrier(self) -> None:
        """Wait until every rank has reached this call and this rank's GPU has finished all
        work enqueued before it."""
        one = self._backend.full((1,), 1, int32, self.device)
        self._all_reduce([one], "sum")
        self._runtime.sync()

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for this rank's queued work, then free the NCCL communicator (every rank
        closes its own; collectives fail afterwards) and end the watchdog cleanly."""
        if self._comm is not None:
            self._runtime.sync()
            self._stream.synchronize()
            self._issued.clear()
            self._comm.destroy()
            self._comm = None
        if self.watchdog is not None:
            self.watchdog.close()
            self.watchdog = None

    def abort(self) -> None:
        """Free the NCCL communicator at once, abandoning collectives in flight (after an
        error, when the other ranks may never call theirs)."""
        if self._comm is not None:
            self._comm.abort()
            self._comm = None

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

    # -- NCCL calls -------------------------------------------------------------------------

    def _operand(self, tensor: Tensor, op: str) -> tuple[JitTensor, Callable]:
        prim, wrap = cuda_operand(tensor, op)
        if prim.device != self.device:
            raise DeviceError(f"{op}: the tensor is on {prim.device}, but rank {self.rank}'s "
                              f"communicator is on {self.device}; move it with "
                              f".to_device(communicator.device)")
        return prim, wrap

    def _all_reduce_tensors(self, tensors: list[Tensor], op: str,
                            issued: list[_Issued] | None = None) -> list[Tensor]:
        for tensor in tensors:
            reduction(tensor.dtype, op)
        prims, wraps = zip(*(self._operand(t, "all_reduce_gradients") for t in tensors))
        return [wrap(out) for wrap, out in zip(wraps, self._all_reduce(list(prims), op, issued))]

    def _all_reduce(self, xs: list[JitTensor], op: str,
                    issued: list[_Issued] | None = None) -> list[JitTensor]:
        """One all-reduce per primitive (checked already), grouped into one NCCL launch; with
        ``issued``, the compute stream does not wait for it here (see ``_collectives``)."""
        divide = op == "mean" and not self._avg
        nccl_op = getattr(self._nccl, NCCL_OPS["sum" if divide else op])
        # Without ncclAvg the division is a kernel on the compute stream: it waits first.
        outs = self._enqueue(xs, lambda send, recv, x: (
            "allReduce", send, recv, x.numel, self._nccl_type(x.dtype), nccl_op),
            None if divide else issued)
        if divide:
            outs = [self._backend.mul_scalar(out, 1.0 / self.world_size, out.dtype)
                    for out in outs]
        return outs

    def _broadcast(self, xs: list[JitTensor], root: int) -> list[JitTensor]:
        """One broadcast per primitive, of its bytes, grouped into one NCCL launch."""
        return self._enqueue(xs, lambda send, recv, x: (
            "broadcast", send, recv, x.numel * self._itemsize(x.dtype), self._nccl.NCCL_UINT8,
            root))

    def _enqueue(self, xs: list[JitTensor],
                 call: Callable[[int, int, JitTensor], tuple[Any, ...]],
                 issued: list[_Issued] | None = None) -> list[JitTensor]:
        """The collective ``call(send pointer, receive pointer, plain input)`` describes (see
        ``_collectives``) for each non-empty primitive, into a new output each; several form
        one NCCL group."""
        if self._comm is None:
            raise RuntimeError(f"{self!r} is closed")
        # Inputs made plain and pointers taken first: a copy or a lazy (fused) tensor's kernel
        # is enqueued here, before the collectives, not inside their group.
        plain = [self._backend.contiguous(x) for x in xs]
        outs = [self._backend.empty(x.shape, x.dtype, x.device) for x in plain]
        work = [(x, out) for x, out in zip(plain, outs) if x.numel]
        if work:
            self._collectives([call(self._pointer(x), self._pointer(out), x)
                               for x, out in work], [b for pair in work for b in pair], issued)
        return outs

    def _collectives(self, calls: list[tuple[Any, ...]], buffers: list[JitTensor],
                     issued: list[_Issued] | None = None) -> None:
        """Enqueue NCCL ``calls`` (each a communicator method's name and its arguments before
        the stream), several as one group, on the communication stream once the compute
        stream has reached this point. ``buffers`` (what the calls read and write) stay out of
        the memory pool until the group has passed. The compute stream waits for the group
        now, or, when ``issued`` is a list, the group goes there and whoever holds it makes the
        compute stream wait later (``all_reduce_start``).

        A capture recording the call is told it cannot replay it (``burnish.capture`` then
        runs the function eagerly, or raises with ``strict=True``): its replay would skip the
        collectives and the ranks would drift apart."""
        if self._comm is None:
            raise RuntimeError(f"{self!r} is closed")
        recorder = getattr(self._runtime.pool, "recorder", None)
        if recorder is not None:
            recorder.refuse(f"it runs NCCL collectives ({calls[0][0]}), which a replay does "
                            f"not hold")
        compute = self._runtime.stream
        with self._runtime.cuda_device:
            while self._issued and self._issued[0].done.done:
                self._issued.popleft()  # passed: its buffers may go back to the pool
            ready = self._event(disable_timing=True)
            ready.record(compute)
            self._stream.wait_event(ready)
            if len(calls) > 1:
                self._nccl.groupStart()
            try:
                for name, *args in calls:
                    getattr(self._comm, name)(*args, self._stream.ptr)
            finally:
                if len(calls) > 1:
                    self._nccl.groupEnd()
            done = self._event(disable_timing=True)
            done.record(self._stream)
            self._count += 1
            group = _Issued(self._count, calls[0][0], time.monotonic(), done, buffers)
            self._issued.append(group)
            if issued is None:
                compute.wait_event(done)
            else:
                issued.append(group)

    def progress(self) -> tuple[int, tuple[int, str, float] | None]:
        """The number of collective groups this rank has issued, and the oldest that has not
        completed on the GPU as (its number, its first collective's name, when it was issued
        by ``time.monotonic()``), or None (what the watchdog asks, from its own thread)."""
        count = self._count
        try:
            groups = list(self._issued)
        except RuntimeError:  # the main thread changed it meanwhile: look again next time
            return count, None
        with self._runtime.cuda_device:
            for group in groups:
                if not group.done.done:
                    return count, (group.number, group.name, group.since)
        return count, None

    def _nccl_type(self, dtype: DType) -> int:
        name = NCCL_TYPES[dtype.name]
        if name == "NCCL_BFLOAT16":  # NCCL's value since 2.10; older CuPy does not name it
            return getattr(self._nccl, name, 9)
        return getattr(self._nccl, name)

    def _itemsize(self, dtype: DType) -> int:
        return self._runtime.generator.storage_numpy(dtype.name).itemsize

    def _pointer(self, x: JitTensor) -> int:
        return x.buffer.handle.ptr + x.offset * self._itemsize(x.dtype)

    def _check_root(self, root: int) -> None:
        if not 0 <= root < self.world_size:
            raise ValueError(f"broadcast: root {root} is outside 0..{self.world_size - 1}")

