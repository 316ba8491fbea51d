"""Ops on tensors of any kind that move, select or combine elements without computing on them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from burnish.backend.base import Primitive, Scalar
from burnish.dtype import DType

#: One ``(start, stop, step)`` per dim, all normalised: 0 <= start <= stop <= size, step >= 1.
Ranges = tuple[tuple[int, int, int], ...]


class LayoutOps(ABC):
    """Reshaping, indexing, gathering and joining; every dtype."""

    @abstractmethod
    def reshape(self, x: Primitive, shape: tuple[int, ...]) -> Primitive:
        """``x``'s elements in row-major order, laid out as ``shape`` (same element count)."""

    @abstractmethod
    def permute(self, x: Primitive, axes: tuple[int, ...]) -> Primitive:
        """Dims reordered: output dim ``i`` is input dim ``axes[i]``."""

    @abstractmethod
    def expand(self, x: Primitive, shape: tuple[int, ...]) -> Primitive:
        """``x`` broadcast to ``shape`` (size-1 dims repeat, new leading dims are added)."""

    @abstractmethod
    def flip(self, x: Primitive, axes: tuple[int, ...]) -> Primitive:
        """Elements in reverse order along each of ``axes``."""

    @abstractmethod
    def slice(self, x: Primitive, ranges: Ranges) -> Primitive:
        """The elements of ``x`` in ``ranges`` (one ``(start, stop, step)`` per dim)."""

    @abstractmethod
    def slice_assign(self, x: Primitive, ranges: Ranges, value: Primitive) -> Primitive:
        """A copy of ``x`` with the elements in ``ranges`` replaced by ``value`` (of that shape)."""

    def split(self, x: Primitive, sizes: Sequence[int], dim: int) -> list[Primitive]:
        """``x`` cut along ``dim`` into consecutive pieces of ``sizes`` (non-negative, adding up
        to the dim's size), each what ``slice`` gives (Burn's ``split_with_sizes``). One op, so
        that autodiff differentiates all the pieces together: one ``cat`` of their gradients,
        not a full-size gradient per piece."""
        pieces, start = [], 0
        ranges = [(0, n, 1) for n in x.shape]
        for size in sizes:
            ranges[dim] = (start, start + size, 1)
            pieces.append(self.slice(x, tuple(ranges)))
            start += size
        return pieces

    @abstractmethod
    def gather(self, x: Primitive, dim: int, indices: Primitive) -> Primitive:
        """``out[..., i, ...] = x[..., indices[..., i, ...], ...]`` along ``dim``.

        ``indices`` is int64 with ``x``'s number of dims and is no larger than ``x`` in any
        other dim; the output has ``indices``' shape. Indices are in range (Tensor checks).
        """

    @abstractmethod
    def scatter_add(self, x: Primitive, dim: int, indices: Primitive, values: Primitive
                    ) -> Primitive:
        """A copy of ``x`` where ``values[..., i, ...]`` is added at ``indices[..., i, ...]`` along
        ``dim``; repeated indices accumulate. ``indices`` and ``values`` have one shape."""

    @abstractmethod
    def select(self, x: Primitive, dim: int, indices: Primitive) -> Primitive:
        """The slices of ``x`` at the 1-d int64 ``indices`` along ``dim`` (index_select)."""

    @abstractmethod
    def select_add(self, x: Primitive, dim: int, indices: Primitive, values: Primitive
                   ) -> Primitive:
        """A copy of ``x`` where slice ``k`` of ``values`` along ``dim`` is added to slice
        ``indices[k]``; repeated indices accumulate (index_add)."""

    @abstractmethod
    def cat(self, xs: Sequence[Primitive], dim: int) -> Primitive:
        """``xs`` joined along ``dim`` (same shape in every other dim)."""

    @abstractmethod
    def where(self, mask: Primitive, x: Primitive, y: Primitive) -> Primitive:
        """``x`` where the bool ``mask`` is true, else ``y``; all three broadcast together."""

    def mask_fill(self, x: Primitive, mask: Primitive, value: Scalar, dtype: DType) -> Primitive:
        """``x`` with ``value`` where the bool ``mask`` (broadcastable to ``x``) is true."""
        filled = self.full((), value, dtype, self._device_of(x))
        return self.where(mask, filled, x)

    def repeat_dim(self, x: Primitive, dim: int, times: int) -> Primitive:
        """``x`` concatenated ``times`` times with itself along ``dim``."""
        return self.cat([x] * times, dim)

    @abstractmethod
    def equal(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """Bool: ``lhs == rhs`` elementwise, broadcast."""

    def not_equal(self, lhs: Primitive, rhs: Primitive) -> Primitive:
        """Bool: ``lhs != rhs`` elementwise, broadcast."""
        return self.logical_not(self.equal(lhs, rhs))

    def _device_of(self, x: Primitive):
        """The device ``x`` lives on; single-device backends need not override this."""
        return self.default_device()
