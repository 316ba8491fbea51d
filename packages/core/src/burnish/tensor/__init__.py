"""The Tensor type and the free functions that make or combine tensors."""

from burnish.tensor.creation import multinomial
from burnish.tensor.layout import cat, stack, where
from burnish.tensor.named import NamedTensor
from burnish.tensor.tensor import Tensor

__all__ = ["NamedTensor", "Tensor", "cat", "multinomial", "stack", "where"]
