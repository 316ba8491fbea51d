"""Ops on float and int tensors: arithmetic, comparisons, reductions, scans and sorting."""

from __future__ import annotations

from abc import ABC, abstractmethod

from burnish.backend.base import Primitive, Scalar
from burnish.dtype import DType, int64


class NumericOps(ABC):
    """Arithmetic on numbers of either kind. Results keep the operands' dtype unless stated."""

    # -- arithmetic ---------------------------------------------------------------------------

    @abstractmethod
    def add(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs + rhs``, broadcast."""

    @abstractmethod
    def sub(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs - rhs``, broadcast."""

    @abstractmethod
    def mul(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs * rhs``, broadcast."""

    def mul_add(self, x: Primitive, a: Primitive, b: Primitive) -> Primitive:
        """``x * a + b``, the three broadcast together (Rust's ``mul_add``): one pass where a
        backend fuses it, as for a BatchNorm's per-channel scale and shift."""
        return self.add(self.mul(x, a), b)

    @abstractmethod
    def div(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs / rhs`` for floats; floor division (Python's ``//``) for ints."""

    @abstractmethod
    def remainder(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """Python's ``%``: the result has the sign of ``rhs``."""

    @abstractmethod
    def pow(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """``lhs ** rhs``, broadcast (ints: negative exponents are the caller's error)."""

    def add_scalar(self, x: Primitive, value: Scalar, dtype: DType) -> Primitive:
        """``x + value``."""
        return self.add(x, self.full((), value, dtype, self._device_of(x)))

    def sub_scalar(self, x: Primitive, value: Scalar, dtype: DType) -> Primitive:
        """``x - value``."""
        return self.sub(x, self.full((), value, dtype, self._device_of(x)))

    def mul_scalar(self, x: Primitive, value: Scalar, dtype: DType) -> Primitive:
        """``x * value``."""
        return self.mul(x, self.full((), value, dtype, self._device_of(x)))

    def div_scalar(self, x: Primitive, value: Scalar, dtype: DType) -> Primitive:
        """``x / value`` (floor division for ints)."""
        return self.div(x, self.full((), value, dtype, self._device_of(x)))

    def pow_scalar(self, x: Primitive, value: Scalar, dtype: DType) -> Primitive:
        """``x ** value``."""
        return self.pow(x, self.full((), value, dtype, self._device_of(x)))

    # -- donating forms: the caller gives ``x`` up ------------------------------------------
    # The caller holds no other reference to ``x`` after the call; the result has ``x``'s shape
    # and dtype (``y`` broadcasts into ``x``). A backend MAY write the result into ``x``'s buffer
    # when nothing else references it, so that an optimizer step allocates little (Burn's
    # in-place ops). The defaults are the out-of-place ops, which every backend may keep.

    def add_assign(self, x: Primitive, y: Primitive) -> Primitive:
        """``x + y`` for a donated ``x`` (may reuse ``x``'s buffer; see above)."""
        return self.add(x, y)

    def sub_assign(self, x: Primitive, y: Primitive) -> Primitive:
        """``x - y`` for a donated ``x`` (may reuse ``x``'s buffer)."""
        return self.sub(x, y)

    def mul_assign(self, x: Primitive, y: Primitive) -> Primitive:
        """``x * y`` for a donated ``x`` (may reuse ``x``'s buffer)."""
        return self.mul(x, y)

    def div_assign(self, x: Primitive, y: Primitive) -> Primitive:
        """``div(x, y)`` for a donated ``x`` (may reuse ``x``'s buffer)."""
        return self.div(x, y)

    def add_scalar_assign(self, x: Primitive, value: Scalar, dtype: DType) -> Primitive:
        """``x + value`` for a donated ``x`` (may reuse ``x``'s buffer)."""
        return self.add_scalar(x, value, dtype)

    def mul_scalar_assign(self, x: Primitive, value: Scalar, dtype: DType) -> Primitive:
        """``x * value`` for a donated ``x`` (may reuse ``x``'s buffer)."""
        return self.mul_scalar(x, value, dtype)

    def neg(self, x: Primitive, dtype: DType) -> Primitive:
        """``-x``."""
        return self.mul_scalar(x, -1, dtype)

    @abstractmethod
    def abs(self, x: Primitive) -> Primitive:
        """``|x|``."""

    @abstractmethod
    def sign(self, x: Primitive) -> Primitive:
        """-1, 0 or 1 by the sign of ``x`` (NaN stays NaN)."""

    @abstractmethod
    def maximum(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """The larger of ``lhs`` and ``rhs`` elementwise, broadcast; NaN wins."""

    @abstractmethod
    def minimum(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """The smaller of ``lhs`` and ``rhs`` elementwise, broadcast; NaN wins."""

    def clamp(self, x: Primitive, low: Scalar | None, high: Scalar | None, dtype: DType
              ) -> Primitive:
        """``x`` limited to ``[low, high]`` (``None``: no bound on that side); NaN stays NaN."""
        device = self._device_of(x)
        if low is not None:
            x = self.maximum(x, self.full((), low, dtype, device))
        if high is not None:
            x = self.minimum(x, self.full((), high, dtype, device))
        return x

    @abstractmethod
    def matmul(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """Matrix product over the last two dims; leading (batch) dims broadcast. Both >= 2-d."""

    # -- comparisons (bool results) -----------------------------------------------------------

    @abstractmethod
    def greater(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """Bool: ``lhs > rhs``, broadcast."""

    @abstractmethod
    def greater_equal(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """Bool: ``lhs >= rhs``, broadcast."""

    def lower(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """Bool: ``lhs < rhs``, broadcast."""
        return self.greater(rhs, lhs)

    def lower_equal(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """Bool: ``lhs <= rhs``, broadcast."""
        return self.greater_equal(rhs, lhs)

    # -- reductions ---------------------------------------------------------------------------
    # ``dim=None`` reduces every element to a 0-d result; an int reduces that dim, keeping it
    # with size 1 (Tensor removes it when keepdim is false).

    @abstractmethod
    def sum(self, x: Primitive, dim: int | None) -> Primitive:
        """Sum of the elements (ints accumulate in their own dtype)."""

    def mean(self, x: Primitive, dim: int | None, dtype: DType) -> Primitive:
        """Arithmetic mean (float dtypes)."""
        count = _count(x.shape, dim)
        return self.div_scalar(self.sum(x, dim), float(max(count, 1)) if count else float("nan"),
                               dtype)

    @abstractmethod
    def prod(self, x: Primitive, dim: int | None) -> Primitive:
        """Product of the elements."""

    @abstractmethod
    def max(self, x: Primitive, dim: int | None) -> Primitive:
        """Largest element (NaN if any is NaN). The reduced dim must not be empty."""

    @abstractmethod
    def min(self, x: Primitive, dim: int | None) -> Primitive:
        """Smallest element (NaN if any is NaN). The reduced dim must not be empty."""

    @abstractmethod
    def argmax(self, x: Primitive, dim: int) -> Primitive:
        """int64 index of the first largest element along ``dim`` (kept, size 1); NaN wins."""

    @abstractmethod
    def argmin(self, x: Primitive, dim: int) -> Primitive:
        """int64 index of the first smallest element along ``dim`` (kept, size 1); NaN wins."""

    def max_with_indices(self, x: Primitive, dim: int) -> tuple[Primitive, Primitive]:
        """``(max(x, dim), argmax(x, dim))``."""
        indices = self.argmax(x, dim)
        return self.gather(x, dim, indices), indices

    def min_with_indices(self, x: Primitive, dim: int) -> tuple[Primitive, Primitive]:
        """``(min(x, dim), argmin(x, dim))``."""
        indices = self.argmin(x, dim)
        return self.gather(x, dim, indices), indices

    def var(self, x: Primitive, dim: int | None, correction: int, dtype: DType) -> Primitive:
        """Variance with ``correction`` subtracted from the count (1: unbiased, Bessel)."""
        mean = self.mean(x, dim, dtype)
        centered = self.sub(x, mean)
        count = _count(x.shape, dim) - correction
        squares = self.sum(self.mul(centered, centered), dim)
        return self.div_scalar(squares, float(count) if count > 0 else float("nan"), dtype)

    # -- scans and sorting --------------------------------------------------------------------

    @abstractmethod
    def cumsum(self, x: Primitive, dim: int) -> Primitive:
        """Running sum along ``dim``."""

    @abstractmethod
    def cumprod(self, x: Primitive, dim: int) -> Primitive:
        """Running product along ``dim``."""

    @abstractmethod
    def argsort(self, x: Primitive, dim: int, descending: bool) -> Primitive:
        """int64 indices that sort ``x`` along ``dim``; stable; NaN sorts as the largest value."""

    def sort(self, x: Primitive, dim: int, descending: bool) -> Primitive:
        """``x`` sorted along ``dim`` (stable; NaN last ascending, first descending)."""
        return self.gather(x, dim, self.argsort(x, dim, descending))

    def sort_with_indices(self, x: Primitive, dim: int, descending: bool
                          ) -> tuple[Primitive, Primitive]:
        """``(sort(x), argsort(x))`` in one go."""
        indices = self.argsort(x, dim, descending)
        return self.gather(x, dim, indices), indices

    def topk_with_indices(self, x: Primitive, dim: int, k: int) -> tuple[Primitive, Primitive]:
        """The ``k`` largest along ``dim``, largest first, with their int64 indices."""
        values, indices = self.sort_with_indices(x, dim, True)
        ranges = tuple((0, n, 1) if d != dim else (0, k, 1) for d, n in enumerate(x.shape))
        return self.slice(values, ranges), self.slice(indices, ranges)


INDEX_DTYPE = int64


def _count(shape: tuple[int, ...], dim: int | None) -> int:
    if dim is not None:
        return shape[dim]
    n = 1
    for d in shape:
        n *= d
    return n
