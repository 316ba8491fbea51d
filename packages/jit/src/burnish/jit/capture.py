"""Capture and replay on ``burnish.jit``'s runtimes: a recorder of the commands a function
enqueues (launches, copies, host writes, library calls), and the record that replays them.

``burnish.capture`` (core) decides when to record and when to replay; this module is what it
asks of a GPU backend (``JitBase.capturer``). While a call is recorded, the runtime's methods
that enqueue work are wrapped on the instance (``Recorder.install``): the kernels never know.
At the end the record works out the role of every buffer the commands touched:

- **inputs**: the buffers of the function's tensor arguments. The record keeps them as its own;
  a later call copies its arguments in (skipped when an argument already lies there).
- **outputs**: buffers made during the call that the returned tensors view. Each replay writes
  them again and returns new tensors over them.
- **internal**: buffers made and dropped during the call: the step's working memory. The
  record packs them, with the outputs, into less memory (``_share_memory``: one arena where
  handles can point into a buffer) at its first replay, once that replay's arguments have been
  copied in: the last recorded call's results (a model's new parameters) are free by then, so
  the arena is not taken while they are still in use.
- **state**: buffers that existed before the call and are not arguments (a module in a
  closure, an optimizer's moments updated in place), and buffers made during the call that
  something still holds afterwards (state stored by the function). Replays read and write them
  where they are; if whoever held one lets it go, the record is stale and is dropped.

A tensor a caller still holds is never overwritten by a replay: before a replay writes an input
or output buffer that some tensor from an earlier call still views, that tensor is moved to a
copy (``_Slot.evict``). In the usual loop (``model = step(model, batch)``) the arguments are the
last replay's outputs: each is copied into its input buffer and its tensor moved there, so a
step costs one device copy per carried tensor and no host work per op.
"""

from __future__ import annotations

import bisect
import gc
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from burnish.errors import CaptureError
from burnish.jit import lazy
from burnish.jit.runtime import DeviceBuffer, Runtime
from burnish.jit.tensor import JitTensor
from burnish.replay import caller_line as where

_new = object.__new__

#: The methods of a runtime that a recorder wraps while it records.
_WRAPPED = ("dispatch", "write", "copy", "read", "call")


class Recorder:
    """What a runtime enqueues while a captured call runs, in order, with where each command
    came from; every command also runs as usual (the recorded call is an ordinary eager call).

    Commands are tuples: ``("launch", compiled, handles, info, groups)``,
    ``("write", handle, offset, data)``, ``("copy", src, src_offset, dst, dst_offset, nbytes)``
    and ``("call", fn, args, key, handles)`` (a vendor library's work, ``Runtime.call``;
    ``handles``: the buffers it reads and writes).
    """

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.thread = threading.get_ident()  # the thread whose calls are recorded
        self.commands: list[tuple] = []
        self.locations: list[str] = []
        #: id(handle) -> [handle, first use ("r" or "w"), made during the call]
        self.first: dict[int, list] = {}
        #: ids of the handles the pool gave out during the call
        self.allocated: set[int] = set()
        #: id(handle) -> the command indices at which the pool gave it out (``JitRecord``)
        self.births: dict[int, list[int]] = {}
        #: The bytes each of those allocations asked for (the pool hands out more: size
        #: classes), in the same order.
        self.asked: dict[int, list[int]] = {}
        #: ids of handles that held a value from before the call and were given out again
        self.consumed: dict[int, str] = {}
        #: ids of handles some launch or copy wrote
        self.written: set[int] = set()
        self.host_read: str | None = None
        #: Why the call cannot be replayed, said by work that a record cannot hold (``refuse``)
        self.refused: str | None = None
        self._writable: dict[int, tuple[bool, ...]] = {}
        self._names: dict[int, str] = {}

    # -- installing ---------------------------------------------------------------------------

    def install(self) -> None:
        """Wrap the runtime's methods: calls from this thread are recorded, calls from other
        threads (a data loader's) go straight through."""
        runtime, cls, thread = self.runtime, type(self.runtime), self.thread
        for name in _WRAPPED:
            runtime.__dict__[name] = _this_thread(getattr(self, name),
                                                  getattr(cls, name).__get__(runtime), thread)
        runtime.pool.recorder = self

    def uninstall(self) -> None:
        runtime = self.runtime
        for name in _WRAPPED:
            runtime.__dict__.pop(name, None)
        runtime.pool.recorder = None

    # -- what the runtime and its pool report -----------------------------------------------

    def allocated_handle(self, handle: Any, nbytes: int) -> None:
        if threading.get_ident() != self.thread:
            return
        key = id(handle)
        entry = self.first.get(key)
        if entry is not None and not entry[2] and entry[1] == "r":
            self.consumed.setdefault(key, self.locations[-1] if self.locations else where())
        self.allocated.add(key)
        self.births.setdefault(key, []).append(len(self.commands))
        self.asked.setdefault(key, []).append(nbytes)

    def _touch(self, handle: Any, use: str) -> None:
        key = id(handle)
        if key not in self.first:
            self.first[key] = [handle, use, key in self.allocated]

    def dispatch(self, compiled: Any, handles: Sequence[Any], info: np.ndarray,
                 groups: tuple[int, int, int]) -> None:
        writable = self._writable.get(id(compiled))
        if writable is None:
            writable = self._kernel_writes(compiled)
        for handle, writes in zip(handles, writable):
            self._touch(handle, "r")  # a written binding may be read first (in-place kernels)
            if writes:
                self.written.add(id(handle))
        self.commands.append(("launch", compiled, tuple(handles), np.array(info, np.int32),
                              groups))
        self.locations.append(where())
        type(self.runtime).dispatch(self.runtime, compiled, handles, info, groups)

    def write(self, handle: Any, offset: int, data: np.ndarray) -> None:
        self._touch(handle, "w")
        self.written.add(id(handle))
        self.commands.append(("write", handle, offset, np.array(data, copy=True)))
        self.locations.append(where())
        type(self.runtime).write(self.runtime, handle, offset, data)

    def copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        self._touch(src, "r")
        self._touch(dst, "w")
        self.written.add(id(dst))
        self.commands.append(("copy", src, src_offset, dst, dst_offset, nbytes))
        self.locations.append(where())
        type(self.runtime).copy(self.runtime, src, src_offset, dst, dst_offset, nbytes)

    def call(self, fn: Callable[..., None], args: tuple, reads: Sequence[Any],
             writes: Sequence[Any], key: Any = None) -> None:
        for handle in reads:
            self._touch(handle, "r")
        for handle in writes:
            self._touch(handle, "r")
            self.written.add(id(handle))
        self.commands.append(("call", fn, args, key, (*reads, *writes)))
        self.locations.append(where())
        fn(*args)

    def read(self, items: Sequence[tuple[Any, int, int]]) -> list[bytes]:
        if self.host_read is None:
            self.host_read = where()
        return type(self.runtime).read(self.runtime, items)

    def refuse(self, reason: str) -> None:
        """Mark the call as one a replay cannot repeat (``reason``: what it did, and where);
        work that bypasses the runtime's recorded methods says so here."""
        if self.refused is None and threading.get_ident() == self.thread:
            self.refused = f"{reason} at {where()}"

    def problem(self) -> str | None:
        """Why what was recorded cannot be replayed, whatever another recording says."""
        if self.refused is not None:
            return self.refused
        if self.host_read is not None:
            return f"it reads tensor values on the host at {self.host_read}"
        if self.consumed:
            line = next(iter(self.consumed.values()))
            return (f"it replaces a tensor it reads without holding it where capture can see "
                    f"it (at {line}): pass that state in as an argument, or keep it in an "
                    f"object the function holds")
        return None

    # -- kernels --------------------------------------------------------------------------------

    def _kernel_writes(self, compiled: Any) -> tuple[bool, ...]:
        for entry in self.runtime._kernels.values():
            self._writable[id(entry[0])] = tuple(b.writable for b in entry[1].buffers)
            self._names[id(entry[0])] = entry[1].name
        return self._writable.get(id(compiled), ())

    def name_of(self, compiled: Any) -> str:
        if id(compiled) not in self._names:
            self._kernel_writes(compiled)
        return self._names.get(id(compiled), "a kernel")


def _this_thread(recording: Callable, plain: Callable, thread: int) -> Callable:
    """``recording`` when called from ``thread``, else ``plain``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == thread:
            return recording(*args, **kwargs)
        return plain(*args, **kwargs)

    return call


def same_work(a: Recorder, b: Recorder) -> str | None:
    """Where two recordings of one call signature enqueue different work (``None``: they do
    the same): a value computed on the host that changed between the calls (a step count, a
    seed, a learning rate kept in Python) would be frozen by a replay."""
    if len(a.commands) != len(b.commands):
        return (f"the calls enqueue different numbers of commands ({len(a.commands)} then "
                f"{len(b.commands)})")
    for i, (x, y) in enumerate(zip(a.commands, b.commands)):
        kind = x[0]
        if kind != y[0]:
            return f"the calls enqueue different work at {b.locations[i]}"
        if kind == "launch":
            if x[1] is not y[1] or x[4] != y[4]:
                return (f"the calls launch different kernels at {b.locations[i]} "
                        f"({a.name_of(x[1])}, then {b.name_of(y[1])})")
            if not np.array_equal(x[3], y[3]):
                return (f"kernel {b.name_of(y[1])}, launched at {b.locations[i]}, is given "
                        f"other values on each call (a number computed on the host changed)")
        elif kind == "write":
            if x[2] != y[2] or not np.array_equal(x[3], y[3]):
                return f"the values written to the device at {b.locations[i]} change on each call"
        elif kind == "copy":
            if x[2] != y[2] or x[4] != y[4] or x[5] != y[5]:
                return f"the copies at {b.locations[i]} differ between calls"
        elif x[1] != y[1] or x[3] != y[3]:  # bound methods are equal, not identical
            return f"the library calls at {b.locations[i]} differ between calls"
    return None


class _Slot:
    """A buffer the record owns (``holder``: a pooled ``DeviceBuffer`` that only the record
    references), and the ``DeviceBuffer`` some caller's tensors view it through (``viewer``,
    held weakly, its ``pool`` None so that it never frees the record's memory)."""

    __slots__ = ("holder", "viewer")

    def __init__(self, holder: DeviceBuffer, viewer: DeviceBuffer | None = None):
        self.holder = holder
        self.viewer = None if viewer is None else weakref.ref(viewer)

    @property
    def handle(self) -> Any:
        return self.holder.handle

    def viewing(self) -> DeviceBuffer | None:
        return None if self.viewer is None else self.viewer()

    def evict(self, runtime: Runtime) -> None:
        """Move the tensors that still view this buffer to a copy of it, so that the record can
        overwrite it."""
        viewer = self.viewing()
        self.viewer = None
        if viewer is not None:
            moved = runtime.pool.alloc(self.holder.nbytes)
            type(runtime).copy(runtime, self.holder.handle, 0, moved.handle, 0,
                               self.holder.nbytes)
            _repoint(viewer, moved)


def _adopt(buffer: DeviceBuffer) -> _Slot:
    """A slot over ``buffer``'s memory: the record takes ownership, and ``buffer`` (whatever
    views it) becomes the slot's viewer."""
    holder = _new(DeviceBuffer)
    holder.pool, holder.handle, holder.nbytes = buffer.pool, buffer.handle, buffer.nbytes
    buffer.pool = None
    return _Slot(holder, buffer)


def _repoint(viewer: DeviceBuffer, to: DeviceBuffer) -> None:
    """``viewer`` takes over ``to``'s memory (and its ownership); ``to`` is left empty."""
    viewer.handle, viewer.nbytes, viewer.pool = to.handle, to.nbytes, to.pool
    to.pool = None


def _owners(handles: list[Any]) -> dict[int, DeviceBuffer]:
    """The ``DeviceBuffer`` objects that hold ``handles`` (one scan of the live objects; only
    while a record is made)."""
    if not handles:
        return {}
    wanted = {id(h) for h in handles}
    found: dict[int, DeviceBuffer] = {}
    for referrer in gc.get_referrers(*handles):
        if type(referrer) is DeviceBuffer and id(referrer.handle) in wanted:
            if referrer.pool is not None or id(referrer.handle) not in found:
                found[id(referrer.handle)] = referrer
    return found


#: ``_Output.slots`` of a result that views an argument: it views the new call's argument.
_ARGUMENT: dict = {}


class _Output:
    """How a replay makes one returned tensor: a view of one of the record's slots (``slots``:
    its inputs, for state updated in place, or its outputs), a view of the new call's argument
    number ``slot`` (``slots`` is ``_ARGUMENT``: a reshape of an argument), or (``slots`` None)
    a fresh copy of ``slot``, a buffer the record does not own (state returned as it is)."""

    __slots__ = ("slots", "slot", "shape", "strides", "offset", "dtype")

    def __init__(self, slots: dict | None, slot: Any, x: JitTensor):
        self.slots, self.slot = slots, slot
        self.shape, self.strides, self.offset, self.dtype = x.shape, x.strides, x.offset, x.dtype


class JitRecord:
    """One recorded call, replayed by the runtime's ``replayer`` (a CUDA graph on cuda, the
    prepared launches elsewhere)."""

    def __init__(self, runtime: Runtime, device: Any, recorder: Recorder,
                 inputs: list[JitTensor], outputs: list[JitTensor]):
        self.runtime = runtime
        self.device = device
        self.released = False
        pool = runtime.pool
        commands = recorder.commands
        first = recorder.first
        problem = recorder.problem()
        if problem is not None:
            raise CaptureError(problem)
        free_sizes = {id(h): size for size, bucket in pool._free.items() for h in bucket}

        # Inputs: the buffers of the arguments and of the state the function holds.
        self.inputs: dict[int, _Slot] = {}
        self.input_order: list[tuple[int, int, int]] = []  # (slot key, start byte, end byte)
        for x in inputs:
            key = id(x.buffer.handle)
            if key not in self.inputs:
                self.inputs[key] = _adopt(x.buffer)
            self.input_order.append((key, *_span(x)))
        #: Inputs the commands write (state updated in place).
        self.written = {key for key in self.inputs if key in recorder.written}

        # Outputs: buffers made during the call, or inputs updated in place; anything else is
        # copied out on each replay.
        self.outputs: dict[int, _Slot] = {}
        self.output_plan: list[_Output] = []
        first_input = {}
        for position, (key, _, _) in enumerate(self.input_order):
            first_input.setdefault(key, position)
        for x in outputs:
            key = id(x.buffer.handle)
            entry = first.get(key)
            if key in self.written:
                self.output_plan.append(_Output(self.inputs, key, x))
            elif key in self.inputs:  # a view of an argument: of the new call's argument
                self.output_plan.append(_Output(_ARGUMENT, first_input[key], x))
            elif entry is not None and entry[2] and key not in self.inputs:
                if key not in self.outputs:
                    self.outputs[key] = _adopt(x.buffer)
                self.output_plan.append(_Output(self.outputs, key, x))
            else:  # an input or state returned as it is: a copy, as eager code would share
                self.output_plan.append(_Output(None, x.buffer, x))

        # Everything else the commands touched: working memory (free in the pool until the
        # first replay packs it: ``prepare``) or state.
        self.internal: dict[int, int] = {}  # id(handle) -> its size in the pool
        watched: list[Any] = []
        for key, (handle, use, made_here) in first.items():
            if key in self.inputs or key in self.outputs:
                continue
            if key in free_sizes:
                if not made_here and use == "r":
                    raise CaptureError(
                        "it reads a tensor that it lets go of without receiving it as an "
                        "argument (state replaced out of place); pass that state in and return "
                        "its new value")
                self.internal[key] = free_sizes[key]
            else:
                watched.append(handle)
        owners = _owners(watched)
        self.state: list[weakref.ref] = []
        for handle in watched:
            owner = owners.get(id(handle))
            if owner is None:
                raise CaptureError("a buffer it uses is held by no tensor")
            self.state.append(weakref.ref(owner))
        del owners

        #: The memory the record's outputs and working buffers share (``_share_memory``).
        self.blocks: list[DeviceBuffer] = []
        #: The recorded commands; once ``prepare`` ran, relocated into ``blocks``.
        self.commands = commands
        self._births, self._asked = recorder.births, recorder.asked
        #: What runs the commands (``Runtime.replayer``), made by ``prepare``.
        self.replayer: Callable[[Sequence[tuple]], None] | None = None
        self._output_handles = {id(s.handle): key for key, s in self.outputs.items()}

    def prepare(self) -> None:
        """Pack the working memory and the outputs (``_share_memory``) and make the replayer;
        the first replay does this itself, after copying its arguments in. Results of the
        recorded call that a caller still holds keep their memory."""
        if self.replayer is not None or self.released:
            return
        self.commands = self._share_memory(self.commands, self._births, self._asked)
        self._births = self._asked = {}
        self._output_handles = {id(s.handle): key for key, s in self.outputs.items()}
        self.replayer = self.runtime.replayer(self.commands)

    def _share_memory(self, commands: list[tuple], births: dict[int, list[int]],
                      asked: dict[int, list[int]]) -> list[tuple]:
        """``commands`` with the record's working buffers and outputs packed into less memory.

        Each allocation the recorded call made (``births``: where each of the record's buffers
        was handed out, as command indices; the pool hands a freed buffer out again) is in use
        from its first command to its last, outputs to the end. Allocations whose uses do not
        overlap share one block of memory (a forward activation dead before the optimizer
        writes the new weights): greedy by size, the largest first, each into the smallest
        block none of whose allocations is in use at the same time, else a block of its own.
        The eager run could not do this: its pool reuses a freed buffer only for a request of
        the same size class, and only once it is freed, so a step's buffers add up to more
        than what is in use at any moment."""
        owned: dict[int, Any] = dict.fromkeys(self.internal)  # id(handle) -> output _Slot
        for slot in self.outputs.values():
            owned[id(slot.handle)] = slot
        nbytes = {key: self.internal.get(key) or _owner(holder).nbytes
                  for key, holder in owned.items()}
        # (handle id, allocation number) -> [first use, last use]
        spans: dict[tuple[int, int], list[int]] = {}
        uses: list[list[tuple[int, int]]] = []  # per command, the allocation of each handle
        for i, command in enumerate(commands):
            used = []
            for handle in _handles(command):
                key = id(handle)
                if key not in owned:
                    used.append(None)
                    continue
                generation = max(bisect.bisect_right(births.get(key, ()), i) - 1, 0)
                span = spans.setdefault((key, generation), [i, i])
                span[1] = i
                used.append((key, generation))
            uses.append(used)
        # Commands the runtime runs together: what the first reads is in use through the
        # second (which writes while the first still reads).
        for i in self.runtime.joined(commands):
            for span in spans.values():
                if span[1] == i:
                    span[1] = i + 1
        end = len(commands)
        for key in self.outputs:  # the call returns them: in use to the end
            generation = max(len(births.get(key, ())) - 1, 0)
            spans.setdefault((key, generation), [end, end])[1] = end
        # The recorded memory goes back to the pool (a result the caller still holds keeps its
        # buffer: it is the caller's now), then the packed memory is taken from it.
        runtime, free = self.runtime, {}
        for holder in owned.values():
            if holder is None:  # working memory: free in the pool already
                continue
            if isinstance(holder, _Slot):
                viewer, owner = holder.viewing(), holder.holder
                holder.viewer = None
                # Its memory is ``free``'s alone now (it goes back to the pool before the arena
                # is taken); the slot gets its new memory below.
                holder.holder = _new(DeviceBuffer)
                holder.holder.pool, holder.holder.handle, holder.holder.nbytes = None, None, 0
                if viewer is not None and viewer.handle is owner.handle:
                    _repoint(viewer, owner)
                    continue
                holder = owner
            free.setdefault(holder.nbytes, []).append(holder)
        owned.clear()
        self.internal = {}
        # Whole buffers reuse the recorded ones (of their size classes); an arena holds each
        # allocation in the bytes it asked for, in 256-byte steps.
        sizes = {alloc: nbytes[alloc[0]] for alloc in spans}
        if runtime.view is None:
            handle_of, self.blocks = _blocks(runtime, spans, sizes, free)
        else:
            for key, generation in spans:
                if generation < len(asked.get(key, ())):
                    sizes[(key, generation)] = min(asked[key][generation], nbytes[key])
            handle_of, self.blocks = _arena(runtime, spans, sizes, free)
        for key, slot in self.outputs.items():
            generation = max(len(births.get(key, ())) - 1, 0)
            slot.holder = _new(DeviceBuffer)
            slot.holder.pool = None
            slot.holder.nbytes = -(-sizes[(key, generation)] // _ALIGN) * _ALIGN
            slot.holder.handle = handle_of[(key, generation)]
        relocated = []
        for command, used in zip(commands, uses):
            moves = [(handle, handle_of[alloc], nbytes[alloc[0]])
                     for handle, alloc in zip(_handles(command), used) if alloc is not None]
            relocated.append(_relocated(runtime, command, moves) if moves else command)
        return relocated

    # -- replaying ------------------------------------------------------------------------------

    def valid(self) -> bool:
        """Whether every state buffer the record reads or writes is still held by a tensor."""
        return not self.released and all(ref() is not None for ref in self.state)

    def replay(self, inputs: Sequence[JitTensor]) -> list[JitTensor]:
        # Per tensor, this is the host's whole cost of a replayed step: kept to plain loops.
        runtime, pool = self.runtime, self.runtime.pool
        copies: list[tuple[Any, Any, int, int, bool]] = []
        moved: list[tuple[DeviceBuffer, _Slot, _Slot]] = []
        slots, written, output_handles = self.inputs, self.written, self._output_handles
        for x, (key, start, end) in zip(inputs, self.input_order):
            slot = slots[key]
            buffer = x.buffer
            viewer = slot.viewer
            if viewer is not None:
                if buffer is viewer():  # the argument lies in the input buffer already
                    if key in written:  # and the replay updates it: the tensor keeps a copy
                        slot.evict(runtime)
                    continue
                slot.evict(runtime)
            source = output_handles.get(id(buffer.handle))
            if source is not None and buffer.pool is None and \
                    buffer.nbytes <= slot.holder.nbytes and key not in written:
                # A tensor the last replay returned: all of it moves.
                copies.append((buffer.handle, slot.holder.handle, 0, buffer.nbytes, True))
                moved.append((buffer, slot, self.outputs[source]))
            else:
                copies.append((buffer.handle, slot.holder.handle, start, end, False))
        for buffer, slot, out_slot in moved:
            # After the copy it views its input buffer instead, where nothing overwrites it
            # until the next call: its output buffer is free for this replay.
            buffer.handle, buffer.nbytes = slot.holder.handle, slot.holder.nbytes
            slot.viewer = weakref.ref(buffer)
            out_slot.viewer = None
        for slot in self.outputs.values():
            if slot.viewer is not None:
                slot.evict(runtime)
        replayer = self.replayer
        if replayer is None:  # the first replay: the arguments are in, the memory is packed now
            copy = type(runtime).copy
            for src, dst, start, end, _ in copies:
                copy(runtime, src, start, dst, start, end - start)
            copies = []
            self.prepare()
            replayer = self.replayer
            assert replayer is not None  # prepared
        replayer(copies)
        made: dict[int, DeviceBuffer] = {}
        results = []
        device = self.device
        for plan in self.output_plan:
            slots = plan.slots
            if slots is _ARGUMENT:
                buffer = inputs[plan.slot].buffer
            elif slots is None:
                source = plan.slot
                buffer = pool.alloc(source.nbytes)
                type(runtime).copy(runtime, source.handle, 0, buffer.handle, 0, source.nbytes)
            else:
                slot = slots[plan.slot]
                buffer = made.get(id(slot))
                if buffer is None:
                    buffer = made[id(slot)] = _new(DeviceBuffer)
                    holder = slot.holder
                    buffer.pool, buffer.handle, buffer.nbytes = None, holder.handle, \
                        holder.nbytes
                    slot.viewer = weakref.ref(buffer)
            tensor = _new(JitTensor)
            tensor.buffer, tensor.shape, tensor.strides, tensor.offset = \
                buffer, plan.shape, plan.strides, plan.offset
            tensor.dtype, tensor.device, tensor.runtime = plan.dtype, device, runtime
            results.append(tensor)
        return results

    def release(self) -> None:
        """Give the record's memory back: tensors still viewing an input or output buffer keep
        it (it becomes theirs); the rest goes back to the pool."""
        if self.released:
            return
        self.released = True
        # Inputs, and outputs not yet packed (``prepare``), are buffers of their own: tensors
        # viewing them take them over. Packed outputs are a block's: they move to a copy.
        own = [*self.inputs.values(), *(self.outputs.values() if self.replayer is None else ())]
        for slot in own:
            viewer = slot.viewing()
            if viewer is not None and viewer.handle is slot.handle:
                _repoint(viewer, slot.holder)
        if self.replayer is not None:
            for slot in self.outputs.values():
                slot.evict(self.runtime)
        self.inputs.clear()
        self.outputs.clear()
        self.internal.clear()
        self.blocks.clear()
        self.replayer = None


def _blocks(runtime: Runtime, spans: dict[tuple, list[int]], nbytes: dict[tuple, int],
            free: dict[int, list[DeviceBuffer]]) -> tuple[dict[tuple, Any], list[DeviceBuffer]]:
    """Allocations (``spans``: each one's first and last command) packed into whole buffers,
    one allocation at a time in each: greedy by size, the largest first, each into the
    smallest buffer none of whose allocations is in use at the same time, else a buffer of
    its own. Returns each allocation's handle and the buffers (the recorded ones of ``free``
    first, the rest from the pool)."""
    blocks: list[list] = []  # [size, [(first, last), ...]]
    block_of: dict[tuple, list] = {}
    for alloc in sorted(spans, key=lambda a: -nbytes[a]):
        first, last = spans[alloc]
        fits = [b for b in blocks if all(last < a or first > z for a, z in b[1])]
        if fits:  # the smallest: big blocks stay free for big allocations
            block = min(fits, key=lambda b: b[0])
            block[1].append((first, last))
        else:
            block = [nbytes[alloc], [(first, last)]]
            blocks.append(block)
        block_of[alloc] = block
    memory: dict[int, DeviceBuffer] = {}
    for block in blocks:
        found = free.get(block[0])
        if found:
            memory[id(block)] = found.pop()
    free.clear()  # what no block took goes back to the pool, before new memory is taken
    for block in blocks:
        if id(block) not in memory:
            memory[id(block)] = runtime.pool.alloc(block[0])
    return ({alloc: memory[id(block)].handle for alloc, block in block_of.items()},
            list(memory.values()))


#: Where allocations start in an arena (``_arena``): CUDA's alignment for any access.
_ALIGN = 256


def _arena(runtime: Runtime, spans: dict[tuple, list[int]], nbytes: dict[tuple, int],
           free: dict[int, list[DeviceBuffer]]) -> tuple[dict[tuple, Any], list[DeviceBuffer]]:
    """Allocations (``spans``: each one's first and last command) placed at offsets of one
    buffer (runtimes whose handles can point into a buffer: ``Runtime.view``): greedy by size,
    as TensorFlow Lite places its tensors: the largest first, each into the smallest gap
    between the allocations already placed that are in use at the same time, else above
    them. Returns each allocation's handle and the buffer."""
    order = sorted(spans, key=lambda a: -nbytes[a])
    count = len(order)
    offsets = np.zeros(count, np.int64)
    sizes = np.array([-(-nbytes[a] // _ALIGN) * _ALIGN for a in order], np.int64)
    firsts = np.array([spans[a][0] for a in order], np.int64)
    lasts = np.array([spans[a][1] for a in order], np.int64)
    for i in range(count):
        size, first, last = sizes[i], firsts[i], lasts[i]
        together = np.flatnonzero((firsts[:i] <= last) & (lasts[:i] >= first))
        offset, best, best_gap = 0, None, None
        for j in together[np.argsort(offsets[together], kind="stable")]:
            gap = offsets[j] - offset
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = offset, gap
            offset = max(offset, offsets[j] + sizes[j])
        offsets[i] = offset if best is None else best
    free.clear()  # the recorded buffers go back to the pool, before the arena is taken
    total = int((offsets + sizes).max()) if count else 0
    arena = runtime.pool.alloc(max(total, _ALIGN), exact=True)  # no size class: it is kept
    return ({alloc: runtime.view(arena.handle, int(offsets[i])) for i, alloc in enumerate(order)},
            [arena])


def _handles(command: tuple) -> tuple:
    """The buffers a recorded command uses."""
    kind = command[0]
    if kind == "launch":
        return command[2]
    if kind == "write":
        return (command[1],)
    if kind == "copy":
        return (command[1], command[3])
    return command[4]


def _relocated(runtime: Runtime, command: tuple, moves: list[tuple[Any, Any, int]]) -> tuple:
    """``command`` with its buffers moved: each ``(old, new, nbytes)`` of ``moves`` puts
    ``new`` where ``old`` was."""
    new = {id(old): to for old, to, _ in moves}

    def to(handle: Any) -> Any:
        return new.get(id(handle), handle)

    kind = command[0]
    if kind == "launch":
        return ("launch", command[1], tuple(to(h) for h in command[2]), command[3], command[4])
    if kind == "write":
        return ("write", to(command[1]), command[2], command[3])
    if kind == "copy":
        return ("copy", to(command[1]), command[2], to(command[3]), command[4], command[5])
    return ("call", command[1], runtime.relocate(command[2], moves), command[3],
            tuple(to(h) for h in command[4]))


def _owner(holder: Any) -> DeviceBuffer:
    return holder.holder if isinstance(holder, _Slot) else holder


def _span(x: JitTensor) -> tuple[int, int]:
    """The bytes of its buffer that ``x`` views, ``[start, end)``, widened to whole 4-byte
    words (WebGPU copies only those; buffers are allocated in 256-byte steps, so the widened
    range stays inside them, and the extra bytes land in the record's own buffer)."""
    itemsize = x.runtime.generator.storage_numpy(x.dtype.name).itemsize
    low = high = x.offset
    for size, stride in zip(x.shape, x.strides):
        if size == 0:
            return 0, 0
        if stride > 0:
            high += (size - 1) * stride
        else:
            low += (size - 1) * stride
    start, end = low * itemsize, (high + 1) * itemsize
    return start - start % 4, -(-end // 4) * 4


class JitCapturer:
    """``burnish.capture``'s interface to one device of a ``burnish.jit`` backend."""

    def __init__(self, runtime: Runtime, device: Any):
        self.runtime = runtime
        self.device = device
        self.recorder: Recorder | None = None

    @property
    def core(self) -> JitCapturer:
        """The capturer that records (decorators' capturers lead here)."""
        return self

    def leaf(self, x: JitTensor) -> JitTensor:
        """``x`` computed (a pending lazy tensor is flushed), as the record sees it."""
        lazy.materialize(x)
        return x

    def spec(self, x: JitTensor) -> tuple:
        """What a replay needs of an argument beyond shape and dtype: its layout."""
        return (x.strides, x.offset)

    def stand_in(self, x: JitTensor) -> None:
        return None  # rebuild reads nothing of its template

    def rebuild(self, template: JitTensor | None, x: JitTensor) -> JitTensor:
        return x

    def begin(self, inputs: Sequence[JitTensor]) -> None:
        runtime = self.runtime
        lazy.flush(runtime)
        for x in inputs:  # an argument another record owns moves to memory of its own
            if x.buffer.pool is None:
                moved = runtime.pool.alloc(x.buffer.nbytes)
                runtime.copy(x.buffer.handle, 0, moved.handle, 0, x.buffer.nbytes)
                _repoint(x.buffer, moved)
        self.recorder = Recorder(runtime)
        self.recorder.install()

    def finish(self, outputs: Sequence[JitTensor]) -> Recorder:
        """Stops recording once ``outputs`` and every deferred update are computed."""
        recorder, self.recorder = self.recorder, None
        try:
            for x in outputs:
                lazy.materialize(x)
            lazy.flush(self.runtime)
        finally:
            recorder.uninstall()
        return recorder

    def abort(self) -> None:
        if self.recorder is not None:
            self.recorder.uninstall()
            self.recorder = None

    def compare(self, a: Recorder, b: Recorder) -> str | None:
        return b.problem() or same_work(a, b)

    def record(self, recorder: Recorder, inputs: Sequence[JitTensor],
               outputs: Sequence[JitTensor]) -> JitRecord:
        return JitRecord(self.runtime, self.device, recorder, list(inputs), list(outputs))
