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

import copy
import enum
import functools
import os
import sys
import threading
import types
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from burnish.device import Device
from burnish.distribution import Distribution
from burnish.dtype import DType
from burnish.errors import CaptureError
from burnish.tensor import Tensor
from burnish.tensor.core import make

_new = object.__new__

#: Values that are part of a call's signature as they are (a change means another record).
_CONSTANTS = (type(None), bool, int, float, complex, str, bytes, DType, Device, Distribution,
              enum.Enum, range, slice)

#: How many calls run eagerly before recording starts, and how many pairs of recordings may
#: disagree (a cache warming up) before the function is declared uncapturable.
WARMUP_CALLS = 1
ATTEMPTS = 3
#: How deep arguments and results may nest (a guard against objects that refer to themselves).
MAX_DEPTH = 64


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
    frame = sys._getframe(1)
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
        #: Why the function runs eagerly whatever its arguments (``None``: it need not).
        self._uncapturable: str | None = None
        self._globals = _global_names(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._uncapturable is not None:
            return self.fn(*args, **kwargs)
        tensors: list[Tensor] = []
        places: list[tuple[Any, Any]] = []
        roots = (args, kwargs, _held(self.fn, self._globals))
        try:
            structure = _flatten(roots, tensors, places)
            if not tensors:
                return self.fn(*args, **kwargs)
            base, leaves, key = self._signature(tensors, structure)
        except CaptureError as error:
            return self._eager(str(error), args, kwargs)
        if base is None:
            return self._eager(f"backend {tensors[0]._device.backend.name!r} cannot capture",
                               args, kwargs)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(structure)
                while len(self._entries) > self.max_records:
                    self._entries.popitem(last=False)[1].release()
                self._check_churn(entry)
            else:
                self._entries.move_to_end(key)
        if entry.failed is not None:
            return self.fn(*args, **kwargs)
        if entry.record is not None:
            if entry.record.valid():
                entry.replays += 1
                self._churn = 0
                return entry.replay(leaves, places)
            entry.reset()  # state it used is gone: record afresh
        entry.calls += 1
        if entry.calls <= WARMUP_CALLS:
            return self.fn(*args, **kwargs)
        return self._record(entry, base, leaves, tensors, roots, args, kwargs)

    def _signature(self, tensors: list[Tensor], structure: Any) -> tuple[Any, list, tuple]:
        """The capturer that records (``None``: the backend has none), the tensors'
        device-level values, and the key a record is kept under."""
        leaves, specs, seen = [], [], {}
        base = None
        for tensor in tensors:
            device = tensor._device
            capturer = self._capturer(device)
            if capturer is None:
                return None, [], ()
            if base is None:
                base = capturer.core
            elif capturer.core is not base:
                raise CaptureError(f"its tensors are on several devices ({tensors[0]._device} "
                                   f"and {device})")
            leaf = capturer.leaf(tensor._prim)
            leaves.append(leaf)
            alias = seen.setdefault(id(getattr(leaf, "buffer", leaf)), len(leaves) - 1)
            specs.append((id(device), tensor._prim.shape, tensor._dtype,
                          capturer.spec(tensor._prim), alias))
        return base, leaves, (structure, tuple(specs))

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
            template = _template(result, returned)
            after: list[Tensor] = []
            places: list[tuple[Any, Any]] = []
            try:
                changed = _flatten(roots, after, places) != entry.structure
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
            entry.template = template
            entry.updated = updated
            entry.states = [_Leaf(after[i], self._capturer(after[i]._device)) for i in updated]
            for leaf in _leaves(template):
                leaf.capturer = self._capturer(leaf.device)
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
            where = _difference(previous, entry.structure) if previous is not None else None
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


class _Entry:
    """What one signature of a captured function has done so far."""

    def __init__(self, structure: Any) -> None:
        self.structure = structure
        self.calls = 0
        self.replays = 0
        self.attempts = 0
        self.recorder: Any = None
        self.record: Any = None
        self.template: Any = None
        self.updated: list[int] = []  # the held tensors a call replaces, by position
        self.states: list[_Leaf] = []  # and what replaces them
        self.failed: str | None = None

    def replay(self, leaves: list[Any], places: list[tuple[Any, Any]]) -> Any:
        """Replay the record on ``leaves``; put the new state where the call would have put
        it (``places``: where each tensor of the arguments and held state lies), and return
        the result rebuilt around the new tensors."""
        outputs = iter(self.record.replay(leaves))
        result = _rebuild(self.template, outputs)
        for i, state in zip(self.updated, self.states):
            container, key = places[i]
            value = _rebuild(state, outputs)
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
        self.record = self.recorder = self.template = None


#: How many new signatures in a row, with no replay between them, mean that the signature
#: changes on every call.
CHURN = 6


def _held(fn: Callable, names: tuple[str, ...]) -> tuple:
    """What ``fn`` holds besides its arguments: the object of a bound method, the values of a
    closure's cells, and the module globals named in ``names`` (a model, an optimizer and
    its state, wherever the function finds them)."""
    held = []
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        held.append(owner)
        fn = getattr(fn, "__func__", fn)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # a cell not yet assigned
            pass
    space = getattr(fn, "__globals__", {})
    held.extend(space.get(name) for name in names)
    return tuple(held)


def _global_names(fn: Callable) -> tuple[str, ...]:
    """The module globals ``fn``'s code reads that hold data (not modules, classes or
    functions), its nested functions' included."""
    fn = getattr(fn, "__func__", fn)
    code, space = getattr(fn, "__code__", None), getattr(fn, "__globals__", None)
    if code is None or space is None:
        return ()
    names: list[str] = []
    pending = [code]
    while pending:
        current = pending.pop()
        names.extend(n for n in current.co_names if n in space and n not in names)
        pending.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return tuple(n for n in names if not isinstance(space[n], (*_CODE, Captured)))


def _difference(a: Any, b: Any) -> str | None:
    """Where two signatures' structures first differ, as a path and the two values."""
    for name, x, y in zip(("argument", "keyword argument", "held state"), a[1:], b[1:]):
        if x != y:
            return _differs(x, y, name)
    return None


def _differs(a: Any, b: Any, path: str) -> str:
    if not (type(a) is tuple and type(b) is tuple and len(a) == len(b) and a
            and a[0] == b[0] and isinstance(a[0], type)):
        return f"{path}: {_short(a)} then {_short(b)}"
    if len(a) == 2 and type(a[1]) is not tuple:  # a constant
        return f"{path}: {_short(a[1])} then {_short(b[1])}"
    keyed = not issubclass(a[0], tuple | list)
    for i, (x, y) in enumerate(zip(a[1:], b[1:])):
        if x == y:
            continue
        if keyed and type(x) is tuple and len(x) == 2 and type(y) is tuple and x[0] == y[0]:
            step = f".{x[0]}" if isinstance(x[0], str) else f"[{x[0]!r}]"
            return _differs(x[1], y[1], path + step)
        return _differs(x, y, f"{path}[{i}]")
    return path


def _short(value: Any) -> str:
    if type(value) is tuple and len(value) == 2 and isinstance(value[0], type):
        value = value[1]
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- signatures ------------------------------------------------------------------------------


def _flatten(value: Any, tensors: list[Tensor], places: list[tuple[Any, Any]],
             parent: Any = None, at: Any = None, depth: int = 0) -> Any:
    """A hashable description of ``value``'s structure and constants. Its tensors are
    appended to ``tensors`` (described later, by ``_signature``), and where each lies (its
    container and key) to ``places``."""
    if isinstance(value, Tensor):
        tensors.append(value)
        places.append((parent, at))
        return Tensor
    kind = type(value)
    if depth > MAX_DEPTH:
        raise CaptureError(f"its arguments nest deeper than {MAX_DEPTH} levels (or refer to "
                           "themselves)")
    depth += 1
    if kind is tuple or kind is list:
        return (kind, *[_flatten(v, tensors, places, value, i, depth)
                        for i, v in enumerate(value)])
    if kind is dict:
        return (dict, *[(k, _flatten(v, tensors, places, value, k, depth))
                        for k, v in value.items()])
    if isinstance(value, _CONSTANTS):
        return (kind, value)
    if isinstance(value, tuple | list):  # named tuples, list subclasses
        return (kind, *[_flatten(v, tensors, places, value, i, depth)
                        for i, v in enumerate(value)])
    if isinstance(value, dict):
        return (kind, *[(k, _flatten(v, tensors, places, value, k, depth))
                        for k, v in value.items()])
    attributes = _attributes(value)
    if attributes is not None:
        return (kind, *[(k, _flatten(v, tensors, places, value, k, depth))
                        for k, v in attributes.items()])
    try:
        hash(value)
    except TypeError:
        return (kind, _Identity(value))
    return (kind, value)  # functions, classes and other hashable objects: as they are


class _Identity:
    """An unhashable value (a NumPy array) in a signature: equal only to itself, and kept
    alive by the signature, so that no other object can take its identity."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is _Identity and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)

    def __repr__(self) -> str:
        return f"<{type(self.value).__name__} at {id(self.value):#x}>"


#: Objects with attributes that are not data: kept as they are, by identity.
_CODE = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
         types.ModuleType, functools.partial)


def _attributes(value: Any) -> dict | None:
    """The attributes of a plain object (a module, a parameter, a user's state class), or
    ``None`` for what is not walked into (functions, classes, objects without attributes)."""
    if isinstance(value, _CODE):
        return None
    found = getattr(value, "__dict__", None)
    if found is not None:
        return found
    names = _SLOTS.get(type(value))
    if names is None:
        names = _SLOTS[type(value)] = tuple(
            name for cls in type(value).__mro__ for name in _slots_of(cls)
            if name not in ("__weakref__", "__dict__"))
    if not names:
        return None
    return {name: getattr(value, name) for name in names if hasattr(value, name)}


_SLOTS: dict[type, tuple[str, ...]] = {}


def _slots_of(cls: type) -> tuple[str, ...]:
    slots = cls.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


# -- results ---------------------------------------------------------------------------------

class _Leaf:
    """A returned tensor in a template: where its replayed value goes."""

    __slots__ = ("prim", "device", "dtype", "capturer")

    def __init__(self, tensor: Tensor, capturer: Any = None):
        self.prim, self.device, self.dtype = tensor._prim, tensor._device, tensor._dtype
        self.capturer = capturer


def _template(value: Any, tensors: list[Tensor], depth: int = 0) -> Any:
    """How to rebuild ``value`` with other tensors (``None`` where it cannot be): its tensors
    are appended to ``tensors`` and replaced by ``_Leaf``; containers and objects that hold
    no tensor are kept as they are."""
    if isinstance(value, Tensor):
        tensors.append(value)
        return _Leaf(value)
    if isinstance(value, _CONSTANTS):
        return _Same(value)
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, tuple | list | dict):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        parts = {}
        for k, v in items:
            part = _template(v, tensors, depth + 1)
            if part is None:
                return None
            parts[k] = part
        if all(type(p) is _Same for p in parts.values()):
            return _Same(value)
        return _Container(value, parts)
    attributes = _attributes(value)
    if attributes is None:
        return _Same(value) if isinstance(value, _CODE) else None
    parts = {}
    for k, v in attributes.items():
        part = _template(v, tensors, depth + 1)
        if part is None:
            return None
        parts[k] = part
    if all(type(p) is _Same for p in parts.values()):
        return _Same(value)
    return _Container(value, parts)


class _Same:
    """A part of the result that holds no tensor: returned as the recorded call returned it."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


class _Container:
    """A list, tuple, dict or object holding tensors: rebuilt around the new ones."""

    __slots__ = ("value", "parts")

    def __init__(self, value: Any, parts: dict):
        self.value, self.parts = value, parts


def _leaves(template: Any) -> list[_Leaf]:
    """The tensors of a template, in order."""
    if type(template) is _Leaf:
        return [template]
    if type(template) is _Same:
        return []
    return [leaf for part in template.parts.values() for leaf in _leaves(part)]


def _rebuild(template: Any, outputs: Any) -> Any:
    """``template``'s value with the next tensors of ``outputs`` in place of the recorded
    ones."""
    kind = type(template)
    if kind is _Leaf:
        return make(template.capturer.rebuild(template.prim, next(outputs)), template.device,
                    template.dtype)
    if kind is _Same:
        return template.value
    value, parts = template.value, template.parts
    rebuilt = {k: _rebuild(p, outputs) for k, p in parts.items()}
    kind = type(value)
    if kind is dict:
        out = dict(value)
        out.update(rebuilt)
        return out
    if kind is list:
        out = list(value)
        for k, v in rebuilt.items():
            out[k] = v
        return out
    if kind is tuple:
        return tuple([rebuilt[i] for i in range(len(value))])
    if isinstance(value, tuple):
        items = [rebuilt[i] for i in range(len(value))]
        return kind(*items) if hasattr(value, "_fields") else kind(items)
    if isinstance(value, dict | list) or not hasattr(value, "__dict__"):
        out = copy.copy(value)  # subclasses of dict and list, objects with __slots__
    else:  # a plain object (a module): its attributes, without running __init__
        out = _new(kind)
        out.__dict__.update(value.__dict__)
    for k, v in rebuilt.items():
        if isinstance(out, dict | list):
            out[k] = v
        else:
            object.__setattr__(out, k, v)
    return out


__all__ = ["Captured", "capture", "caller_line", "guard"]
