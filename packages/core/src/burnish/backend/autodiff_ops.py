"""The optional protocol of backends that compute gradients (``burnish.autodiff.Autodiff``).

It is not part of ``Backend``: plain backends never implement it, and ``Tensor`` checks for it
before ``backward()``, ``grad()``, ``require_grad()`` and the other gradient methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from burnish.backend.base import Primitive

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.device import Device
    from burnish.dtype import DType


class AutodiffOps(ABC):
    """Reverse-mode differentiation around an inner backend (Burn's ``AutodiffBackend``).

    Primitives of an autodiff backend wrap primitives of its inner backend. Its devices wrap the
    inner backend's: ``device.native`` is the inner ``Device``. Gradients are kept in a separate
    object returned by ``backward`` (never on the tensors), holding primitives of the inner
    backend, and only for leaves: tensors made ``require_grad`` and not computed from others.
    """

    @property
    @abstractmethod
    def inner_backend(self) -> Backend:
        """The backend this one wraps (``ndarray`` for ``autodiff+ndarray``)."""

    @abstractmethod
    def wrap_device(self, device: Device) -> Device:
        """This backend's device around ``device``, a device of the inner backend."""

    @abstractmethod
    def require_grad(self, x: Primitive, dtype: DType) -> Primitive:
        """``x`` as a leaf whose gradient ``backward`` computes (``x`` itself when it is one)."""

    @abstractmethod
    def is_require_grad(self, x: Primitive) -> bool:
        """Whether gradients flow to or through ``x`` (a leaf that requires grad or a tensor
        computed from one)."""

    @abstractmethod
    def detach(self, x: Primitive) -> Primitive:
        """``x``'s values, cut from the graph: no gradient flows through the result."""

    @abstractmethod
    def backward(self, x: Primitive, dtype: DType) -> Any:
        """The gradients of ``sum(x)`` with respect to every leaf ``x`` depends on, as a
        ``Gradients`` object; the graph behind ``x`` is freed."""

    @abstractmethod
    def grad(self, x: Primitive, grads: Any) -> Primitive | None:
        """The gradient of the leaf ``x`` in ``grads`` (an inner primitive), or None."""

    @abstractmethod
    def grad_remove(self, x: Primitive, grads: Any) -> Primitive | None:
        """Like ``grad``, and the gradient is removed from ``grads``."""

    @abstractmethod
    def inner(self, x: Primitive) -> Primitive:
        """The inner backend's primitive holding ``x``'s values (no graph)."""

    @abstractmethod
    def from_inner(self, x: Primitive) -> Primitive:
        """A primitive of this backend around the inner backend's ``x``, not tracked."""
