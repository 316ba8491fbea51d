"""Lazy elementwise ops: what ``burnish.fusion`` records instead of launching.

While ``recording()`` is active (``burnish.fusion`` turns it on around every op it forwards to
a GPU backend), ``kernels.elementwise`` does not launch: it returns a ``LazyTensor`` holding a
``Node`` (the op's expression builder, its inputs and scalars). Nothing runs until something
needs the tensor's buffer: a read, a kernel that is not elementwise (a reduction, a matmul, a
view), a sync, or the pending stream growing past ``STREAM_LIMIT``. Then the stream of the
tensor's device is flushed (``flush``): every pending tensor that something outside the
stream still references (a ``Tensor``, a saved autodiff value, a local variable) becomes an
output, the pending tensors nobody else references are intermediates that only ever live in
registers, and each group of outputs of one shape is one generated kernel
(``kernels.fused``).

Which pending tensors are referenced from outside is told by CPython's reference counts. A
wrong guess costs speed, never correctness: a tensor that stays lazy keeps its node and
inputs, and computes itself whenever its buffer is asked for.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Sequence

from burnish.device import Device
from burnish.dtype import DType
from burnish.jit.runtime import Runtime
from burnish.jit.tensor import JitTensor

#: Pending lazy tensors per device beyond which the stream is flushed while recording.
STREAM_LIMIT = 128

# The slot that holds a JitTensor's buffer; LazyTensor's ``buffer`` property sits in front.
_BUFFER = JitTensor.__dict__["buffer"]
_state = threading.local()


class Node:
    """One recorded elementwise op: ``fn(values, scalars)`` over ``inputs`` broadcast to
    ``shape`` (``fn(values, scalars, builder)`` when ``fn.uses_builder``). ``op`` names ``fn``
    together with the dtypes, as for ``kernels.elementwise``."""

    __slots__ = ("op", "fn", "inputs", "dtype", "scalars", "shape")

    def __init__(self, op: str, fn, inputs: tuple[JitTensor, ...], dtype: DType,
                 scalars: tuple[tuple[object, DType], ...], shape: tuple[int, ...]):
        self.op = op
        self.fn = fn
        self.inputs = inputs
        self.dtype = dtype
        self.scalars = scalars
        self.shape = shape


class LazyTensor(JitTensor):
    """A plain (row-major, offset 0) ``JitTensor`` whose buffer is computed on first use."""

    __slots__ = ("node", "__weakref__")

    def __init__(self, node: Node, device: Device, runtime: Runtime):
        super().__init__(None, node.shape, node.dtype, device, runtime)
        self.node = node

    @property
    def buffer(self):
        buffer = _BUFFER.__get__(self)
        if buffer is None:
            materialize(self)
            buffer = _BUFFER.__get__(self)
        return buffer

    @buffer.setter
    def buffer(self, value) -> None:
        _BUFFER.__set__(self, value)

    def __repr__(self) -> str:
        state = "pending" if pending(self) else "computed"
        return f"LazyTensor({self.node.op if self.node else ''}, shape={self.shape}, " \
               f"dtype={self.dtype}, {state})"


def pending(x: JitTensor) -> bool:
    """Whether ``x`` is a lazy tensor that has not been computed yet."""
    return type(x) is LazyTensor and _BUFFER.__get__(x) is None


# -- recording -----------------------------------------------------------------------------------


def recording() -> bool:
    """Whether elementwise ops record instead of launching in this thread."""
    return getattr(_state, "depth", 0) > 0


def begin() -> None:
    """Start recording in this thread (calls nest; ``end()`` closes one)."""
    _state.depth = getattr(_state, "depth", 0) + 1


def end() -> None:
    _state.depth -= 1


def suspend() -> int:
    """Stop recording in this thread until ``resume(depth)`` with what this returned."""
    depth = getattr(_state, "depth", 0)
    _state.depth = 0
    return depth


def resume(depth: int) -> None:
    _state.depth = depth


def record(op: str, fn, inputs: Sequence[JitTensor], dtype: DType,
           scalars: Sequence[tuple[object, DType]], shape: tuple[int, ...],
           runtime: Runtime, device: Device) -> LazyTensor:
    """A lazy tensor for ``elementwise(op, fn, inputs, dtype, scalars, shape)``."""
    out = LazyTensor(Node(op, fn, tuple(inputs), dtype, tuple(scalars), shape), device, runtime)
    stream = runtime.lazy_stream
    stream.append(weakref.ref(out))
    if len(stream) >= STREAM_LIMIT:
        flush(runtime)
    return out


# -- executing the stream ------------------------------------------------------------------------


def materialize(x: LazyTensor) -> None:
    """Compute ``x`` (and with it everything pending on its device that is referenced)."""
    with x.runtime._lock:
        if pending(x):
            flush(x.runtime, x)


def flush(runtime: Runtime, first: LazyTensor | None = None) -> None:
    """Compute every pending tensor of ``runtime`` that something outside the stream still
    references (and ``first``), in fused kernels; forget the rest of the stream."""
    from burnish.jit.kernels.fused import run_groups

    with runtime._lock:
        live = []
        for ref in runtime.lazy_stream:
            t = ref()
            if t is not None and _BUFFER.__get__(t) is None:
                live.append(t)
            del t
        runtime.lazy_stream = []
        if first is not None and not any(t is first for t in live):
            live.append(first)
        if not live:
            return
        targets = _referenced(live, first)
        del live
        run_groups(runtime, _groups(targets))
        # What stayed lazy (a reference count guessed wrong) computes itself on demand.


# References to a pending tensor that ``_referenced`` itself holds: the ``live`` list, the
# loop variable and ``getrefcount``'s argument (CPython 3.11-3.13; see test_lazy.py).
_OWN_REFERENCES = 3


def _referenced(live: list[LazyTensor], first: LazyTensor | None) -> list[LazyTensor]:
    """The tensors of ``live`` referenced from outside the stream, in recording order."""
    inside = _references_inside(live)
    out = []
    for t in live:
        outside = sys.getrefcount(t) - _OWN_REFERENCES - inside.get(id(t), 0)
        if outside > 0 or t is first:
            out.append(t)
    return out


def _references_inside(live: list[LazyTensor]) -> dict[int, int]:
    """How many inputs of the ops of ``live`` are each lazy tensor, by id (a function of its
    own, so that no loop variable outlives it holding a reference)."""
    inside: dict[int, int] = {}
    for t in live:
        for x in t.node.inputs:
            if type(x) is LazyTensor:
                inside[id(x)] = inside.get(id(x), 0) + 1
    return inside


def _groups(targets: list[LazyTensor]) -> list[list[LazyTensor]]:
    """``targets`` split into kernels: one shape per kernel, each kernel after those computing
    the targets it reads (targets of another shape are inputs to it, read from memory)."""
    target_ids = {id(t) for t in targets}
    groups: list[list[LazyTensor]] = []
    where: dict[int, int] = {}
    for t in targets:
        after = max((where[id(d)] for d in _target_inputs(t, target_ids) if d.shape != t.shape),
                    default=-1)
        at = next((g for g in range(len(groups) - 1, after, -1)
                   if groups[g][0].shape == t.shape), None)
        if at is None:
            groups.append([])
            at = len(groups) - 1
        groups[at].append(t)
        where[id(t)] = at
    return groups


def _target_inputs(t: LazyTensor, target_ids: set[int]) -> list[LazyTensor]:
    """The targets ``t`` reads, directly or through pending tensors that are not targets."""
    found, seen, todo = [], set(), list(t.node.inputs)
    while todo:
        x = todo.pop()
        if id(x) in seen or not pending(x):
            continue
        seen.add(id(x))
        if id(x) in target_ids:
            found.append(x)
        else:
            todo.extend(x.node.inputs)
    return found
