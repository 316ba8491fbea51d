"""``CaptureCheck``: the conformance suite's ``--replay``, every op recorded and replayed.

``burnish.capture`` replays a function's recorded launches instead of running its Python. A
replay is right only if the record holds every launch, copy, write and library call an op
makes, with the buffers and values it needs; an op whose record misses something returns a
stale or wrong value, with no error. ``CaptureCheck(inner)`` wraps the backend under test so
that each op of the protocol a test calls is:

1. run eagerly once (its errors reach the test, as without ``--replay``; caches warm, as the
   eager calls before a capture warm them);
2. run twice more while the backend's capturer (``inner.capturer(device)``) records it, the
   two recordings compared (a pair that differs is tried again, up to ``ATTEMPTS`` pairs, as
   ``burnish.capture`` does while caches warm up), and a record made of the last;
3. replayed on copies of the inputs, after the record's memory (its input, output and working
   buffers, which still hold the recording's values) is filled with NaN bytes; the record is
   released and the replay's outputs are what the op returns, so the suite's own comparisons
   check the replay.

Where an op cannot be captured (``CaptureError``: it reads values on the host, the two
recordings differ as random draws do...), the eager result is returned and the op and the
reason are tallied (``eager``), so that the session's summary shows every op the check did not
cover. Ops that move data to or from the host (``from_data``, ``into_data``, ``read``,
``to_device``) or only describe the backend are forwarded as they are.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from burnish.backend import AutodiffOps, Backend, QuantizedPrimitive
from burnish.backend.decorator import WrapsDevices, forward_ops, on_inner_device
from burnish.device import Device
from burnish.errors import CaptureError, UnsupportedError
from burnish.replay import ATTEMPTS
from burnish.tensor_data import TensorData

#: Protocol methods ``CaptureCheck`` defines itself.
#: Protocol methods forwarded as they are: data to or from the host, which a capture never
#: holds (a record's inputs and outputs stay on the device).
_UNCAPTURED = frozenset({"from_data", "into_data", "read", "to_device"})


class CaptureCheck(WrapsDevices, Backend):
    """``CaptureCheck(inner)``: ``inner``'s ops, each recorded and replayed (see the module).

    Its name, devices (wrapping ``inner``'s), dtypes and primitives are ``inner``'s, so that
    the suite runs unchanged. Raises ``UnsupportedError`` for a backend that cannot be checked
    so: one without a capturer, or one with autodiff, whose graph is built by Python
    on each op and is not what a record replays.
    """

    def __init__(self, inner: Backend, device: Device) -> None:
        if isinstance(inner, AutodiffOps):
            raise UnsupportedError(
                f"--replay checks each op of a backend recorded and replayed, and backend "
                f"{inner.name!r} has autodiff: its graph is built by Python on every op and is "
                f"not replayed op by op; run --replay on {inner.inner_backend.name!r}")
        if inner.capturer(device) is None:
            raise UnsupportedError(
                f"--replay needs a backend that records its work (Backend.capturer), and "
                f"backend {inner.name!r} has no capturer on {device}; ndarray, the burnish.jit "
                f"backends (wgpu, rocm, cuda) and fusion over them have one")
        self._inner = inner
        self.name = inner.name
        self.values_on_host = inner.values_on_host
        self._wrapped: dict[Device, Device] = {}
        #: Op calls whose result came from a replay, per op.
        self.replayed: Counter[str] = Counter()
        #: Op calls that ran eagerly because they could not be captured, per op and reason.
        self.eager: dict[str, Counter[str]] = {}
        for name, device_at in _FORWARDED.items():
            method = getattr(inner, name)
            if name not in _UNCAPTURED:
                method = self._capturing(name, device_at)
            if device_at is not None:
                method = on_inner_device(method, device_at)
            self.__dict__[name] = method

    @property
    def inner(self) -> Backend:
        """The backend whose ops are recorded and replayed."""
        return self._inner

    def __repr__(self) -> str:
        return f"CaptureCheck({self._inner!r})"

    # -- devices and dtypes ---------------------------------------------------------------------

    def fuser(self) -> None:
        return None  # fusion goes beneath (--backend fusion+rocm --replay)

    def capturer(self, device: Device) -> Any:
        return self._inner.capturer(device.native)

    # -- recording and replaying ----------------------------------------------------------------

    def _capturing(self, name: str, device_at: int | None) -> Callable:
        """The inner backend's op ``name`` (taking its devices) run eagerly, then recorded twice
        and replayed: the replay's result is returned. The op is looked up on each call: a
        recorder may wrap it on the instance (ndarray's does)."""
        inner = self._inner

        def method(*args: Any, **kwargs: Any) -> Any:
            return getattr(inner, name)(*args, **kwargs)

        def run(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            outputs = list(_primitives(result))
            if not outputs:  # nothing computed on the device
                return result
            inputs = list(_primitives((args, kwargs)))
            if inputs:
                device = self._inner._device_of(inputs[0])
            elif device_at is not None and len(args) > device_at:
                device = args[device_at]
            else:
                device = kwargs["device"]
            capturer = self._inner.capturer(device)
            try:
                replayed = _record_and_replay(capturer, method, args, kwargs, inputs)
            except CaptureError as error:
                reason = _LOCATION.sub("<line>", str(error))
                self.eager.setdefault(name, Counter())[reason] += 1
                return result
            self.replayed[name] += 1
            return _rebuild(result, iter(capturer.rebuild(template, leaf)
                                         for template, leaf in zip(outputs, replayed)))

        run.__name__ = name
        return run

    def summary(self) -> list[str]:
        """Lines for the end of a session: how many op calls were replayed, every op that ran
        eagerly with the reasons, and the ops that no test called."""
        replayed = sum(self.replayed.values())
        eager = sum(sum(reasons.values()) for reasons in self.eager.values())
        lines = [f"{replayed} op calls replayed ({len(self.replayed)} ops); {eager} ran eagerly "
                 f"because they cannot be captured ({len(self.eager)} ops)"]
        uncalled = sorted(name for name in _FORWARDED if name not in _UNCAPTURED
                          and name not in self.replayed and name not in self.eager)
        if uncalled:
            lines.append(f"ops no test called: {', '.join(uncalled)}")
        for name in sorted(self.eager):
            reasons = self.eager[name]
            lines.append(f"  {name}: {sum(reasons.values())} eager, "
                         f"{self.replayed[name]} replayed")
            for reason, count in reasons.most_common():
                lines.append(f"    {count} x {reason}")
        return lines


#: A ``file:line`` in a capture error, so that one reason is tallied once whatever test made it.
_LOCATION = re.compile(r"\S+\.py:\d+")


def _record_and_replay(capturer: Any, method: Callable, args: tuple, kwargs: dict,
                       inputs: list[Any]) -> list[Any]:
    """The outputs of ``method(*args, **kwargs)`` replayed from a record of it (raises
    ``CaptureError`` where it cannot be recorded)."""
    leaves = [capturer.leaf(x) for x in inputs]

    def recording() -> tuple[Any, list[Any]]:
        capturer.begin(leaves)
        try:
            made = [capturer.leaf(x) for x in _primitives(method(*args, **kwargs))]
            return capturer.finish(made), made
        except BaseException:
            capturer.abort()
            raise

    # As burnish.capture does: recordings that differ may be a cache still warming up (a
    # kernel chosen anew), so up to ATTEMPTS pairs are tried before the op counts as eager.
    recorder, made = recording()
    for _ in range(ATTEMPTS):
        previous = recorder
        recorder, made = recording()
        difference = capturer.compare(previous, recorder)
        if difference is None:
            break
    if difference is not None:
        raise CaptureError(difference)
    record = capturer.record(recorder, leaves, made)
    # The recorded outputs go: a replay would otherwise first move them out of its buffers.
    del made, recorder, previous
    try:
        return record.replay(_replay_inputs(record, leaves))
    finally:
        record.release()


def _replay_inputs(record: Any, leaves: list[Any]) -> list[Any]:
    """What ``record`` is replayed on, its memory made such that only a right replay gives the
    op's result.

    On ``burnish.jit``, the recording left the right values in every buffer the record keeps,
    where a replay that missed a launch or a copy would return them unseen. So the tensors
    viewing its input buffers are moved out (as a replay moves them), and its input, output
    and working buffers are filled with 0xFF bytes (NaN in every float dtype); it is replayed
    on copies of the inputs in new buffers, with their layouts (aliases kept), as a captured
    step's next call brings new tensors that the replay copies in. ndarray's records call the
    ops again, which make new arrays from the inputs: nothing of the recording is left."""
    kind = f"{type(record).__module__}.{type(record).__qualname__}"
    if kind == "burnish.ndarray.capture.NdArrayRecord":
        return leaves
    if kind != "burnish.jit.capture.JitRecord":
        raise TypeError(f"--replay cannot check records of type {kind}: it knows the memory of "
                        f"the records of burnish.jit and burnish.ndarray, not this one's")
    from burnish.jit.tensor import JitTensor

    runtime = record.runtime
    fresh: dict[int, Any] = {}
    copies = []
    for x in leaves:
        buffer = fresh.get(id(x.buffer.handle))
        if buffer is None:
            buffer = fresh[id(x.buffer.handle)] = runtime.pool.alloc(x.buffer.nbytes)
            runtime.copy(x.buffer.handle, 0, buffer.handle, 0, x.buffer.nbytes)
        copies.append(JitTensor(buffer, x.shape, x.dtype, x.device, runtime, x.strides,
                                x.offset))
    for slot in record.inputs.values():
        slot.evict(runtime)
    record.prepare()  # the working memory packed, as a first replay would
    slots = (*record.inputs.values(), *record.outputs.values())
    written = [(slot.handle, slot.holder.nbytes) for slot in slots]
    written += [(buffer.handle, buffer.nbytes) for buffer in record.blocks]
    for handle, nbytes in written:
        if nbytes:
            runtime.write(handle, 0, np.full(nbytes, 0xFF, np.uint8))
    return copies


def _is_primitive(x: Any) -> bool:
    """Whether ``x`` is a backend primitive: anything with a shape but ``TensorData`` (NumPy
    arrays are ndarray's primitives; op arguments never hold host data otherwise). A
    ``QuantizedPrimitive`` is not one: it holds several."""
    return hasattr(x, "shape") and not isinstance(x, TensorData | QuantizedPrimitive)


def _primitives(value: Any) -> Iterator[Any]:
    """The primitives in ``value``, in order: op arguments nest them in lists and tuples (cat
    and stack take lists), results in tuples, quantized operands in a ``QuantizedPrimitive``."""
    if _is_primitive(value):
        yield value
    elif isinstance(value, QuantizedPrimitive):
        yield from _primitives((value.values, value.scales, value.zero_points))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _primitives(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _primitives(item)


def _rebuild(value: Any, replacements: Iterator[Any]) -> Any:
    """``value`` with each primitive replaced by the next of ``replacements``."""
    if _is_primitive(value):
        return next(replacements)
    if isinstance(value, QuantizedPrimitive):
        values, scales, points = _rebuild((value.values, value.scales, value.zero_points),
                                          replacements)
        return QuantizedPrimitive(values, scales, points, value.scheme, value.shape)
    if isinstance(value, list | tuple):
        return type(value)(_rebuild(item, replacements) for item in value)
    return value


#: The protocol methods ``CaptureCheck`` takes from its inner backend, with where each takes
#: its device.
_FORWARDED = forward_ops(CaptureCheck, frozenset({"fuser", "capturer"}))
