"""Bitwise ops on ints: forwarded to the inner backend; int results have no gradient."""

from __future__ import annotations

from burnish.autodiff.graph import AutodiffPrimitive
from burnish.backend.int_ops import IntOps

P = AutodiffPrimitive


class AutodiffIntOps(IntOps):
    """Bitwise ops, never tracked."""

    def bitwise_and(self, lhs: P, rhs: P) -> P:
        return P(self._inner.bitwise_and(lhs.inner, rhs.inner))

    def bitwise_or(self, lhs: P, rhs: P) -> P:
        return P(self._inner.bitwise_or(lhs.inner, rhs.inner))

    def bitwise_xor(self, lhs: P, rhs: P) -> P:
        return P(self._inner.bitwise_xor(lhs.inner, rhs.inner))

    def bitwise_not(self, x: P) -> P:
        return P(self._inner.bitwise_not(x.inner))
