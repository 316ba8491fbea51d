"""Logic on bools: forwarded to the inner backend; bool results have no gradient."""

from __future__ import annotations

from burnish.autodiff.graph import AutodiffPrimitive
from burnish.backend.bool_ops import BoolOps

P = AutodiffPrimitive


class AutodiffBoolOps(BoolOps):
    """Logical ops and their reductions, never tracked."""

    def logical_and(self, lhs: P, rhs: P) -> P:
        return P(self._inner.logical_and(lhs.inner, rhs.inner))

    def logical_or(self, lhs: P, rhs: P) -> P:
        return P(self._inner.logical_or(lhs.inner, rhs.inner))

    def logical_xor(self, lhs: P, rhs: P) -> P:
        return P(self._inner.logical_xor(lhs.inner, rhs.inner))

    def logical_not(self, x: P) -> P:
        return P(self._inner.logical_not(x.inner))

    def any(self, x: P, dim: int | None) -> P:
        return P(self._inner.any(x.inner, dim))

    def all(self, x: P, dim: int | None) -> P:
        return P(self._inner.all(x.inner, dim))
