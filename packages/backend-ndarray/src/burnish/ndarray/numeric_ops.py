"""Arithmetic, comparisons, reductions, scans and sorting on NumPy arrays, keeping the dtype."""

from __future__ import annotations

import sys

import numpy as np

from burnish.backend.base import Scalar
from burnish.backend.numeric_ops import NumericOps
from burnish.dtype import DType
from burnish.ndarray.dtypes import (
    BFLOAT16,
    FLOAT32,
    HALF_FLOATS,
    INT64,
    compute_dtype,
    element,
    quiet,
)

# Bound once: the hot binary ops are one ufunc call each (Tensor has checked the operands).
_add, _sub, _mul = np.add, np.subtract, np.multiply
_maximum, _minimum = np.maximum, np.minimum
_greater, _greater_equal, _less, _less_equal = np.greater, np.greater_equal, np.less, np.less_equal


class NdArrayNumericOps(NumericOps):
    """Numeric ops. Ints never promote (an int8 sum is int8); half floats accumulate in float32
    and round once."""

    # -- arithmetic ---------------------------------------------------------------------------

    def add(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return _add(lhs, rhs)

    def sub(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return _sub(lhs, rhs)

    def mul(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return _mul(lhs, rhs)

    def div(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        # Division by zero is inf/NaN for floats (and 0 for ints, where PyTorch would raise);
        # either way the value is the answer, not a warning.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if lhs.dtype.kind in "iu":
                return np.floor_divide(lhs, rhs)
            return np.true_divide(lhs, rhs)

    def remainder(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.remainder(lhs, rhs)

    def pow(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.power(lhs, rhs)

    def add_scalar(self, x: np.ndarray, value: Scalar, dtype: DType) -> np.ndarray:
        return _add(x, element(value, x.dtype))

    def sub_scalar(self, x: np.ndarray, value: Scalar, dtype: DType) -> np.ndarray:
        return _sub(x, element(value, x.dtype))

    def mul_scalar(self, x: np.ndarray, value: Scalar, dtype: DType) -> np.ndarray:
        return _mul(x, element(value, x.dtype))

    def div_scalar(self, x: np.ndarray, value: Scalar, dtype: DType) -> np.ndarray:
        return self.div(x, element(value, x.dtype))

    def pow_scalar(self, x: np.ndarray, value: Scalar, dtype: DType) -> np.ndarray:
        if value == 2:
            return _mul(x, x)
        return self.pow(x, element(value, x.dtype))

    # -- donating forms: in place when nothing else can see the buffer ------------------------

    def add_assign(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if _reusable(x, y):
            return _add(x, y, out=x)
        return _add(x, y)

    def sub_assign(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if _reusable(x, y):
            return _sub(x, y, out=x)
        return _sub(x, y)

    def mul_assign(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if _reusable(x, y):
            return _mul(x, y, out=x)
        return _mul(x, y)

    def div_assign(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if not _reusable(x, y):
            return self.div(x, y)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if x.dtype.kind in "iu":
                return np.floor_divide(x, y, out=x)
            return np.true_divide(x, y, out=x)

    def add_scalar_assign(self, x: np.ndarray, value: Scalar, dtype: DType) -> np.ndarray:
        if _reusable(x, None):
            return _add(x, element(value, x.dtype), out=x)
        return _add(x, element(value, x.dtype))

    def mul_scalar_assign(self, x: np.ndarray, value: Scalar, dtype: DType) -> np.ndarray:
        if _reusable(x, None):
            return _mul(x, element(value, x.dtype), out=x)
        return _mul(x, element(value, x.dtype))

    def neg(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        return np.negative(x)

    def abs(self, x: np.ndarray) -> np.ndarray:
        return np.abs(x)

    def sign(self, x: np.ndarray) -> np.ndarray:
        return np.sign(x)

    def maximum(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        if lhs.dtype is BFLOAT16:
            return _quiet(_maximum, lhs, rhs)
        return _maximum(lhs, rhs)

    def minimum(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        if lhs.dtype is BFLOAT16:
            return _quiet(_minimum, lhs, rhs)
        return _minimum(lhs, rhs)

    def clamp(self, x: np.ndarray, low: Scalar | None, high: Scalar | None, dtype: DType
              ) -> np.ndarray:
        # maximum/minimum rather than np.clip: they keep NaN and have bfloat16 loops.
        if low is not None:
            x = _maximum(x, element(low, x.dtype))
        if high is not None:
            x = _minimum(x, element(high, x.dtype))
        return x

    def matmul(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        # inf * 0 inside a dot product is NaN, the answer; not worth a warning.
        with np.errstate(invalid="ignore", over="ignore"):
            if lhs.dtype in HALF_FLOATS:
                # NumPy has no BLAS for float16 and ml_dtypes no bfloat16 matmul: float32, once.
                out = np.matmul(lhs.astype(FLOAT32), rhs.astype(FLOAT32))
                return out.astype(lhs.dtype)
            return np.matmul(lhs, rhs)

    # -- comparisons --------------------------------------------------------------------------

    def greater(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        if lhs.dtype is BFLOAT16:
            return _quiet(_greater, lhs, rhs)
        return _greater(lhs, rhs)

    def greater_equal(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        if lhs.dtype is BFLOAT16:
            return _quiet(_greater_equal, lhs, rhs)
        return _greater_equal(lhs, rhs)

    def lower(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        if lhs.dtype is BFLOAT16:
            return _quiet(_less, lhs, rhs)
        return _less(lhs, rhs)

    def lower_equal(self, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        if lhs.dtype is BFLOAT16:
            return _quiet(_less_equal, lhs, rhs)
        return _less_equal(lhs, rhs)

    # -- reductions ---------------------------------------------------------------------------

    def sum(self, x: np.ndarray, dim: int | None) -> np.ndarray:
        return _reduce(np.sum, x, dim)

    def prod(self, x: np.ndarray, dim: int | None) -> np.ndarray:
        return _reduce(np.prod, x, dim)

    def mean(self, x: np.ndarray, dim: int | None, dtype: DType) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            if x.size == 0 or (dim is not None and x.shape[dim] == 0):
                # NumPy warns "mean of empty slice"; the answer is NaN, as in PyTorch.
                shape = () if dim is None else x.shape[:dim] + (1,) + x.shape[dim + 1:]
                return np.full(shape, np.nan, x.dtype)
            return _reduce(np.mean, x, dim)

    def var(self, x: np.ndarray, dim: int | None, correction: int, dtype: DType) -> np.ndarray:
        count = x.size if dim is None else x.shape[dim]
        if count - correction <= 0:
            shape = () if dim is None else x.shape[:dim] + (1,) + x.shape[dim + 1:]
            return np.full(shape, np.nan, x.dtype)
        out = np.var(x, axis=dim, dtype=compute_dtype(x.dtype), ddof=correction,
                     keepdims=dim is not None)
        return np.asarray(out).astype(x.dtype, copy=False)

    def max(self, x: np.ndarray, dim: int | None) -> np.ndarray:
        return _extreme(np.max, x, dim)

    def min(self, x: np.ndarray, dim: int | None) -> np.ndarray:
        return _extreme(np.min, x, dim)

    def argmax(self, x: np.ndarray, dim: int) -> np.ndarray:
        # NumPy's argmax takes the first NaN as the largest, as the protocol wants.
        return np.argmax(_exact_float32(x), axis=dim, keepdims=True).astype(INT64, copy=False)

    def argmin(self, x: np.ndarray, dim: int) -> np.ndarray:
        return np.argmin(_exact_float32(x), axis=dim, keepdims=True).astype(INT64, copy=False)

    def max_with_indices(self, x: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        indices = self.argmax(x, dim)
        return np.take_along_axis(x, indices, axis=dim), indices

    def min_with_indices(self, x: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        indices = self.argmin(x, dim)
        return np.take_along_axis(x, indices, axis=dim), indices

    # -- scans and sorting --------------------------------------------------------------------

    def cumsum(self, x: np.ndarray, dim: int) -> np.ndarray:
        return np.cumsum(x, axis=dim, dtype=compute_dtype(x.dtype)).astype(x.dtype, copy=False)

    def cumprod(self, x: np.ndarray, dim: int) -> np.ndarray:
        return np.cumprod(x, axis=dim, dtype=compute_dtype(x.dtype)).astype(x.dtype, copy=False)

    def argsort(self, x: np.ndarray, dim: int, descending: bool) -> np.ndarray:
        key = _exact_float32(x)
        if not descending:
            # NumPy's stable sort puts NaN last, as the largest value.
            return np.argsort(key, axis=dim, kind="stable")
        # Descending and still stable: sort the reversed array ascending, reverse the order
        # back and map positions. Equal elements then keep their original order and NaN comes
        # first; negating the key instead would break on NaN and on the int minimum.
        n = x.shape[dim]
        order = np.argsort(np.flip(key, dim), axis=dim, kind="stable")
        return np.subtract(n - 1, np.flip(order, dim))

    def sort(self, x: np.ndarray, dim: int, descending: bool) -> np.ndarray:
        key = _exact_float32(x)
        if not descending:
            out = np.sort(key, axis=dim, kind="stable")
        else:
            # Same trick as argsort, so -0.0 and 0.0 keep their order as argsort has them.
            out = np.flip(np.sort(np.flip(key, dim), axis=dim, kind="stable"), dim)
        return out.astype(x.dtype, copy=False)

    def sort_with_indices(self, x: np.ndarray, dim: int, descending: bool
                          ) -> tuple[np.ndarray, np.ndarray]:
        indices = self.argsort(x, dim, descending)
        return np.take_along_axis(x, indices, axis=dim), indices


@quiet
def _quiet(ufunc: np.ufunc, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``ufunc(lhs, rhs)`` without the "invalid value" warning that ml_dtypes' bfloat16 loops
    raise for NaN operands, where NumPy's own float loops stay silent."""
    return ufunc(lhs, rhs)


def _reduce(fn, x: np.ndarray, dim: int | None) -> np.ndarray:
    """``fn`` (np.sum, np.prod, np.mean) over ``dim`` in the compute dtype, back in x's dtype."""
    out = fn(x, axis=dim, dtype=compute_dtype(x.dtype), keepdims=dim is not None)
    return np.asarray(out).astype(x.dtype, copy=False)


def _extreme(fn, x: np.ndarray, dim: int | None) -> np.ndarray:
    """np.max or np.min (NaN propagates) over ``dim``; bfloat16 goes through float32 (exact)."""
    out = fn(_exact_float32(x), axis=dim, keepdims=dim is not None)
    return np.asarray(out).astype(x.dtype, copy=False)


def _exact_float32(x: np.ndarray) -> np.ndarray:
    """bfloat16 as float32 (exact, and NumPy's own loops instead of ml_dtypes' slow, warning
    ones); every other dtype unchanged."""
    return x.astype(FLOAT32) if x.dtype == BFLOAT16 else x


# References to a donated array when nothing but the donation chain holds it, counted in CPython
# 3.11-3.13: the donor's local, the ``*_assign`` method's argument, ``_reusable``'s argument and
# ``sys.getrefcount``'s own (test_donation.py checks the count). Python 3.14 lends references on
# the stack without counting them, so a count there proves nothing: never in place.
_DONATED_REFERENCES = 4 if sys.version_info < (3, 14) else -1
_getrefcount = sys.getrefcount


def _reusable(x: np.ndarray, y: np.ndarray | None) -> bool:
    """Whether ``x``'s buffer may take the result: ``x`` owns its data (no view of another
    array), is writeable and C-contiguous, keeps its dtype (``y`` has it, or is a scalar), and
    no reference to it exists beyond the donation chain (no Tensor, view or variable can see the
    write)."""
    return (type(x) is np.ndarray and x.base is None and (y is None or y.dtype == x.dtype)
            and x.flags.writeable and x.flags.c_contiguous
            and _getrefcount(x) == _DONATED_REFERENCES)
