"""Tensor's gradient methods, for tensors of an autodiff backend (``autodiff+ndarray``...)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from burnish.backend.autodiff_ops import AutodiffOps
from burnish.dtype import Kind
from burnish.errors import AutodiffError, DTypeError
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.tensor.tensor import Tensor


class AutodiffMixin:
    """Gradients, Burn's way: ``backward()`` returns a ``Gradients`` object and ``grad(grads)``
    reads a leaf's gradient from it; nothing is stored on the tensors, so a model can be moved
    to another thread and its gradients sent back.

    These methods need a backend that implements ``burnish.backend.AutodiffOps``; on any other
    they raise ``AutodiffError`` saying how to wrap the backend (``detach`` and
    ``is_require_grad`` work everywhere).
    """

    __slots__ = ()

    def _autodiff(self, op: str) -> AutodiffOps:
        backend = self._device.backend
        if not isinstance(backend, AutodiffOps):
            raise AutodiffError(
                f"{op}() needs a backend with autodiff, and {backend.name!r} has none; wrap it: "
                f"Autodiff(burnish.backend({backend.name!r})) from burnish.autodiff, or "
                f"burnish.backend('autodiff+{backend.name}') (pip install burnish-autodiff)"
            )
        return backend

    def _float_only(self, op: str) -> None:
        if self._dtype.kind is not Kind.FLOAT:
            raise DTypeError(f"{op}(): gradients are defined for float tensors only, got "
                             f"{self._dtype}")

    def require_grad(self) -> Tensor:
        """This tensor as a leaf whose gradient ``backward()`` computes (float tensors only).

        Raises ``AutodiffError`` on a backend without autodiff, and for a tensor computed from
        others that require grad (``detach()`` it first to start a new leaf).
        """
        backend = self._autodiff("require_grad")
        self._float_only("require_grad")
        prim = backend.require_grad(self._prim, self._dtype)
        return self if prim is self._prim else _core.make(prim, self._device, self._dtype)

    def set_require_grad(self, require_grad: bool) -> Tensor:
        """``require_grad()`` when true, else ``detach()``."""
        return self.require_grad() if require_grad else self.detach()

    def is_require_grad(self) -> bool:
        """Whether gradients flow to or through this tensor (False on backends without
        autodiff)."""
        backend = self._device.backend
        return isinstance(backend, AutodiffOps) and backend.is_require_grad(self._prim)

    def detach(self) -> Tensor:
        """The same values cut from the graph: no gradient flows through the result (the tensor
        itself on backends without autodiff)."""
        backend = self._device.backend
        if not isinstance(backend, AutodiffOps):
            return self
        prim = backend.detach(self._prim)
        return self if prim is self._prim else _core.make(prim, self._device, self._dtype)

    def backward(self) -> Any:
        """The gradients of the sum of this tensor's elements with respect to every leaf it
        depends on, as a ``burnish.autodiff.Gradients`` object (empty when it depends on none).

        The graph behind this tensor is freed: a second ``backward()`` through it raises
        ``AutodiffError``.
        """
        backend = self._autodiff("backward")
        self._float_only("backward")
        return backend.backward(self._prim, self._dtype)

    def grad(self, grads: Any) -> Tensor | None:
        """This leaf's gradient in ``grads`` as a tensor of the inner backend (not tracked), or
        None when ``grads`` holds none for it."""
        backend = self._autodiff("grad")
        return self._inner_tensor(backend.grad(self._prim, grads))

    def grad_remove(self, grads: Any) -> Tensor | None:
        """Like ``grad``, and the gradient is removed from ``grads``."""
        backend = self._autodiff("grad_remove")
        return self._inner_tensor(backend.grad_remove(self._prim, grads))

    def inner(self) -> Tensor:
        """The same values as a tensor of the inner backend (no graph; Burn's ``inner()``)."""
        backend = self._autodiff("inner")
        return self._inner_tensor(backend.inner(self._prim))

    @classmethod
    def from_inner(cls, tensor: Tensor, backend: Backend | None = None) -> Tensor:
        """``tensor`` (of a plain backend) as a tensor of ``backend``, an autodiff backend
        around it; by default ``Autodiff(tensor.backend)``. Not tracked: call ``require_grad()``
        to make it a leaf."""
        if backend is None:
            from burnish.registry import decorate

            backend = decorate("autodiff", tensor.backend)
        if not isinstance(backend, AutodiffOps):
            raise AutodiffError(f"from_inner(): backend {backend.name!r} has no autodiff")
        if backend.inner_backend is not tensor.backend:
            raise AutodiffError(f"from_inner(): {backend.name!r} wraps "
                                f"{backend.inner_backend.name!r}, not the tensor's backend "
                                f"{tensor.backend.name!r}")
        device = backend.wrap_device(tensor._device)
        return _core.make(backend.from_inner(tensor._prim), device, tensor._dtype)

    def _inner_tensor(self, prim: Any) -> Tensor | None:
        if prim is None:
            return None
        return _core.make(prim, self._device.native, self._dtype)
