"""The Tensor type and the free functions that make or combine tensors."""

from burnish.tensor.layout import cat, stack, where
from burnish.tensor.tensor import Tensor

__all__ = ["Tensor", "cat", "stack", "where"]
