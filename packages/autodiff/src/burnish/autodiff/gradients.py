"""``Gradients``: what ``backward()`` returns, apart from the tensors it differentiates."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from burnish.errors import AutodiffError

if TYPE_CHECKING:
    from burnish import Tensor
    from burnish.backend import Backend


class Gradients:
    """The gradients of one or more backward passes, one per leaf, as primitives of the inner
    backend (Burn's ``Gradients``).

    Read a leaf's gradient with ``leaf.grad(grads)`` (a tensor of the inner backend) and take it
    out with ``leaf.grad_remove(grads)``. Gradients are never stored on the tensors: a model can
    be differentiated in another thread and its ``Gradients`` sent back, and ``a.merge(b)`` (or
    ``a + b``) sums the gradients of two passes leaf by leaf. Reading from several threads at
    once is safe; so is removing, which takes a lock.
    """

    __slots__ = ("_backend", "_grads", "_lock")

    def __init__(self, backend: Backend, grads: dict[int, Any] | None = None):
        #: The inner backend the gradients' primitives belong to.
        self._backend = backend
        self._grads: dict[int, Any] = dict(grads or {})
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """The number of leaves with a gradient."""
        return len(self._grads)

    def __contains__(self, tensor: Tensor) -> bool:
        return tensor.grad(self) is not None

    def get(self, tensor: Tensor) -> Tensor | None:
        """``tensor.grad(self)``: the leaf's gradient, or None."""
        return tensor.grad(self)

    def merge(self, other: Gradients) -> Gradients:
        """New gradients holding both: where both have a leaf, its gradients are summed."""
        if not isinstance(other, Gradients):
            raise TypeError(f"merge: expected Gradients, got {type(other).__name__}")
        if other._backend is not self._backend:
            raise AutodiffError(f"merge: gradients of backend {self._backend.name!r} and of "
                                f"{other._backend.name!r} cannot be merged")
        with self._lock:
            merged = dict(self._grads)
        with other._lock:
            theirs = list(other._grads.items())
        for leaf, grad in theirs:
            mine = merged.get(leaf)
            merged[leaf] = grad if mine is None else self._backend.add(mine, grad)
        return Gradients(self._backend, merged)

    __add__ = merge

    def __repr__(self) -> str:
        return f"Gradients({len(self._grads)} leaves, {self._backend.name})"

    # -- for the autodiff backend --------------------------------------------------------------

    def _get(self, leaf_id: int) -> Any:
        return self._grads.get(leaf_id)

    def _remove(self, leaf_id: int) -> Any:
        with self._lock:
            return self._grads.pop(leaf_id, None)
