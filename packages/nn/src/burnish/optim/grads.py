"""GradientsParams: a module's gradients keyed by parameter id, and clipping them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from burnish import Tensor
from burnish.nn.module import Module


class GradientsParams:
    """Gradients by parameter id, as tensors of the inner backend (Burn's ``GradientsParams``).

    ``from_grads(grads, module)`` takes the gradients of ``module``'s trained parameters out of
    what ``loss.backward()`` returned. ``merge`` sums two of them (gradient accumulation) and
    ``scale`` multiplies them (the mean over accumulated steps).
    """

    def __init__(self, grads: dict[str, Tensor] | None = None):
        self.grads: dict[str, Tensor] = dict(grads or {})

    @classmethod
    def from_grads(cls, grads: Any, module: Module) -> GradientsParams:
        found = {}
        for param in module.params():
            if param.require_grad:
                grad = param.val().grad_remove(grads)
                if grad is not None:
                    found[param.id] = grad
        return cls(found)

    def get(self, param_id: str) -> Tensor | None:
        return self.grads.get(param_id)

    def __len__(self) -> int:
        return len(self.grads)

    def merge(self, other: GradientsParams) -> GradientsParams:
        merged = dict(self.grads)
        for key, grad in other.grads.items():
            merged[key] = grad if key not in merged else merged[key] + grad
        return GradientsParams(merged)

    def scale(self, factor: float) -> GradientsParams:
        return GradientsParams({key: grad * factor for key, grad in self.grads.items()})


class GradientsAccumulator:
    """Sums the gradients of several backward passes before one optimizer step."""

    def __init__(self) -> None:
        self.total = GradientsParams()
        self.count = 0

    def accumulate(self, module: Module, grads: Any) -> None:
        if not isinstance(grads, GradientsParams):
            grads = GradientsParams.from_grads(grads, module)
        self.total = self.total.merge(grads)
        self.count += 1

    def grads(self, mean: bool = False) -> GradientsParams:
        """The accumulated gradients (their mean when ``mean``), and start again from none."""
        total, count = self.total, self.count
        self.total, self.count = GradientsParams(), 0
        return total.scale(1.0 / count) if mean and count else total


@dataclass(frozen=True)
class GradientClipping:
    """Clip each gradient by ``value`` (elementwise into ``[-value, value]``) or by ``norm``
    (scaled so its L2 norm is at most ``norm``), parameter by parameter as Burn does."""

    value: float | None = None
    norm: float | None = None

    def clip(self, grad: Tensor) -> Tensor:
        if self.value is not None:
            grad = grad.clamp(-self.value, self.value)
        if self.norm is not None:
            total = float((grad * grad).sum().sqrt().item())
            if total > self.norm:
                grad = grad * (self.norm / (total + 1e-6))
        return grad

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "norm": self.norm}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GradientClipping:
        return cls(**values)
