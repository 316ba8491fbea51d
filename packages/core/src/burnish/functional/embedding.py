"""Embedding lookup: rows of a weight matrix picked by int indices."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.errors import DTypeError, ShapeError
from burnish.shape import show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor


def embedding(weights: Tensor, indices: Tensor) -> Tensor:
    """Rows of ``weights`` ([num_embeddings, dim]) at ``indices`` (int, any shape):
    the result is ``[*indices.shape, dim]``."""
    if weights.ndim != 2:
        raise ShapeError(f"embedding: weights must be [num_embeddings, dim], got "
                         f"{show(weights.shape)}")
    if not indices.dtype.is_int:
        raise DTypeError(f"embedding: indices must be an int tensor, got {indices.dtype}")
    _core.same_device(weights, indices, "embedding")
    indices = weights._indices(indices, "embedding", weights.shape[0])
    prim = weights.backend.embedding(weights._prim, indices._prim)
    return _core.make(prim, weights.device, weights.dtype)
