"""Param: a module's trainable tensor, with the id optimizers key their state by."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from burnish import Tensor
from burnish.backend.autodiff_ops import AutodiffOps
from burnish.errors import AutodiffError, DTypeError

if TYPE_CHECKING:
    from burnish.device import Device
    from burnish.dtype import DType
    from burnish.shape import Shape


def new_param_id() -> str:
    """A fresh parameter id: random, so ids of models built in different processes never meet
    (Burn's ``ParamId``)."""
    return secrets.token_hex(8)


def is_autodiff(tensor: Tensor) -> bool:
    """Whether ``tensor`` lives on a backend that tracks gradients (training, in Burn's sense)."""
    return isinstance(tensor.backend, AutodiffOps)


class Param:
    """A float tensor a module is made of, an id, and whether it is trained.

    On an autodiff backend a parameter that requires grad holds a leaf tensor, so that
    ``loss.backward()`` computes its gradient; ``param.val().grad(grads)`` reads it. Params are
    values: the methods return new params and keep the id, which optimizers key their state by.
    """

    __slots__ = ("_tensor", "id", "require_grad")

    def __init__(self, tensor: Tensor, id: str | None = None, require_grad: bool = True):
        if not tensor.dtype.is_float:
            raise DTypeError(f"a parameter must be a float tensor, got {tensor.dtype}")
        self.id = new_param_id() if id is None else id
        self.require_grad = require_grad
        self._tensor = _as_leaf(tensor, require_grad)

    def val(self) -> Tensor:
        """The tensor (Burn's ``Param::val``)."""
        return self._tensor

    @property
    def shape(self) -> Shape:
        return self._tensor.shape

    @property
    def dtype(self) -> DType:
        return self._tensor.dtype

    @property
    def device(self) -> Device:
        return self._tensor.device

    def numel(self) -> int:
        return self._tensor.numel()

    def map(self, fn: Callable[[Tensor], Tensor]) -> Param:
        """A param with the same id and flag holding ``fn(tensor)``."""
        return Param(fn(self._tensor), self.id, self.require_grad)

    def with_tensor(self, tensor: Tensor) -> Param:
        """The same id and flag around another tensor (what an optimizer step returns)."""
        return Param(tensor, self.id, self.require_grad)

    def set_require_grad(self, require_grad: bool) -> Param:
        """The same param, trained or frozen."""
        return Param(self._tensor, self.id, require_grad)

    def __repr__(self) -> str:
        flag = "" if self.require_grad else ", frozen"
        return f"Param(id={self.id}, shape={list(self.shape)}, {self.dtype}{flag})"


def _as_leaf(tensor: Tensor, require_grad: bool) -> Tensor:
    if not is_autodiff(tensor):
        return tensor
    if not require_grad:
        return tensor.detach()
    try:
        return tensor.require_grad()
    except AutodiffError:
        # A tensor computed from other leaves: start a new leaf with its values.
        return tensor.detach().require_grad()
