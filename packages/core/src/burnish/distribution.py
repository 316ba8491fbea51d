"""Distributions that random tensors are drawn from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Distribution:
    """A distribution for ``Tensor.random``: its kind and two parameters.

    - ``default()``: uniform on [0, 1)
    - ``uniform(low, high)``: uniform on [low, high)
    - ``normal(mean, std)``: Gaussian
    - ``bernoulli(p)``: 1 with probability ``p``, else 0
    """

    kind: str
    a: float = 0.0
    b: float = 1.0

    @classmethod
    def default(cls) -> Distribution:
        return cls("uniform", 0.0, 1.0)

    @classmethod
    def uniform(cls, low: float, high: float) -> Distribution:
        if not high > low:
            raise ValueError(f"uniform needs low < high, got low={low}, high={high}")
        return cls("uniform", float(low), float(high))

    @classmethod
    def normal(cls, mean: float = 0.0, std: float = 1.0) -> Distribution:
        if std < 0:
            raise ValueError(f"normal needs std >= 0, got {std}")
        return cls("normal", float(mean), float(std))

    @classmethod
    def bernoulli(cls, p: float) -> Distribution:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"bernoulli needs 0 <= p <= 1, got {p}")
        return cls("bernoulli", float(p), 0.0)
