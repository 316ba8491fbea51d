"""Bitwise ops on ints as elementwise kernels."""

from __future__ import annotations

from burnish.backend.int_ops import IntOps
from burnish.jit.kernels.elementwise import elementwise


class JitIntOps(IntOps):
    def bitwise_and(self, lhs, rhs):
        return elementwise("bitwise_and", lambda v, s: v[0] & v[1], [lhs, rhs], lhs.dtype)

    def bitwise_or(self, lhs, rhs):
        return elementwise("bitwise_or", lambda v, s: v[0] | v[1], [lhs, rhs], lhs.dtype)

    def bitwise_xor(self, lhs, rhs):
        return elementwise("bitwise_xor", lambda v, s: v[0] ^ v[1], [lhs, rhs], lhs.dtype)

    def bitwise_not(self, x):
        return elementwise("bitwise_not", lambda v, s: ~v[0], [x], x.dtype)
