"""Logic on NumPy bool arrays and its reductions."""

from __future__ import annotations

import numpy as np

from burnish.backend.bool_ops import BoolOps


class NdArrayBoolOps(BoolOps):
    """Bool ops; ``any`` and ``all`` keep a reduced dim with size 1, as every reduction does."""

    def logical_and(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return np.logical_and(lhs, rhs)

    def logical_or(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return np.logical_or(lhs, rhs)

    def logical_xor(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return np.logical_xor(lhs, rhs)

    def logical_not(self, x: np.ndarray) -> np.ndarray:
        return np.logical_not(x)

    def any(self, x: np.ndarray, dim: int | None) -> np.ndarray:
        return np.asarray(np.any(x, axis=dim, keepdims=dim is not None))

    def all(self, x: np.ndarray, dim: int | None) -> np.ndarray:
        return np.asarray(np.all(x, axis=dim, keepdims=dim is not None))
