"""Logical ops on bools as elementwise kernels (``any``/``all`` are reductions: ``reduce_ops``)."""

from __future__ import annotations

from burnish.backend.bool_ops import BoolOps
from burnish.dtype import bool_
from burnish.jit.kernels.elementwise import elementwise


class JitBoolOps(BoolOps):
    def logical_and(self, lhs, rhs):
        return elementwise("logical_and", lambda v, s: v[0].and_(v[1]), [lhs, rhs], bool_)

    def logical_or(self, lhs, rhs):
        return elementwise("logical_or", lambda v, s: v[0].or_(v[1]), [lhs, rhs], bool_)

    def logical_xor(self, lhs, rhs):
        return elementwise("logical_xor", lambda v, s: v[0].ne(v[1]), [lhs, rhs], bool_)

    def logical_not(self, x):
        return elementwise("logical_not", lambda v, s: v[0].not_(), [x], bool_)
