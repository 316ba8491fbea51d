"""Lazy elementwise ops: what ``burnish.fusion`` records instead of launching.

While ``recording()`` is active (``burnish.fusion`` turns it on around every op it forwards to
a GPU backend), ``kernels.elementwise`` does not launch: it returns a ``LazyTensor`` holding a
``Node`` (the op's expression builder, its inputs and scalars); so does ``kernels.matmul`` for
the products the runtime lets fusion take (``PRODUCT``), ``kernels.reduce`` for a reduction
of a pending tensor (a ``Reduction``), a view of a pending tensor (``ALIAS``), and
``kernels.optim`` defers its updates (``defer_update``). Nothing runs until something needs
the tensor's buffer: a read, a kernel that is not recorded (a softmax, a convolution), a sync,
or the pending stream growing past ``STREAM_LIMIT``. Then the stream of the tensor's device is
flushed (``flush``): every pending tensor that something outside the stream still references
(a ``Tensor``, a saved autodiff value, a local variable) becomes an output, the pending
tensors nobody else references are intermediates that only ever live in registers, and each
group of outputs of one shape is one generated kernel (``kernels.fused``): a product's kernel
for a group that holds one (the ops after it as its epilogue), a reduction's for a reduction
(the ops before it, that nothing else references, as its prologue).

Which pending tensors are referenced from outside is told by CPython's reference counts. A
wrong guess costs speed, never correctness: a tensor that stays lazy keeps its node and
inputs, and computes itself whenever its buffer is asked for.

A training loop flushes the same streams step after step. While recording, each op adds its
structure to the stream's ``signature`` (op, dtypes, shape, and per input: the position of a
pending input in the stream, or the layout of a computed one and which distinct buffer it
reads); a flush whose signature and reference pattern were seen before replays the launches
planned then (``kernels.fused.Launch``) with this stream's buffers and scalars, instead of
grouping and planning again.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from burnish.device import Device
from burnish.dtype import DType
from burnish.jit.runtime import Runtime
from burnish.jit.tensor import JitTensor, contiguous_strides

#: Pending lazy tensors per device beyond which the stream is flushed while recording.
STREAM_LIMIT = 128
#: Flushes of distinct structure whose launches a runtime remembers (then it starts over).
PLAN_LIMIT = 1024

#: How many times a recorded op that was flushed alone is predicted to be alone again and run
#: at once instead (see ``record``), before it is recorded once more to check. A lone op gains
#: nothing from fusion and costs a recording and a flush more than running it; training loops
#: have several (an elementwise op between two matrix products). The prediction is keyed by
#: the op's structure and the flush that came before it, so the same op elsewhere in a program
#: still fuses; a wrong one only costs the fusion of that op with what follows it. While a
#: capture records, the predictions are neither learnt nor counted down.
LONE_TRUST = 64

# The slot that holds a JitTensor's buffer: a LazyTensor leaves it unset until computed.
_BUFFER = JitTensor.__dict__["buffer"]
_new = object.__new__


class _Recording(threading.local):
    depth = 0  # per thread: begin() calls not yet ended


_state = _Recording()
#: This thread's recording state: ``RECORDING.depth > 0`` is ``recording()`` without the call
#: (for the per-op paths).
RECORDING = _state


class _Product:
    """``PRODUCT``'s type."""

    def __repr__(self) -> str:
        return "PRODUCT"


#: A recorded matrix product's ``fn`` (``kernels.matmul``): its inputs ``a`` and ``b`` are read
#: from memory, so they are always computed first (a pending one becomes a flush's target), and
#: the product is always one too: a kernel of its own, into which the elementwise ops after it
#: of its shape are fused (``kernels.fused``).
PRODUCT = _Product()


class _Alias:
    """``ALIAS``'s type."""

    def __repr__(self) -> str:
        return "ALIAS"


#: A recorded view's ``fn`` (``LazyTensor.view``; its ``op`` holds the view's strides and
#: offset): the flush computes the input (a target) and the alias then shares its buffer, with
#: no kernel. Ops that read an alias read it from memory, through its strides.
ALIAS = _Alias()


class Reduction:
    """A recorded reduction's ``fn`` (``kernels.reduce``): ``op`` over ``dim`` of its one input.
    Like a product it is always a flush target in a kernel of its own; unlike a product it reads
    a pending input in registers: the elementwise ops that make it are evaluated as the kernel
    reads each element (a prologue), unless the input is a target itself."""

    __slots__ = ("op", "dim", "name")

    def __init__(self, op: str, dim: int | None):
        self.op, self.dim = op, dim
        self.name = f"{op}/{dim}"  # the recorded op's name

    def __repr__(self) -> str:
        return f"Reduction({self.op!r}, {self.dim})"


class Node:
    """One recorded op: elementwise, ``fn(values, scalars)`` over ``inputs`` broadcast to
    ``shape`` (``fn(values, scalars, builder)`` when ``fn.uses_builder``); a matrix product of
    its two inputs (``fn is PRODUCT``); a reduction of its one input (a ``Reduction``); or a
    view of it (``fn is ALIAS``). ``op`` names ``fn`` together with the dtypes, as for
    ``kernels.elementwise`` (a view's: its strides and offset). Only ``record`` makes them,
    setting the six fields without an ``__init__`` call."""

    __slots__ = ("op", "fn", "inputs", "dtype", "scalars", "shape")
    op: Any
    fn: Any
    inputs: tuple
    dtype: DType
    scalars: tuple
    shape: tuple[int, ...]


class Stream:
    """The ops recorded on one device since its last flush: weak references to their lazy
    tensors in order, the structure of each (see ``record``), and the distinct buffers that
    their computed inputs read, by slot."""

    __slots__ = ("refs", "signature", "uses", "buffers", "slots")

    def __init__(self) -> None:
        self.refs: list[weakref.ref] = []
        self.signature: list[tuple] = []
        self.uses: list[int] = []  # per tensor: how many recorded ops read it
        self.buffers: list = []
        self.slots: dict[tuple, int] = {}  # (id(buffer), dtype) -> index into buffers

    def close(self) -> None:
        """Let go of what the stream holds (its tensors keep a reference to it)."""
        self.refs = self.signature = self.uses = self.buffers = self.slots = None


class LazyTensor(JitTensor):
    """A plain (row-major, offset 0) ``JitTensor`` whose buffer is computed on first use (an
    ``ALIAS``, a recorded view, has the view's layout instead);
    ``stream`` and ``pos`` say where it was recorded. Only ``record`` makes them: it sets
    JitTensor's fields but ``buffer``, which stays unset while pending, so that reading it (a
    plain slot read once computed) reaches ``__getattr__``."""

    __slots__ = ("node", "stream", "pos", "__weakref__")
    node: Any  # a Node or an Update while pending, then None
    stream: Any
    pos: int

    def __getattr__(self, name: str):
        if name != "buffer":
            raise AttributeError(f"'LazyTensor' object has no attribute {name!r}")
        flush(self.runtime, self)  # unset buffer: pending (``flush`` checks again, locked)
        return _BUFFER.__get__(self)

    def view(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> JitTensor:
        """As ``JitTensor.view``; while recording, a view of a pending tensor (a reshape,
        permute, expand, slice or flip) is recorded as an ``ALIAS`` of it rather than computing
        it first."""
        if self.node is not None and _state.depth and self.stream is self.runtime.lazy_stream:
            alias = record(("view", strides, offset), ALIAS, (self,), self.dtype, (), shape,
                           self.runtime, self.device)
            if alias is not None:
                alias.strides, alias.offset = strides, offset
                return alias
        return JitTensor.view(self, shape, strides, offset)

    def __repr__(self) -> str:
        state = "pending" if pending(self) else "computed"
        return f"LazyTensor({self.node.op if self.node else ''}, shape={self.shape}, " \
               f"dtype={self.dtype}, {state})"


def pending(x: JitTensor) -> bool:
    """Whether ``x`` is a lazy tensor that has not been computed yet (computing it sets its
    buffer and lets go of its node)."""
    return type(x) is LazyTensor and x.node is not None


# -- recording -----------------------------------------------------------------------------------


def recording() -> bool:
    """Whether elementwise ops record instead of launching in this thread."""
    return _state.depth > 0


def begin() -> None:
    """Start recording in this thread (calls nest; ``end()`` closes one)."""
    _state.depth += 1


def end() -> None:
    _state.depth -= 1


def suspend() -> int:
    """Stop recording in this thread until ``resume(depth)`` with what this returned."""
    depth = _state.depth
    _state.depth = 0
    return depth


def resume(depth: int) -> None:
    _state.depth = depth


def record(op: str, fn, inputs: Sequence[JitTensor], dtype: DType,
           scalars: Sequence[tuple[object, DType]], shape: tuple[int, ...],
           runtime: Runtime, device: Device) -> LazyTensor | None:
    """A lazy tensor for ``elementwise(op, fn, inputs, dtype, scalars, shape)``, or ``None``
    where the op is predicted to be flushed alone (see ``LONE_TRUST``): the caller runs it
    at once. Every recorded elementwise op passes here, so it builds its objects without
    ``__init__`` calls."""
    stream = runtime.lazy_stream
    slots = stream.slots
    structure = []
    memory = fn is PRODUCT or fn is ALIAS  # reads its inputs from memory
    for x in inputs:
        if type(x) is LazyTensor:
            if x.stream is stream:  # recorded since the last flush: pending
                pos = x.pos
                if memory or x.node.fn is ALIAS:  # read from memory: its reference makes x
                    structure.append((pos,))  # a target
                    continue
                structure.append(pos)
                stream.uses[pos] += 1
                continue
            if x.node is not None:  # pending from an earlier stream
                _compute_stale(inputs, runtime)
                return record(op, fn, inputs, dtype, scalars, shape, runtime, device)
        buffer = x.buffer
        key = (id(buffer), x.dtype)
        slot = slots.get(key)
        if slot is None:
            slot = slots[key] = len(stream.buffers)
            stream.buffers.append(buffer)  # held until the flush: its id stays its own
        structure.append((slot, x.dtype, x.shape, x.strides, x.offset))
    entry = (op, dtype, shape, tuple([d for _, d in scalars]) if scalars else (),
             tuple(structure))
    refs = stream.refs
    if not refs and runtime.lazy_lone:
        lone = (runtime.lazy_context, entry)
        trust = runtime.lazy_lone.get(lone)
        if trust is not None:
            # While a capture records, the predictions stand still: the two recordings of a
            # call must launch the same kernels, and a count that ran out in one of them would
            # fuse an op there that the other ran alone.
            if runtime.pool.recorder is None:
                if trust > 1:
                    runtime.lazy_lone[lone] = trust - 1
                else:  # recorded next time, to check the prediction still holds
                    del runtime.lazy_lone[lone]
            slots.clear()
            stream.buffers.clear()
            return None
    stream.signature.append(entry)
    node = _new(Node)
    node.op, node.fn, node.inputs, node.dtype, node.scalars, node.shape = (
        op, fn, tuple(inputs), dtype, tuple(scalars), shape)
    out = _new(LazyTensor)  # every field but ``buffer`` (see the class)
    out.shape, out.strides, out.offset, out.dtype = shape, contiguous_strides(shape), 0, dtype
    out.device, out.runtime, out.node, out.stream, out.pos = (device, runtime, node, stream,
                                                               len(refs))
    refs.append(weakref.ref(out))
    # -1: a product, an alias or a reduction is a target, read or not
    stream.uses.append(-1 if memory or type(fn) is Reduction else 0)
    if len(refs) >= STREAM_LIMIT:
        flush(runtime)
    return out


def _compute_stale(inputs: Sequence[JitTensor], runtime: Runtime) -> None:
    """Compute the inputs still pending from an earlier stream (a reference count guessed
    wrong), so that every pending input of a recorded op is in the current stream."""
    while True:
        stale = [x for x in inputs if type(x) is LazyTensor and pending(x)
                 and x.stream is not runtime.lazy_stream]
        if not stale:
            return
        materialize(stale[0])  # may flush the current stream: look again


# -- executing the stream ------------------------------------------------------------------------


def materialize(x: LazyTensor) -> None:
    """Compute ``x`` (and with it everything pending on its device that is referenced)."""
    if type(x) is LazyTensor and x.node is not None:
        flush(x.runtime, x)  # which checks again, under the runtime's lock


def flush(runtime: Runtime, first: LazyTensor | None = None) -> None:
    """Compute the deferred updates of ``runtime`` and every pending tensor that something
    outside the stream still references (and ``first``), in fused kernels; forget the rest of
    the stream."""
    with runtime._lock:
        if runtime.lazy_updates:
            _run_updates(runtime)
        stream = runtime.lazy_stream
        if first is None:
            if not stream.refs:
                return
        elif first.node is None:  # computed meanwhile, by another thread's flush
            return
        runtime.lazy_stream = Stream()
        try:
            _flush(runtime, stream, first)
        finally:
            stream.close()


def _flush(runtime: Runtime, stream: Stream, first: LazyTensor | None) -> None:
    global _fused
    if _fused is None:  # kernels.fused imports this module: bound on first use
        from burnish.jit.kernels import fused as _fused
    live = [ref() for ref in stream.refs]  # pending, every one (None: collected)
    if first is not None and first.stream is not stream:  # pending from an earlier stream
        live.append(first)  # planned afresh
        stream.uses.append(0)
        referenced = _referenced(live, first, stream)
        targets = [t for t, state in zip(live, referenced) if state == TARGET]
        del live
        _fused.run_groups(runtime, _groups(targets))
        runtime.lazy_context = None
        return
    referenced = _referenced(live, first, stream)
    if TARGET not in referenced:
        return
    plans = runtime.lazy_plans
    key = (tuple(stream.signature), tuple(referenced))
    launches = plans.get(key)
    if launches is not None:
        _fused.replay(runtime, launches, live, stream.buffers)
    else:
        targets = [t for t, state in zip(live, referenced) if state == TARGET]
        launches = _fused.run_groups(runtime, _groups(targets), stream)
        if len(plans) >= PLAN_LIMIT:
            plans.clear()
            runtime.lazy_lone.clear()  # keyed by the ids of plans
        plans[key] = launches
        # What stayed lazy (a reference count guessed wrong) computes itself on demand.
    if len(live) == 1 and runtime.pool.recorder is None:
        # A lone op: run at once next time it comes after the same flush (not learnt while a
        # capture records, for the same reason as in ``record``).
        lone = runtime.lazy_lone
        if len(lone) >= PLAN_LIMIT:
            lone.clear()
        lone[(runtime.lazy_context, stream.signature[0])] = LONE_TRUST
    runtime.lazy_context = id(launches)


_fused = None


# -- deferred optimizer updates ------------------------------------------------------------------

#: Deferred updates per device beyond which they are computed while recording.
UPDATE_LIMIT = 256


class Update:
    """One deferred optimizer update (``kernels.optim``): its computed, plain inputs, its
    scalars, and the lazy tensors of its results (whose ``node`` it is while they are pending),
    computed by the next flush of the device (any read of one of them flushes)."""

    __slots__ = ("op", "inputs", "scalars", "shape", "dtype", "outs")
    op: str
    inputs: list
    scalars: tuple
    shape: tuple[int, ...]
    dtype: DType
    outs: tuple


def defer_update(inputs: list[JitTensor], scalars: tuple, shape: tuple[int, ...], dtype: DType,
                 device: Device, runtime: Runtime) -> tuple[LazyTensor, ...]:
    """Lazy tensors for the results of the optimizer update ``kernels.optim.adam_step`` of
    ``inputs`` (value, grad and moments), computed with the device's other deferred updates."""
    for x in inputs:
        if type(x) is LazyTensor and x.node is not None:
            flush(runtime, x)  # an update reads memory: its inputs exist before it is deferred
    update = _new(Update)
    update.op, update.inputs, update.scalars, update.shape, update.dtype = (
        "adam_step", inputs, scalars, shape, dtype)
    strides = contiguous_strides(shape)
    outs = []
    for _ in range(3):
        out = _new(LazyTensor)
        out.shape, out.strides, out.offset, out.dtype = shape, strides, 0, dtype
        out.device, out.runtime, out.node, out.stream, out.pos = (device, runtime, update, None,
                                                                   0)
        outs.append(out)
    update.outs = tuple(outs)
    with runtime._lock:  # not lost to a flush of another thread taking the list
        runtime.lazy_updates.append(update)
    if len(runtime.lazy_updates) >= UPDATE_LIMIT:
        flush(runtime)
    return update.outs


def _run_updates(runtime: Runtime) -> None:
    global _optim
    if _optim is None:  # kernels.optim imports this module: bound on first use
        from burnish.jit.kernels import optim as _optim
    updates, runtime.lazy_updates = runtime.lazy_updates, []
    depth = suspend()
    try:
        _optim.run_updates(runtime, updates)
    finally:
        resume(depth)


_optim = None

# What ``_referenced`` says of each recorded tensor.
GONE, INSIDE, TARGET = 0, 1, 2
# References to a pending tensor that ``_referenced`` itself holds: the ``live`` list, the
# loop variable and ``getrefcount``'s argument (CPython 3.11-3.13; the GELU test of
# burnish-fusion's test_launches.py fails if that changes).
_OWN_REFERENCES = 3


def _referenced(live: list[LazyTensor | None], first: LazyTensor | None,
                stream: Stream) -> list[int]:
    """Per tensor of ``live`` (``None``: collected): ``TARGET`` where something outside the
    stream references it (or it is ``first``), ``INSIDE`` where only ops of the stream read
    it, ``GONE`` for ``None``."""
    uses = stream.uses
    if None in live:  # what collected ops read is not referenced by them any more
        uses = list(uses)
        for t, structure in zip(live, stream.signature):
            if t is None:
                for x in structure[4]:  # positions of pending inputs, layouts of the rest
                    if type(x) is int:
                        uses[x] -= 1
    out = []
    for j in range(len(live)):  # not zip or enumerate: their reused tuple holds a reference
        t = live[j]
        if t is None:
            out.append(GONE)
        elif t is first or sys.getrefcount(t) - _OWN_REFERENCES - uses[j] > 0:
            out.append(TARGET)
        else:
            out.append(INSIDE)
    return out


def _groups(targets: list[LazyTensor]) -> list[list[LazyTensor]]:
    """``targets`` split into kernels: one shape per kernel, each kernel after those computing
    the targets it reads (targets of another shape are inputs to it, read from memory). A
    product starts a kernel; the elementwise targets of its shape after it join that kernel. A
    reduction or an alias is a kernel of its own (none, for an alias) that nothing joins."""
    target_ids = {id(t) for t in targets}
    groups: list[list[LazyTensor]] = []
    where: dict[int, int] = {}
    for t in targets:
        if t.node.fn is PRODUCT or _sealed(t):
            groups.append([t])  # a kernel of its own, after the targets it reads (all of them)
            where[id(t)] = len(groups) - 1
            continue
        # After the groups of the targets it reads from memory: those of other shapes, and
        # reductions and aliases (a product's elementwise readers of its shape join its kernel).
        after = max((where[id(d)] for d in _target_inputs(t, target_ids)
                     if d.shape != t.shape or _sealed(d)), default=-1)
        at = next((g for g in range(len(groups) - 1, after, -1)
                   if groups[g][0].shape == t.shape and not _sealed(groups[g][0])), None)
        if at is None:
            groups.append([])
            at = len(groups) - 1
        groups[at].append(t)
        where[id(t)] = at
    return groups


def _sealed(t: LazyTensor) -> bool:
    """Whether ``t`` is a reduction or an alias: a group of its own that no other op joins."""
    return t.node.fn is ALIAS or type(t.node.fn) is Reduction


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
