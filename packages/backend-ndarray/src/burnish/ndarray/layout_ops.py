"""Reshaping, indexing, gathering and joining on NumPy arrays; views wherever NumPy gives one."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from burnish.backend.base import Scalar
from burnish.backend.layout_ops import LayoutOps, Ranges
from burnish.dtype import DType
from burnish.ndarray.dtypes import compute_dtype, element


class NdArrayLayoutOps(LayoutOps):
    """Layout ops. Ops that change values (``slice_assign``, ``scatter_add``, ``select_add``)
    write into a fresh copy, never into their input, which may be a user's array or a view."""

    def reshape(self, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return np.reshape(x, shape)

    def permute(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return np.transpose(x, axes)

    def expand(self, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(x, shape)

    def flip(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return np.flip(x, axes)

    def slice(self, x: np.ndarray, ranges: Ranges) -> np.ndarray:
        return x[tuple(slice(*r) for r in ranges)]

    def slice_assign(self, x: np.ndarray, ranges: Ranges, value: np.ndarray) -> np.ndarray:
        out = np.array(x)
        out[tuple(slice(*r) for r in ranges)] = value
        return out

    def gather(self, x: np.ndarray, dim: int, indices: np.ndarray) -> np.ndarray:
        # PyTorch's gather lets indices be smaller than x in the other dims; NumPy's
        # take_along_axis wants them equal (or broadcast), so cut x down to the indices first.
        x = _cut_to(x, indices.shape, dim)
        return np.take_along_axis(x, indices, axis=dim)

    def scatter_add(self, x: np.ndarray, dim: int, indices: np.ndarray, values: np.ndarray
                    ) -> np.ndarray:
        out = np.array(x, dtype=compute_dtype(x.dtype))
        grid = list(np.ogrid[tuple(slice(n) for n in indices.shape)])
        grid[dim] = indices
        np.add.at(out, tuple(grid), values)
        return out.astype(x.dtype, copy=False)

    def select(self, x: np.ndarray, dim: int, indices: np.ndarray) -> np.ndarray:
        return np.take(x, indices, axis=dim)

    def select_add(self, x: np.ndarray, dim: int, indices: np.ndarray, values: np.ndarray
                   ) -> np.ndarray:
        out = np.array(x, dtype=compute_dtype(x.dtype))
        np.add.at(out, (slice(None),) * dim + (indices,), values)
        return out.astype(x.dtype, copy=False)

    def cat(self, xs: Sequence[np.ndarray], dim: int) -> np.ndarray:
        return np.concatenate(xs, axis=dim)

    def where(self, mask: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.where(mask, x, y)

    def mask_fill(self, x: np.ndarray, mask: np.ndarray, value: Scalar, dtype: DType
                  ) -> np.ndarray:
        return np.where(mask, element(value, x.dtype), x)

    def repeat_dim(self, x: np.ndarray, dim: int, times: int) -> np.ndarray:
        reps = [1] * x.ndim
        reps[dim] = times
        return np.tile(x, reps)

    def equal(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return np.equal(lhs, rhs)

    def not_equal(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return np.not_equal(lhs, rhs)


def _cut_to(x: np.ndarray, shape: tuple[int, ...], dim: int) -> np.ndarray:
    """``x`` sliced to ``shape`` in every dim but ``dim`` (a view)."""
    if all(n == m for d, (n, m) in enumerate(zip(x.shape, shape)) if d != dim):
        return x
    return x[tuple(slice(None) if d == dim else slice(m) for d, m in enumerate(shape))]
