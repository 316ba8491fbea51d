"""Ops on bool tensors only: logic and its reductions."""

from __future__ import annotations

from abc import ABC, abstractmethod

from burnish.backend.base import Primitive
from burnish.dtype import bool_, int64


class BoolOps(ABC):
    """Logical operations on bools, broadcast where binary."""

    @abstractmethod
    def logical_and(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs and rhs``."""

    @abstractmethod
    def logical_or(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs or rhs``."""

    def logical_xor(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs != rhs``."""
        return self.not_equal(lhs, rhs)

    @abstractmethod
    def logical_not(self, x: Primitive) -> Primitive:
        """``not x``."""

    def any(self, x: Primitive, dim: int | None) -> Primitive:
        """Bool: some element of the bool ``x`` is true; ``dim`` as for reductions."""
        counts = self.sum(self.cast(x, bool_, int64), dim)
        return self.greater(counts, self.full((), 0, int64, self._device_of(x)))

    def all(self, x: Primitive, dim: int | None) -> Primitive:
        """Bool: every element of the bool ``x`` is true; ``dim`` as for reductions."""
        return self.logical_not(self.any(self.logical_not(x), dim))
