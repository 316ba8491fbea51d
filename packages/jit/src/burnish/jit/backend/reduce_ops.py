"""Reductions, arg-reductions, scans and sorting as kernels (``burnish.jit.kernels.reduce``,
``scan`` and ``sort``); every op reads its input through its strides, without a copy."""

from __future__ import annotations

from burnish.backend.numeric_ops import NumericOps
from burnish.jit.kernels.reduce import reduce
from burnish.jit.kernels.scan import scan
from burnish.jit.kernels.sort import sort


class JitReduceOps(NumericOps):
    """sum, prod, mean, max, min, any, all, argmax, argmin and their with-indices forms (one
    pass each), cumsum, cumprod, and sort, argsort and their pair (one sort each)."""

    def sum(self, x, dim):
        return reduce("sum", x, dim)[0]

    def prod(self, x, dim):
        return reduce("prod", x, dim)[0]

    def mean(self, x, dim, dtype):
        # The division happens before the one rounding of half floats.
        return reduce("mean", x, dim)[0]

    def max(self, x, dim):
        return reduce("max", x, dim)[0]

    def min(self, x, dim):
        return reduce("min", x, dim)[0]

    def argmax(self, x, dim):
        return reduce("argmax", x, dim)[0]

    def argmin(self, x, dim):
        return reduce("argmin", x, dim)[0]

    def max_with_indices(self, x, dim):
        values, indices = reduce("max_with_indices", x, dim)
        return values, indices

    def min_with_indices(self, x, dim):
        values, indices = reduce("min_with_indices", x, dim)
        return values, indices

    def any(self, x, dim):
        return reduce("any", x, dim)[0]

    def all(self, x, dim):
        return reduce("all", x, dim)[0]

    # -- scans and sorting --------------------------------------------------------------------

    def cumsum(self, x, dim):
        return scan("sum", x, dim)

    def cumprod(self, x, dim):
        return scan("prod", x, dim)

    def argsort(self, x, dim, descending):
        return sort(x, dim, descending)[1]

    def sort(self, x, dim, descending):
        return sort(x, dim, descending)[0]

    def sort_with_indices(self, x, dim, descending):
        return sort(x, dim, descending)
