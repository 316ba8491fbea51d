"""Capture and replay on the ndarray backend: the protocol calls a function makes, recorded
once and replayed as a prepared list of NumPy-backed calls.

While a call is recorded, every protocol method of the backend instance is wrapped (on the
instance: the ops never know). Only the outermost call of a nesting is recorded (an op whose
default is written through other ops replays as itself). Each recorded call keeps its method,
its constant arguments and, for each array argument, where the array comes from: an input
(the tensors ``burnish.capture`` found in the arguments and held state), the result of an
earlier call, or an array from outside that the record holds as a constant. A replay calls the
methods again on the new inputs, skipping ``Tensor``'s checks, autodiff's graph and the
Python of the model; intermediates are let go after their last use, so that the ops reuse
their memory (``out=``) as the eager run did.

Random draws are recorded too and replay fresh numbers from the backend's generator; a
``seed`` call inside the function is recorded with its value, so a seed computed per step
shows up as a difference between the two recordings and the function runs eagerly.
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from burnish.backend import Backend, QuantizedPrimitive
from burnish.errors import CaptureError
from burnish.replay import caller_line as _where
from burnish.tensor_data import TensorData

#: Protocol methods that describe rather than compute: never recorded.
_DESCRIBE = frozenset({"devices", "default_device", "dtypes", "describe_device",
                       "unsupported_reason", "capturer", "fuser", "sync", "_device_of"})
#: Methods that read values to the host: the function cannot be replayed.
_READS = frozenset({"into_data", "read"})

#: Every method of the protocol a recorder wraps.
_METHODS = tuple(name for name in dir(Backend)
                 if not name.startswith("__") and name not in _DESCRIBE
                 and inspect.isfunction(getattr(Backend, name)))


#: What a primitive may be: an array, or a NumPy scalar where an op gives one for 0-d results.
_ARRAYS = (np.ndarray, np.generic)


class _Ref:
    """An array argument: ``("in", index)``, ``("out", call, position)``."""

    __slots__ = ("kind", "index", "position")

    def __init__(self, kind: str, index: int, position: int = -1):
        self.kind, self.index, self.position = kind, index, position

    def __eq__(self, other: object) -> bool:
        return type(other) is _Ref and (self.kind, self.index, self.position) == \
            (other.kind, other.index, other.position)

    __hash__ = None  # type: ignore[assignment]


class _Const:
    """An array from outside the inputs, held by the record (compared by value)."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array

    def __eq__(self, other: object) -> bool:
        return type(other) is _Const and other.array.shape == self.array.shape and \
            other.array.dtype == self.array.dtype and np.array_equal(other.array, self.array)

    __hash__ = None  # type: ignore[assignment]


class _Data:
    """A ``TensorData`` argument (``from_data``), held by the record (compared by value)."""

    __slots__ = ("array", "dtype")

    def __init__(self, array: np.ndarray, dtype: Any):
        self.array, self.dtype = array, dtype

    def __eq__(self, other: object) -> bool:
        return type(other) is _Data and other.dtype == self.dtype and \
            other.array.shape == self.array.shape and np.array_equal(other.array, self.array)

    __hash__ = None  # type: ignore[assignment]


class Recorder:
    """The outermost protocol calls made while a captured call runs, with where each array
    argument comes from."""

    def __init__(self, backend: Any, inputs: Sequence[np.ndarray]):
        self.backend = backend
        self.inputs = {id(x): i for i, x in enumerate(inputs)}
        self.calls: list[tuple[str, Any, list, dict, str]] = []
        self.produced: dict[int, tuple[int, Any]] = {}
        self.keep: list[Any] = []  # every result, so that no id is reused while recording
        self.depth = 0
        self.host_read: str | None = None

    def install(self) -> None:
        for name in _METHODS:
            self.backend.__dict__[name] = self._wrap(name, getattr(type(self.backend), name))

    def uninstall(self) -> None:
        for name in _METHODS:
            self.backend.__dict__.pop(name, None)

    def _wrap(self, name: str, function: Any) -> Any:
        backend = self.backend
        thread = threading.get_ident()

        def call(*args: Any, **kwargs: Any) -> Any:
            # Nested calls, and other threads' (a data loader's), run as they are.
            if self.depth or threading.get_ident() != thread:
                return function(backend, *args, **kwargs)
            if name in _READS and self.host_read is None:
                self.host_read = _where()
            self.depth += 1
            try:
                out = function(backend, *args, **kwargs)
            finally:
                self.depth -= 1
            index = len(self.calls)
            self.calls.append((name, function, self._encode(args), self._encode(kwargs),
                               _where()))
            for position, array in enumerate(out if isinstance(out, tuple) else (out,)):
                if isinstance(array, (*_ARRAYS, QuantizedPrimitive)):
                    self.produced[id(array)] = (index, position)
                if isinstance(array, QuantizedPrimitive):
                    # Its new parts are results too, at positions of their own, which a replay
                    # fills in (an array it was given keeps its first reference).
                    for part, value in enumerate(_parts(array)):
                        if id(value) not in self.produced and id(value) not in self.inputs:
                            self.produced[id(value)] = (index, (position, part))
            self.keep.append(out)
            return out

        return call

    def _encode(self, value: Any) -> Any:
        if isinstance(value, _ARRAYS):
            return self.ref(value)
        if isinstance(value, QuantizedPrimitive):
            # A quantized operand: the result of a recorded quantize, or parts from outside
            # (a quantized layer's weight), each referred to as an array is.
            found = self.produced.get(id(value))
            if found is not None:
                return _Ref("out", *found)
            values, scales, points = self._encode((value.values, value.scales,
                                                   value.zero_points))
            return QuantizedPrimitive(values, scales, points, value.scheme, value.shape)
        if isinstance(value, list | tuple):
            return type(value)(self._encode(v) for v in value)
        if isinstance(value, dict):
            return {k: self._encode(v) for k, v in value.items()}
        if isinstance(value, TensorData):
            return _Data(value.to_numpy().copy(), value.dtype)
        return value

    def ref(self, array: np.ndarray) -> Any:
        """Where ``array`` comes from, seen from the record."""
        found = self.produced.get(id(array))
        if found is not None:
            return _Ref("out", *found)
        index = self.inputs.get(id(array))
        if index is not None:
            return _Ref("in", index)
        return _Const(array)

    def guard(self, check: Any, arrays: Sequence[np.ndarray], key: Any) -> None:
        """Record a value check (``burnish.replay.guard``) and run it now; two recordings
        agree on it when ``key`` (its code's name and its own key) does."""
        self.calls.append(("guard", _Guard(check), self._encode(tuple(arrays)),
                           {"__key__": key}, _where()))
        check(*arrays)

    def problem(self) -> str | None:
        if self.host_read is not None:
            return f"it reads tensor values on the host at {self.host_read}"
        return None


def same_work(a: Recorder, b: Recorder) -> str | None:
    """Where two recordings make different calls, or give them other constants."""
    if len(a.calls) != len(b.calls):
        return f"the calls make different numbers of operations ({len(a.calls)} then " \
               f"{len(b.calls)})"
    for (name, _, args, kwargs, _), (other, _, args_b, kwargs_b, line) in zip(a.calls, b.calls):
        if name != other:
            return f"the calls make different operations at {line} ({name}, then {other})"
        if not _same(args, args_b) or not _same(kwargs, kwargs_b):
            return (f"operation {name} at {line} is given other values on each call (a number "
                    f"computed on the host changed)")
    return None


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except (ValueError, TypeError):  # arrays compared elementwise
        return False


class _Guard:
    """A recorded value check, called as a recorded method is: ``(backend, *arrays)``."""

    __slots__ = ("check",)

    def __init__(self, check: Any):
        self.check = check

    def __call__(self, backend: Any, *arrays: np.ndarray, __key__: Any = None) -> None:
        self.check(*arrays)


class NdArrayRecord:
    """A recorded call, replayed by calling its methods again on new inputs."""

    def __init__(self, recorder: Recorder, inputs: Sequence[np.ndarray],
                 outputs: Sequence[np.ndarray]):
        problem = recorder.problem()
        if problem is not None:
            raise CaptureError(problem)
        self.backend = recorder.backend
        self.released = False
        self.outputs = [recorder.ref(x) for x in outputs]
        if any(type(r) is _Const for r in self.outputs):
            raise CaptureError("it returns an array that no recorded operation made (made "
                               "outside the backend's operations)")
        kept = {(r.index, r.position) for r in self.outputs
                if type(r) is _Ref and r.kind == "out"}
        # The last call that reads each result: it is let go there (unless returned).
        last: dict[tuple[int, Any], int] = {}
        for index, (_, _, args, kwargs, _) in enumerate(recorder.calls):
            for ref in _found((args, kwargs), _Ref):
                if ref.kind == "out":
                    last[(ref.index, ref.position)] = index
        self.program = []
        for index, (_, function, args, kwargs, _) in enumerate(recorder.calls):
            drop = tuple(key for key, at in last.items() if at == index and key not in kept)
            # Results that leave the record are held once more while it runs: a later op that
            # reads one last must not take it for a temporary and write into it.
            pin = any(call == index for call, _ in kept)
            self.program.append((function, args, kwargs, drop, pin))
        self.consts = [c.array for c in _found([c[2:4] for c in recorder.calls], _Const)]
        self._baseline: list[int] | None = None

    def valid(self) -> bool:
        """Whether every array from outside is still held as it was at the first replay (an
        array that lost a holder is state that Python let go of or replaced: stale)."""
        if self.released:
            return False
        counts = [sys.getrefcount(a) for a in self.consts]
        if self._baseline is None:
            self._baseline = counts
        return all(now >= base for now, base in zip(counts, self._baseline))

    def replay(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        backend = self.backend
        results: dict[tuple[int, Any], Any] = {}
        pinned = []
        for index, (function, args, kwargs, drop, pin) in enumerate(self.program):
            out = function(backend, *_decode(args, inputs, results),
                           **_decode(kwargs, inputs, results))
            for position, value in enumerate(out if isinstance(out, tuple) else (out,)):
                results[(index, position)] = value
                if isinstance(value, QuantizedPrimitive):
                    for part, array in enumerate(_parts(value)):
                        results[(index, (position, part))] = array
            if pin:
                pinned.append(out)
            for key in drop:
                del results[key]
        return [_decode(ref, inputs, results) for ref in self.outputs]

    def release(self) -> None:
        self.released = True
        self.program = []
        self.consts = []


def _parts(q: QuantizedPrimitive) -> tuple[Any, ...]:
    """The arrays of a quantized operand, in a fixed order."""
    return (q.values, q.scales) if q.zero_points is None else \
        (q.values, q.scales, q.zero_points)


def _decode(value: Any, inputs: Sequence[np.ndarray],
            results: dict[tuple[int, Any], Any]) -> Any:
    kind = type(value)
    if kind is _Ref:
        if value.kind == "in":
            return inputs[value.index]
        return results[(value.index, value.position)]
    if kind is _Const:
        return value.array
    if kind is _Data:
        return TensorData(value.array, value.dtype)
    if kind is list or kind is tuple:
        return kind(_decode(v, inputs, results) for v in value)
    if kind is dict:
        return {k: _decode(v, inputs, results) for k, v in value.items()}
    if kind is QuantizedPrimitive:
        values, scales, points = _decode((value.values, value.scales, value.zero_points),
                                         inputs, results)
        return QuantizedPrimitive(values, scales, points, value.scheme, value.shape)
    return value


def _found(value: Any, kind: type):
    """The objects of type ``kind`` (``_Ref``, ``_Const``) in an encoded argument structure."""
    if type(value) is kind:
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _found(v, kind)
    elif isinstance(value, QuantizedPrimitive):
        yield from _found((value.values, value.scales, value.zero_points), kind)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _found(v, kind)


class NdArrayCapturer:
    """``burnish.capture``'s interface to the ndarray backend."""

    def __init__(self, backend: Any):
        self.backend = backend
        self.recorder: Recorder | None = None

    @property
    def core(self) -> NdArrayCapturer:
        return self

    def leaf(self, x: np.ndarray) -> np.ndarray:
        return x

    def spec(self, x: np.ndarray) -> tuple:
        return (x.dtype.str,)

    def stand_in(self, x: np.ndarray) -> None:
        return None  # rebuild reads nothing of its template

    def rebuild(self, template: np.ndarray | None, x: np.ndarray) -> np.ndarray:
        return x

    def begin(self, inputs: Sequence[np.ndarray]) -> None:
        self.recorder = Recorder(self.backend, inputs)
        self.recorder.install()

    def finish(self, outputs: Sequence[np.ndarray]) -> Recorder:
        recorder, self.recorder = self.recorder, None
        assert recorder is not None  # begin() came first
        recorder.uninstall()
        return recorder

    def abort(self) -> None:
        if self.recorder is not None:
            self.recorder.uninstall()
            self.recorder = None

    def guard(self, check: Any, arrays: Sequence[np.ndarray], key: Any) -> None:
        self.recorder.guard(check, arrays, key)  # type: ignore[union-attr]  # while recording

    def compare(self, a: Recorder, b: Recorder) -> str | None:
        return b.problem() or same_work(a, b)

    def record(self, recorder: Recorder, inputs: Sequence[np.ndarray],
               outputs: Sequence[np.ndarray]) -> NdArrayRecord:
        return NdArrayRecord(recorder, inputs, outputs)
