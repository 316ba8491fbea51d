"""Capture and replay (``burnish.capture``): a function recorded once, then replayed without
running its Python.

A training step issues hundreds of operations, and each costs tens of microseconds of Python
(checks, the autodiff graph, fusion's planning, the launch) however small its kernel. A
captured function pays that only while it is recorded:

1. the first call with a new signature (the shapes, dtypes, layouts and devices of its tensor
   arguments, and the values of everything else) runs as usual: caches warm, autotune decides,
   an optimizer makes its state;
2. the next two calls run as usual too, while the backend records the work they enqueue. The
   two recordings must agree: a number computed on the host that changes from call to call (a
   step count, a random seed, a schedule's learning rate kept in Python) shows up as a
   difference, and the function falls back to running eagerly, with one warning naming the
   line, rather than freezing the value;
3. from then on each call copies its tensor arguments into the record's input buffers and
   replays the record (a CUDA graph on cuda, the prepared launches on wgpu and rocm), with no
   Python per operation. It returns new tensors, structured as the recorded call returned them.

What a captured function may do is what a replay can repeat: tensor operations on its
arguments and on state it holds (a module in a closure, an optimizer's moments, updated in
place). It must not read values on the host (``item()``, ``tolist()``, printing a tensor), make
shapes depend on values, or replace state it does not receive and return. A function that does
runs eagerly with a warning (or raises ``CaptureError`` with ``strict=True``). Returned tensors
carry no autodiff graph (parameters come back as fresh leaves that require grad, as an
optimizer's step returns them).

Backends take part through ``Backend.capturer(device)``; those without one (ndarray, for now)
run captured functions eagerly.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from types import FrameType
from typing import Any

from burnish import amp as _amp
from burnish.device import Device
from burnish.errors import CaptureError
from burnish.quantization.tensor import QuantizedTensor
from burnish.replay.tree import (
    Leaf,
    builder,
    difference,
    flatten,
    global_names,
    held,
    leaves_of,
    matcher,
    template_of,
)
from burnish.tensor import Tensor

#: How many calls run eagerly before recording starts, and how many pairs of recordings may
#: disagree (a cache warming up) before the function is declared uncapturable.
WARMUP_CALLS = 1
ATTEMPTS = 3

def capture(fn: Callable | None = None, *, strict: bool = False,
            max_records: int = 8) -> Any:
    """Capture ``fn`` (a decorator, with or without arguments): see the module's docstring.

    ``strict``: raise ``CaptureError`` where ``fn`` cannot be captured, instead of running it
    eagerly with a warning. ``max_records``: how many signatures keep a record at once (the
    least recently used is dropped and its memory given back).

    The result is a ``Captured`` callable; ``captured.stats()`` says what each signature did.
    """
    if fn is None:
        return functools.partial(capture, strict=strict, max_records=max_records)
    return Captured(fn, strict=strict, max_records=max_records)


#: The captured function whose call is being recorded in this thread, if any.
_recording = threading.local()


def guard(check: Callable[..., None], *tensors: Tensor, key: Any = ()) -> None:
    """Check values on the host: ``check(*arrays)`` gets the tensors' values as NumPy arrays
    and raises on bad ones (a class target out of range, an int divisor of zero). Where a
    captured function is being recorded on a backend that keeps values on the host, the check
    is recorded as well and runs on every replay, so that replays check what eager calls check
    (``key``: what makes two checks the same, besides ``check``'s code). Elsewhere reading the
    values is a host read, and a function that checks values runs eagerly."""
    captured = getattr(_recording, "captured", None)
    if captured is not None:
        capturers = [captured._capturer(t._device) for t in tensors]
        base = capturers[0].core if capturers and capturers[0] is not None else None
        if base is not None and hasattr(base, "guard") and all(
                c is not None and c.core is base for c in capturers):
            base.guard(check, [c.leaf(t._prim) for c, t in zip(capturers, tensors)],
                       (getattr(check, "__qualname__", type(check).__qualname__), key))
            return
    check(*[t.to_numpy() for t in tensors])


def caller_line() -> str:
    """``file:line`` of the innermost frame outside burnish's packages: the user's line that
    made the work being recorded (for the messages of backends' capturers)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_internal()):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


@functools.cache
def _internal() -> tuple[str, ...]:
    import burnish

    return tuple(os.path.join(p, "") for p in burnish.__path__)


class Captured:
    """A captured function; call it as the function itself."""

    def __init__(self, fn: Callable, strict: bool = False, max_records: int = 8):
        if max_records < 1:
            raise ValueError(f"capture: max_records must be at least 1, got {max_records}")
        self.fn = fn
        self.strict = strict
        self.max_records = max_records
        self._entries: OrderedDict[Any, _Entry] = OrderedDict()
        #: Per device (by identity: a device's hash is computed in Python): the device and
        #: its backend's capturer.
        self._capturers: dict[int, tuple[Device, Any]] = {}
        self._lock = threading.Lock()
        self._churn = 0  # signatures made in a row without a replay
        self._last_structure: Any = None
        #: The entry of the last replayed call (``None`` after a call that did not replay).
        self._last: _Entry | None = None
        #: Why the function runs eagerly whatever its arguments (``None``: it need not).
        self._uncapturable: str | None = None
        self._globals = global_names(fn, skip=(Captured,))
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._uncapturable is not None:
            return self.fn(*args, **kwargs)
        tensors: list[Tensor] = []
        places: list[tuple[Any, Any]] = []
        roots = (args, kwargs, held(self.fn, self._globals))
        last = self._last
        try:
            # The signature of the last replayed call, checked rather than built again: the
            # usual case, where a training or inference loop calls with the same structure.
            if last is not None and last.match(roots, tensors, places):
                structure = last.structure
            else:
                last = None
                tensors.clear()
                places.clear()
                structure = flatten(roots, tensors, places)
            if not tensors:
                return self.fn(*args, **kwargs)
            base, leaves, key = self._signature(tensors, structure)
        except CaptureError as error:
            return self._eager(str(error), args, kwargs)
        if base is None:
            return self._eager(f"backend {tensors[0]._device.backend.name!r} cannot capture",
                               args, kwargs)
        if last is not None and key[1] == last.key[1] and key[2] == last.key[2]:
            entry = last  # the most recently used: the entries' order stands
        else:
            entry = self._entry(key, structure)
        if entry.failed is not None:
            self._last = None
            return self.fn(*args, **kwargs)
        if entry.record is not None:
            if entry.record.valid():
                entry.replays += 1
                self._churn = 0
                if entry.match is None:  # False: its signature has no matcher
                    entry.match = matcher(entry.structure) or False
                self._last = entry if entry.match else None
                return entry.replay(leaves, places)
            entry.reset()  # state it used is gone: record afresh
        self._last = None
        entry.calls += 1
        if entry.calls <= WARMUP_CALLS:
            return self.fn(*args, **kwargs)
        return self._record(entry, base, leaves, tensors, roots, args, kwargs)

    def _entry(self, key: tuple, structure: Any) -> _Entry:
        """The entry of signature ``key``, made (the least recently used dropped beyond
        ``max_records``) or moved to the end of the entries' order."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(structure, key)
                while len(self._entries) > self.max_records:
                    self._entries.popitem(last=False)[1].release()
                    self._last = None
                self._check_churn(entry)
            else:
                self._entries.move_to_end(key)
            return entry

    def _signature(self, tensors: list[Tensor], structure: Any) -> tuple[Any, list, tuple]:
        """The capturer that records (``None``: the backend has none), the tensors'
        device-level values, and the key a record is kept under."""
        leaves: list[Any] = []
        specs: list[tuple] = []
        seen: dict[int, int] = {}
        base = None
        last_device: Device | None = None
        leaf_of: Any = None
        spec_of: Any = None
        for tensor in tensors:
            device = tensor._device
            if device is not last_device:  # per device, not per tensor: most share one
                capturer = self._capturer(device)
                if capturer is None:
                    return None, [], ()
                if base is None:
                    base = capturer.core
                elif capturer.core is not base:
                    raise CaptureError(f"its tensors are on several devices "
                                       f"({tensors[0]._device} and {device})")
                last_device, leaf_of, spec_of = device, capturer.leaf, capturer.spec
            prim = tensor._prim
            leaf = leaf_of(prim)
            alias = seen.setdefault(id(getattr(leaf, "buffer", leaf)), len(leaves))
            leaves.append(leaf)
            specs.append((id(device), prim.shape, tensor._dtype, spec_of(prim), alias))
        # The autocast dtype too: the same call records other ops (casts, dtypes) under it.
        return base, leaves, (structure, tuple(specs), _amp.active_dtype())

    def _capturer(self, device: Device) -> Any:
        """The capturer of ``device``'s backend (``None``: it has none), asked once."""
        found = self._capturers.get(id(device))
        if found is None:
            found = self._capturers[id(device)] = (device, device.backend.capturer(device))
        return found[1]

    def _record(self, entry: _Entry, base: Any, leaves: list[Any], tensors: list[Tensor],
                roots: tuple, args: tuple, kwargs: dict) -> Any:
        base.begin(leaves)
        _recording.captured = self
        try:
            result = self.fn(*args, **kwargs)
            returned: list[Tensor] = []
            template = template_of(result, returned)
            after: list[Tensor] = []
            places: list[tuple[Any, Any]] = []
            try:
                changed = flatten(roots, after, places) != entry.structure
            except CaptureError:
                changed = True
            updated = [] if changed else [i for i, (t, u) in enumerate(zip(tensors, after))
                                          if t is not u]
            outputs = returned + [after[i] for i in updated]
            out_leaves = [self._capturer(t._device).leaf(t._prim) for t in outputs]
            recorder = base.finish(out_leaves)
        except BaseException:
            base.abort()
            raise
        finally:
            _recording.captured = None
        try:
            if template is None:
                raise CaptureError("it returns an object that capture cannot rebuild (only "
                                   "tensors, lists, tuples, dicts, plain objects and constants)")
            if changed:
                raise CaptureError("it changes the structure of its arguments or of the state "
                                   "it holds (adds or removes tensors, or changes a number kept "
                                   "in Python)")
            for i in updated:
                if isinstance(places[i][0], tuple):
                    raise CaptureError("it replaces a tensor held in a tuple")
                if isinstance(places[i][0], QuantizedTensor):
                    raise CaptureError("it replaces a quantized tensor that it holds (a "
                                       "replay cannot put new parts into it)")
            if entry.recorder is None:
                problem = base.compare(recorder, recorder)
                if problem is not None:
                    raise CaptureError(problem)
                entry.recorder = recorder
                return result
            difference = base.compare(entry.recorder, recorder)
            if difference is not None:
                entry.attempts += 1
                if entry.attempts >= ATTEMPTS:
                    raise CaptureError(difference)
                entry.recorder = recorder
                return result
            entry.record = base.record(recorder, leaves, out_leaves)
            entry.recorder = None
            entry.updated = updated
            entry.states = [Leaf(after[i]) for i in updated]
            for leaf in [*leaves_of(template), *entry.states]:
                leaf.settle(self._capturer(leaf.device))
            entry.build = builder(template)
            entry.state_builders = [builder(state) for state in entry.states]
        except CaptureError as error:
            entry.failed = str(error)
            entry.recorder = None
            self._fail(error)
        return result

    def _check_churn(self, entry: _Entry) -> None:
        """Warn once, and run eagerly from then on, when every call brings a new signature: a
        number kept in Python that changes on each call (a step count) would otherwise cost
        a recording per call and never replay."""
        self._churn += 1
        if self._churn >= CHURN:
            previous = self._last_structure
            where = difference(previous, entry.structure) if previous is not None else None
            reason = ("its signature changes on every call" +
                      (f" ({where})" if where else "") +
                      ": a number kept in Python changes each time (a step count, a counter); "
                      "keep it in a tensor instead (an optimizer: capturable=True)")
            self._uncapturable = reason
            self._fail(CaptureError(reason))
        self._last_structure = entry.structure

    def _fail(self, error: CaptureError) -> None:
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        message = f"capture: {name} cannot be captured and runs eagerly: {error}"
        if self.strict:
            raise CaptureError(message) from None
        warnings.warn(message, RuntimeWarning, stacklevel=4)

    def _eager(self, reason: str, args: tuple, kwargs: dict) -> Any:
        with self._lock:
            key = ("eager", reason)
            first = key not in self._entries
            if first:
                self._entries[key] = _Entry(None)
                self._entries[key].failed = reason
        if first:
            self._fail(CaptureError(reason))
        return self.fn(*args, **kwargs)

    def stats(self) -> list[dict[str, Any]]:
        """Per signature: calls run eagerly or recorded, replays, and why it runs eagerly
        (``None`` when it is captured)."""
        return [{"calls": e.calls, "replays": e.replays, "captured": e.record is not None,
                 "eager_because": e.failed} for e in self._entries.values()]

    def release(self) -> None:
        """Drop every record and give its memory back (tensors still in use keep theirs)."""
        with self._lock:
            for entry in self._entries.values():
                entry.release()
            self._entries.clear()
            self._last = None


class _Entry:
    """What one signature of a captured function has done so far."""

    def __init__(self, structure: Any, key: Any = None) -> None:
        self.structure = structure
        self.key = key  # the key it is kept under
        #: Its signature's matcher, made at its first replay (False: it has none).
        self.match: Any = None
        self.calls = 0
        self.replays = 0
        self.attempts = 0
        self.recorder: Any = None
        self.record: Any = None
        self.updated: list[int] = []  # the held tensors a call replaces, by position
        self.states: list[Leaf] = []  # and what replaces them
        self.build: Any = None  # the template, as a function of the replayed values
        self.state_builders: list[Any] = []  # the states, likewise
        self.failed: str | None = None

    def replay(self, leaves: list[Any], places: list[tuple[Any, Any]]) -> Any:
        """Replay the record on ``leaves``; put the new state where the call would have put
        it (``places``: where each tensor of the arguments and held state lies), and return
        the result rebuilt around the new tensors."""
        outputs = iter(self.record.replay(leaves))
        result = self.build(outputs)
        for i, build in zip(self.updated, self.state_builders):
            container, key = places[i]
            value = build(outputs)
            if isinstance(container, dict | list):
                container[key] = value
            else:
                object.__setattr__(container, key, value)
        return result

    def reset(self) -> None:
        self.release()
        self.calls = WARMUP_CALLS
        self.attempts = 0

    def release(self) -> None:
        if self.record is not None:
            self.record.release()
        self.record = self.recorder = self.build = None


#: How many new signatures in a row, with no replay between them, mean that the signature
#: changes on every call.
CHURN = 6


__all__ = ["Captured", "capture", "caller_line", "guard"]
