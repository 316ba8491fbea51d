"""Bitwise logic on NumPy int arrays (two's complement), one ufunc each."""

from __future__ import annotations

import numpy as np

from burnish.backend.int_ops import IntOps


class NdArrayIntOps(IntOps):
    """Bitwise ops; results keep the operands' int dtype."""

    def bitwise_and(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return np.bitwise_and(lhs, rhs)

    def bitwise_or(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return np.bitwise_or(lhs, rhs)

    def bitwise_xor(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return np.bitwise_xor(lhs, rhs)

    def bitwise_not(self, x: np.ndarray) -> np.ndarray:
        return np.invert(x)
