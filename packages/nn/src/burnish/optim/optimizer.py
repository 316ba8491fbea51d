"""The Optimizer base: one step over a module's parameters, and its state saved as a record."""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any

from burnish import Tensor, record
from burnish.dtype import int64 as _INT64
from burnish.errors import RecordError
from burnish.nn.module import Module
from burnish.nn.param import Param, is_autodiff
from burnish.optim.grads import GradientClipping, GradientsParams
from burnish.tensor import core as _core

State = dict[str, Tensor]


class Optimizer:
    """Updates a module from its gradients: ``module = optim.step(lr, module, grads)``.

    ``grads`` is what ``loss.backward()`` returned or a ``GradientsParams``. Parameters without a
    gradient, and frozen ones, are left as they are. The per-parameter state (moments, step
    counts) is keyed by parameter id, and ``save``/``load`` write and read it through
    ``burnish.record``, so a run resumed from a saved module and optimizer continues exactly.
    Subclasses implement ``update(param, grad, state, lr) -> new value`` on plain tensors; they
    may update the tensors of ``state`` in place (``add_``, ``mul_``), never ``param`` or
    ``grad``, which others may hold.
    """

    def __init__(self, gradient_clipping: GradientClipping | None = None):
        self.gradient_clipping = gradient_clipping
        self.state: dict[str, State] = {}

    def update(self, value: Tensor, grad: Tensor, state: State, lr: float) -> Tensor:
        raise NotImplementedError

    def step(self, lr: float, module: Module, grads: Any) -> Module:
        if not isinstance(grads, GradientsParams):
            grads = GradientsParams.from_grads(grads, module)

        def mapper(_: str, param: Param) -> Param:
            grad = grads.get(param.id)
            if grad is None or not param.require_grad:
                return param
            tensor = param.val()
            value = tensor.inner() if is_autodiff(tensor) else tensor
            if self.gradient_clipping is not None:
                grad = self.gradient_clipping.clip(grad)
            # Fresh Tensor objects around the saved primitives, the old ones dropped: an update
            # rebinds its moments in place (``m.mul_(b1)``), which must reach no tensor a caller
            # holds (a record from ``into_record``, a gradient kept as a moment); and a moment
            # that nothing else holds is then updated in its own memory.
            previous = self.state.pop(param.id, {})
            state = {key: _rewrap(t, value.device) for key, t in previous.items()}
            del previous
            new = self.update(value, grad.cast(value.dtype), state, lr)
            self.state[param.id] = state
            if is_autodiff(tensor):
                new = Tensor.from_inner(new, tensor.backend)
            return param.with_tensor(new)

        return module.map(mapper)

    # -- records ------------------------------------------------------------------------------

    def into_record(self) -> dict[str, Any]:
        """The state as a nested mapping: parameter id, then the state's tensors."""
        return {key: dict(state) for key, state in self.state.items() if state}

    def load_record(self, tree: dict[str, Any] | record.Record) -> None:
        """Replace the state by a record's (``into_record``'s form)."""
        if isinstance(tree, record.Record):
            tree = tree.tensors
        state: dict[str, State] = {}
        for key, entries in tree.items():
            if not isinstance(entries, dict):
                raise RecordError(f"optimizer state {key!r} must map names to tensors")
            state[key] = {name: Tensor.from_data(data) for name, data in entries.items()}
        self.state = state

    def save(self, path: str | os.PathLike[str], format: str | None = None) -> Path:
        """Write the state to ``path`` (always in full precision: moments must resume
        exactly)."""
        return record.save(self.into_record(), path, format,
                           metadata={"optimizer": type(self).__name__})

    def load(self, path: str | os.PathLike[str], format: str | None = None) -> None:
        loaded = record.load(path, format)
        kind = loaded.metadata.user.get("optimizer")
        if kind not in (None, type(self).__name__):
            raise RecordError(f"{path} holds the state of {kind}, not of {type(self).__name__}")
        self.load_record(loaded)


#: The value of every step-count tensor this process made, so that a step never reads one back
#: from the device (on a GPU, a read per parameter per step would wait for all queued work).
#: Keyed by identity: a WeakKeyDictionary compares keys with ``==``, which on tensors is an
#: elementwise op whose truth value is a read.
_step_counts: dict[int, tuple[weakref.ref, int]] = {}


def _remember_count(step: Tensor, count: int) -> None:
    key = id(step)
    _step_counts[key] = (weakref.ref(step, lambda _, key=key: _step_counts.pop(key, None)),
                         count)


def _known_count(step: Tensor) -> int | None:
    entry = _step_counts.get(id(step))
    return entry[1] if entry is not None and entry[0]() is step else None


def step_count(state: State, like: Tensor) -> int:
    """Advance and return the step count kept in ``state`` (1 on the first step)."""
    previous = state.get("step")
    if previous is None:
        count = 1
    else:
        known = _known_count(previous)
        count = (known if known is not None else int(previous.item())) + 1
    step = _step_tensor(count, like.device)
    _remember_count(step, count)
    state["step"] = step
    return count


# Per device: the last step count uploaded and its primitive. Every parameter's state holds
# the same count after a step, so one upload serves them all (each gets its own Tensor).
_step_uploads: dict[Any, tuple[int, Any]] = {}


def _step_tensor(count: int, device: Any) -> Tensor:
    found = _step_uploads.get(device)
    if found is None or found[0] != count:
        found = _step_uploads[device] = (count, Tensor.from_data([count], device, "int64")._prim)
    return _core.make(found[1], device, _INT64)


def _rewrap(tensor: Tensor, device: Any) -> Tensor:
    """A new Tensor object around ``tensor``'s primitive on ``device`` (no copy where it is
    there already), still known to ``step_count`` when it is a step count."""
    moved = tensor.to_device(device)
    fresh = _core.make(moved._prim, moved._device, moved._dtype)
    known = _known_count(tensor)
    if known is not None:
        _remember_count(fresh, known)
    return fresh
