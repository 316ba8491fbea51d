"""``Autodiff``: the backend decorator that gives any backend reverse-mode gradients."""

from __future__ import annotations

import threading
from typing import Any

from burnish.autodiff.activation_ops import AutodiffActivationOps
from burnish.autodiff.attention_ops import AutodiffAttentionOps
from burnish.autodiff.base import AutodiffBase
from burnish.autodiff.bool_ops import AutodiffBoolOps
from burnish.autodiff.float_ops import AutodiffFloatOps
from burnish.autodiff.gradients import Gradients
from burnish.autodiff.graph import AutodiffPrimitive, Node, backward
from burnish.autodiff.int_ops import AutodiffIntOps
from burnish.autodiff.layout_ops import AutodiffLayoutOps
from burnish.autodiff.module_ops import AutodiffModuleOps
from burnish.autodiff.numeric_ops import AutodiffNumericOps
from burnish.autodiff.optim_ops import AutodiffOptimOps
from burnish.autodiff.quant_ops import AutodiffQuantOps
from burnish.autodiff.recurrent_ops import AutodiffRecurrentOps
from burnish.backend import Backend
from burnish.backend.autodiff_ops import AutodiffOps
from burnish.dtype import DType
from burnish.errors import AutodiffError

P = AutodiffPrimitive

_lock = threading.Lock()
_instances: dict[tuple[int, str], Autodiff] = {}


class Autodiff(
    AutodiffBase, AutodiffLayoutOps, AutodiffNumericOps, AutodiffFloatOps, AutodiffIntOps,
    AutodiffBoolOps, AutodiffModuleOps, AutodiffActivationOps, AutodiffAttentionOps,
    AutodiffOptimOps, AutodiffRecurrentOps, AutodiffQuantOps, Backend, AutodiffOps,
):
    """``Autodiff(inner)`` is a backend that runs every op on ``inner`` and records, for tensors
    that require grad and those computed from them, what backward needs (Burn's ``Autodiff``).

    One instance per inner backend and strategy: ``Autodiff(nd) is Autodiff(nd)``, and
    ``burnish.backend("autodiff+ndarray")`` is ``Autodiff(burnish.backend("ndarray"))``. Its name
    is ``"autodiff+" + inner.name``, its devices wrap the inner backend's and its dtypes are the
    inner backend's. ``checkpointing`` is ``"none"`` (keep what backward needs) or
    ``"balanced"`` (recompute cheap ops during backward instead; see
    ``burnish.autodiff.checkpoint``), named ``"autodiff-balanced+" + inner.name``.
    """

    def __new__(cls, inner: Backend, checkpointing: str = "none") -> Autodiff:
        if not isinstance(inner, Backend):
            raise TypeError(f"Autodiff wraps a backend, got {type(inner).__name__}")
        key = (id(inner), checkpointing)
        with _lock:
            found = _instances.get(key)
            if found is None:
                found = super().__new__(cls)
                found._setup(inner, checkpointing)
                _instances[key] = found
        return found

    def __init__(self, inner: Backend, checkpointing: str = "none"):
        """Everything is set up once, in ``__new__``, for the cached instance."""

    def __repr__(self) -> str:
        strategy = "" if self.checkpointing == "none" else f", checkpointing={self.checkpointing!r}"
        return f"Autodiff({self._inner!r}{strategy})"

    def __reduce__(self):
        return (Autodiff, (self._inner, self.checkpointing))

    # -- AutodiffOps ----------------------------------------------------------------------------

    @property
    def inner_backend(self) -> Backend:
        return self._inner

    def require_grad(self, x: P, dtype: DType) -> P:
        node = x.node
        if node is not None:
            if node.leaf_id:
                return x
            raise AutodiffError(
                "require_grad(): this tensor is computed from tensors that require grad, so it "
                "is not a leaf and backward() gives no gradient for it; detach() it first to "
                "start a new leaf"
            )
        return P(x.inner, Node.leaf(dtype))

    def is_require_grad(self, x: P) -> bool:
        return x.node is not None

    def detach(self, x: P) -> P:
        return x if x.node is None else P(x.inner)

    def backward(self, x: P, dtype: DType) -> Gradients:
        if x.node is None:
            # Burn's semantics: nothing this tensor depends on requires grad, so no gradients.
            return Gradients(self._inner)
        seed = self._inner.ones(x.shape, dtype, self._inner._device_of(x.inner))
        return Gradients(self._inner, backward(self._inner, x.node, seed, self._balanced))

    def grad(self, x: P, grads: Gradients) -> Any:
        return _check(grads)._get(x.node.leaf_id) if _is_leaf(x) else None  # type: ignore[union-attr]

    def grad_remove(self, x: P, grads: Gradients) -> Any:
        return _check(grads)._remove(x.node.leaf_id) if _is_leaf(x) else None  # type: ignore[union-attr]

    def inner(self, x: P) -> Any:
        return x.inner

    def from_inner(self, x: Any) -> P:
        return P(x)


def _is_leaf(x: P) -> bool:
    return x.node is not None and x.node.leaf_id != 0


def _check(grads: Any) -> Gradients:
    if not isinstance(grads, Gradients):
        raise TypeError(f"expected the Gradients that backward() returned, got "
                        f"{type(grads).__name__}")
    return grads
