"""Dropout: zero inputs at random while training."""

from __future__ import annotations

from burnish import Distribution, Tensor
from burnish.nn.module import Module
from burnish.nn.param import is_autodiff


class Dropout(Module):
    """Each element is zeroed with probability ``prob`` and the rest scaled by
    ``1 / (1 - prob)``, while training; the identity otherwise.

    Training means running on an autodiff backend, as in Burn: ``module.valid()`` (or a module
    on a plain backend) turns dropout off. Draws come from the backend's generator, so
    ``burnish.seed`` makes them reproducible.
    """

    prob: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.prob < 1.0:
            raise ValueError(f"dropout prob must be in [0, 1), got {self.prob}")

    def forward(self, x: Tensor) -> Tensor:
        if self.prob == 0.0 or not is_autodiff(x):
            return x
        keep = Tensor.random(x.shape, Distribution.bernoulli(1.0 - self.prob), x.device,
                             x.dtype)
        return x * keep * (1.0 / (1.0 - self.prob))
