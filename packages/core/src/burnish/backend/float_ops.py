"""Ops on float tensors only: transcendental functions, rounding, and NaN/inf tests."""

from __future__ import annotations

from abc import ABC, abstractmethod

from burnish.backend.base import Primitive
from burnish.dtype import DType


class FloatOps(ABC):
    """Elementwise math defined on floats. Results keep the input's dtype."""

    @abstractmethod
    def exp(self, x: Primitive) -> Primitive:
        """``e ** x``."""

    @abstractmethod
    def log(self, x: Primitive) -> Primitive:
        """Natural logarithm (``-inf`` at 0, NaN below)."""

    def log1p(self, x: Primitive, dtype: DType) -> Primitive:
        """``log(1 + x)``, accurate near 0 on backends that override it."""
        return self.log(self.add_scalar(x, 1.0, dtype))

    @abstractmethod
    def sqrt(self, x: Primitive) -> Primitive:
        """Square root (NaN below 0)."""

    def rsqrt(self, x: Primitive, dtype: DType) -> Primitive:
        """``1 / sqrt(x)``."""
        return self.recip(self.sqrt(x), dtype)

    def recip(self, x: Primitive, dtype: DType) -> Primitive:
        """``1 / x``."""
        return self.div(self.full((), 1.0, dtype, self._device_of(x)), x)

    @abstractmethod
    def sin(self, x: Primitive) -> Primitive:
        """Sine (radians)."""

    @abstractmethod
    def cos(self, x: Primitive) -> Primitive:
        """Cosine (radians)."""

    def tan(self, x: Primitive) -> Primitive:
        """Tangent (radians)."""
        return self.div(self.sin(x), self.cos(x))

    @abstractmethod
    def tanh(self, x: Primitive) -> Primitive:
        """Hyperbolic tangent."""

    @abstractmethod
    def erf(self, x: Primitive) -> Primitive:
        """The error function, to the dtype's precision."""

    @abstractmethod
    def floor(self, x: Primitive) -> Primitive:
        """Largest integer not above ``x``."""

    @abstractmethod
    def ceil(self, x: Primitive) -> Primitive:
        """Smallest integer not below ``x``."""

    @abstractmethod
    def round(self, x: Primitive) -> Primitive:
        """Nearest integer, halves to even (as NumPy and PyTorch)."""

    def is_nan(self, x: Primitive) -> Primitive:
        """Bool: ``x`` is NaN."""
        return self.not_equal(x, x)

    @abstractmethod
    def is_inf(self, x: Primitive) -> Primitive:
        """Bool: ``x`` is +inf or -inf."""
