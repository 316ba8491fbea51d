"""Embedding: a learned vector per token id."""

from __future__ import annotations

from burnish import Device, Tensor
from burnish import functional as F
from burnish.nn.config import Config
from burnish.nn.initializer import Initializer, Normal
from burnish.nn.module import Module
from burnish.nn.param import Param


class EmbeddingConfig(Config):
    n_embedding: int
    d_model: int
    initializer: Initializer = Normal(0.0, 1.0)

    def init(self, device: Device | str | None = None) -> Embedding:
        weight = self.initializer.init([self.n_embedding, self.d_model], device,
                                       self.n_embedding, self.d_model)
        return Embedding(weight)


class Embedding(Module):
    """Rows of ``weight`` (``[n_embedding, d_model]``) at int ``indices`` of any shape:
    ``[*indices.shape, d_model]``."""

    weight: Param

    def forward(self, indices: Tensor) -> Tensor:
        return F.embedding(self.weight.val(), indices)
