"""The Optimizer base: one step over a module's parameters, and its state saved as a record."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from burnish import Tensor, record
from burnish.dtype import int64 as _INT64
from burnish.errors import RecordError
from burnish.nn.module import Module
from burnish.nn.param import Param, is_autodiff
from burnish.optim.grads import GradientClipping, GradientsParams
from burnish.tensor import core as _core

#: A parameter's optimizer state: its tensors, and its step count as an int.
State = dict[str, Any]


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
            autodiff = is_autodiff(tensor)
            value = tensor.inner() if autodiff else tensor
            device = value._device
            if self.gradient_clipping is not None:
                grad = self.gradient_clipping.clip(grad)
            # Fresh Tensor objects around the saved primitives, the old ones dropped: an update
            # rebinds its moments in place (``m.mul_(b1)``), which must reach no tensor a caller
            # holds (a record from ``into_record``, a gradient kept as a moment); and a moment
            # that nothing else holds is then updated in its own memory.
            previous = self.state.pop(param.id, {})
            state = {key: _rewrap(t, device) for key, t in previous.items()}
            del previous
            if grad._dtype is not value._dtype:
                grad = grad.cast(value._dtype)
            new = self.update(value, grad, state, lr)
            self.state[param.id] = state
            if autodiff:
                new = Tensor.from_inner(new, tensor.backend)
            return param.with_tensor(new)

        return module.map(mapper)

    # -- records ------------------------------------------------------------------------------

    def into_record(self) -> dict[str, Any]:
        """The state as a nested mapping: parameter id, then the state's tensors (a step count
        as an int64 tensor of one element)."""
        return {key: {name: _as_tensor(t) for name, t in state.items()}
                for key, state in self.state.items() if state}

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


def _as_tensor(value: Tensor | int) -> Tensor:
    return Tensor.from_data([value], dtype=_INT64) if isinstance(value, int) else value


def step_count(state: State, like: Tensor) -> int:
    """Advance and return the step count kept in ``state`` (1 on the first step). The count
    lives on the host as an int: a step never reads the device (on a GPU a read waits for all
    queued work) nor writes to it; ``into_record`` makes it a tensor for saving."""
    previous = state.get("step", 0)
    if not isinstance(previous, int):  # loaded from a record: read once
        previous = int(previous.item())
    state["step"] = count = previous + 1
    return count


def _rewrap(tensor: Tensor | int, device: Any) -> Tensor | int:
    """A new Tensor object around ``tensor``'s primitive on ``device`` (no copy where it is
    there already); a step count as it is."""
    if isinstance(tensor, int):
        return tensor
    if tensor._device is not device:
        tensor = tensor.to_device(device)
    return _core.make(tensor._prim, tensor._device, tensor._dtype)
