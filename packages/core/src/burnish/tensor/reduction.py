"""Tensor reductions, scans and sorting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from burnish import amp as _amp
from burnish.dtype import DEFAULT_FLOAT, Kind, bool_, int64
from burnish.errors import ShapeError
from burnish.shape import normalize_dim, normalize_dims, show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor.tensor import Tensor

_NUMERIC = (Kind.FLOAT, Kind.INT)
Dims = int | Sequence[int] | None


class ReductionMixin:
    """Reductions over the whole tensor (``dim=None``), one dim or several; ``keepdim`` keeps
    reduced dims with size 1."""

    __slots__ = ()

    def _reduce(self, op: str, dim: Dims, keepdim: bool, *, kinds=_NUMERIC, dtype=None,
                nonempty: bool = False, extra: tuple = ()) -> Tensor:
        x = self
        if kinds is _NUMERIC and x._dtype.kind is Kind.BOOL:
            x = x.cast(int64)
        _core.require_kind(x, kinds, op)
        shape = x._prim.shape
        backend = x._device.backend
        out_dtype = dtype or x._dtype
        if dim is None:
            if nonempty and 0 in shape:
                raise ShapeError(f"{op} of an empty tensor (shape {show(shape)}) has no value")
            prim = getattr(backend, op)(x._prim, None, *extra)
            if keepdim:
                prim = backend.reshape(prim, (1,) * len(shape))
            return _core.make(prim, x._device, out_dtype)
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = normalize_dims(dims, len(shape))
        if nonempty and any(shape[d] == 0 for d in dims):
            raise ShapeError(f"{op} over an empty dim of shape {show(shape)} has no value")
        prim = x._prim
        if op in _MERGED and _one_run(shape, dims):
            # Adjacent dims (a global average pool's height and width) reduced as one: one
            # op, each output's elements in one run, instead of one op per dim.
            first, last = min(dims), max(dims)
            size = 1
            for d in dims:
                size *= shape[d]
            prim = backend.reshape(prim, (*shape[:first], size, *shape[last + 1:]))
            prim = getattr(backend, op)(prim, first, *extra)
            kept = tuple(1 if i in dims else n for i, n in enumerate(shape)
                         if keepdim or i not in dims)
            return _core.make(backend.reshape(prim, kept), x._device, out_dtype)
        for d in dims:
            prim = getattr(backend, op)(prim, d, *extra)
        if not keepdim:
            kept = tuple(n for i, n in enumerate(prim.shape) if i not in dims)
            prim = backend.reshape(prim, kept)
        return _core.make(prim, x._device, out_dtype)

    def sum(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        """Sum of elements (bools count as ints; 16-bit floats give float32 under autocast)."""
        x = _amp.full(self) if _amp.entered else self
        return x._reduce("sum", dim, keepdim)

    def prod(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        """Product of elements (16-bit floats give float32 under autocast)."""
        x = _amp.full(self) if _amp.entered else self
        return x._reduce("prod", dim, keepdim)

    def mean(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        """Arithmetic mean (ints become the default float; 16-bit floats give float32 under
        autocast)."""
        x = self if self._dtype.is_float else self.cast(DEFAULT_FLOAT)
        if _amp.entered:
            x = _amp.full(x)
        if dim is None or isinstance(dim, int) or \
                _one_run(x._prim.shape, normalize_dims(dim, x.ndim)):
            return x._reduce("mean", dim, keepdim, kinds=(Kind.FLOAT,), extra=(x._dtype,))
        return x.sum(dim, keepdim) / _count(x, dim)

    def var(self, dim: Dims = None, correction: int = 1, keepdim: bool = False) -> Tensor:
        """Variance; ``correction=1`` is the unbiased (Bessel) estimate, 0 the population one
        (16-bit floats give float32 under autocast)."""
        x = self if self._dtype.is_float else self.cast(DEFAULT_FLOAT)
        if _amp.entered:
            x = _amp.full(x)
        if dim is None or isinstance(dim, int):
            return x._reduce("var", dim, keepdim, kinds=(Kind.FLOAT,),
                             extra=(correction, x._dtype))
        centered = x - x.mean(dim, keepdim=True)
        count = _count(x, dim) - correction
        return (centered * centered).sum(dim, keepdim) / (count if count > 0 else float("nan"))

    def std(self, dim: Dims = None, correction: int = 1, keepdim: bool = False) -> Tensor:
        """Standard deviation: ``sqrt(var)``."""
        return self.var(dim, correction, keepdim).sqrt()

    def max(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        """Largest element (NaN if any is NaN). Under autodiff, tied maxima share the gradient
        evenly (PyTorch's ``amax``); ``max_with_indices`` sends it to the returned index."""
        return self._extreme("max", dim, keepdim)

    def min(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        """Smallest element (NaN if any is NaN); ties share the gradient as for ``max``."""
        return self._extreme("min", dim, keepdim)

    def _extreme(self, op: str, dim: Dims, keepdim: bool) -> Tensor:
        if dim is None or isinstance(dim, int) or len(dim) < 2:
            return self._reduce(op, dim, keepdim, nonempty=True)
        shape = self._prim.shape
        dims = normalize_dims(dim, len(shape))
        if any(shape[d] == 0 for d in dims):
            return self._reduce(op, dims, keepdim, nonempty=True)  # raises, naming the shape
        # Several dims are reduced as one (moved last and merged), so that ties across them
        # share a gradient evenly, as over the whole tensor, and not dim after dim.
        rest = [d for d in range(len(shape)) if d not in dims]
        size = 1
        for d in dims:
            size *= shape[d]
        merged = self.permute(rest + sorted(dims)).reshape([shape[d] for d in rest] + [size])
        out = merged._reduce(op, -1, False, nonempty=True)
        if keepdim:
            out = out.reshape([1 if d in dims else n for d, n in enumerate(shape)])
        return out

    def any(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        """Bool: some element is true (nonzero)."""
        return self._truth()._reduce("any", dim, keepdim, kinds=(Kind.BOOL,))

    def all(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        """Bool: every element is true (nonzero)."""
        return self._truth()._reduce("all", dim, keepdim, kinds=(Kind.BOOL,))

    def _truth(self) -> Tensor:
        return self if self._dtype is bool_ else self.not_equal(0)

    def _arg(self, op: str, dim: int | None, keepdim: bool) -> Tensor:
        x = self.cast(int64) if self._dtype.kind is Kind.BOOL else self
        _core.require_kind(x, _NUMERIC, op)
        if dim is None:
            flat = x.reshape([-1])
            return flat._arg(op, 0, False).reshape([1] * self.ndim if keepdim else [])
        d = normalize_dim(dim, x.ndim)
        if x._prim.shape[d] == 0:
            raise ShapeError(f"{op} over an empty dim of shape {show(x._prim.shape)}")
        prim = getattr(x._device.backend, op)(x._prim, d)
        out = _core.make(prim, x._device, int64)
        return out if keepdim else out.squeeze(d)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """int64 index of the first largest element along ``dim`` (of the flattened tensor when
        ``dim`` is None)."""
        return self._arg("argmax", dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """int64 index of the first smallest element along ``dim`` (flattened when None)."""
        return self._arg("argmin", dim, keepdim)

    def _with_indices(self, op: str, dim: int, keepdim: bool) -> tuple[Tensor, Tensor]:
        x = self.cast(int64) if self._dtype.kind is Kind.BOOL else self
        _core.require_kind(x, _NUMERIC, op)
        d = normalize_dim(dim, x.ndim)
        if x._prim.shape[d] == 0:
            raise ShapeError(f"{op} over an empty dim of shape {show(x._prim.shape)}")
        values, indices = getattr(x._device.backend, op)(x._prim, d)
        values = _core.make(values, x._device, x._dtype)
        indices = _core.make(indices, x._device, int64)
        if not keepdim:
            values, indices = values.squeeze(d), indices.squeeze(d)
        return values, indices

    def max_with_indices(self, dim: int, keepdim: bool = False) -> tuple[Tensor, Tensor]:
        """``(max, argmax)`` along ``dim``."""
        return self._with_indices("max_with_indices", dim, keepdim)

    def min_with_indices(self, dim: int, keepdim: bool = False) -> tuple[Tensor, Tensor]:
        """``(min, argmin)`` along ``dim``."""
        return self._with_indices("min_with_indices", dim, keepdim)

    # -- scans ----------------------------------------------------------------------------------

    def _scan(self, op: str, dim: int) -> Tensor:
        x = self.cast(int64) if self._dtype.kind is Kind.BOOL else self
        _core.require_kind(x, _NUMERIC, op)
        d = normalize_dim(dim, max(x.ndim, 1))
        if x.ndim == 0:
            return x
        return _core.make(getattr(x._device.backend, op)(x._prim, d), x._device, x._dtype)

    def cumsum(self, dim: int) -> Tensor:
        """Running sum along ``dim``."""
        return self._scan("cumsum", dim)

    def cumprod(self, dim: int) -> Tensor:
        """Running product along ``dim``."""
        return self._scan("cumprod", dim)

    # -- sorting --------------------------------------------------------------------------------

    def _sortable(self, dim: int, op: str) -> tuple[Tensor, int]:
        x = self.cast(int64) if self._dtype.kind is Kind.BOOL else self
        _core.require_kind(x, _NUMERIC, op)
        if x.ndim == 0:
            raise ShapeError(f"{op} needs a tensor of at least 1 dim")
        return x, normalize_dim(dim, x.ndim)

    def sort(self, dim: int = -1, descending: bool = False) -> Tensor:
        """Values sorted along ``dim`` (stable; NaN sorts as the largest value)."""
        x, d = self._sortable(dim, "sort")
        out = _core.make(x._device.backend.sort(x._prim, d, descending), x._device, x._dtype)
        return out.cast(self._dtype)

    def argsort(self, dim: int = -1, descending: bool = False) -> Tensor:
        """int64 indices that sort along ``dim`` (stable)."""
        x, d = self._sortable(dim, "argsort")
        return _core.make(x._device.backend.argsort(x._prim, d, descending), x._device, int64)

    def sort_with_indices(self, dim: int = -1, descending: bool = False
                          ) -> tuple[Tensor, Tensor]:
        """``(sorted values, int64 indices)`` along ``dim`` (stable)."""
        x, d = self._sortable(dim, "sort_with_indices")
        values, indices = x._device.backend.sort_with_indices(x._prim, d, descending)
        return (_core.make(values, x._device, x._dtype).cast(self._dtype),
                _core.make(indices, x._device, int64))

    def topk_with_indices(self, k: int, dim: int = -1) -> tuple[Tensor, Tensor]:
        """The ``k`` largest values along ``dim``, largest first, and their int64 indices."""
        x, d = self._sortable(dim, "topk")
        size = x._prim.shape[d]
        if not 0 <= k <= size:
            raise ShapeError(f"topk: k={k} is out of range for dim {d} of size {size} "
                             f"(shape {show(x._prim.shape)})")
        values, indices = x._device.backend.topk_with_indices(x._prim, d, k)
        return (_core.make(values, x._device, x._dtype).cast(self._dtype),
                _core.make(indices, x._device, int64))

    def topk(self, k: int, dim: int = -1) -> Tensor:
        """The ``k`` largest values along ``dim``, largest first."""
        return self.topk_with_indices(k, dim)[0]


#: Reductions whose result over several dims is their result over those dims merged into one.
_MERGED = frozenset({"sum", "prod", "mean", "any", "all"})


def _one_run(shape: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """Whether ``dims`` (normalized, distinct) are two or more adjacent dims, none of them
    empty: what ``_reduce`` merges into one dim (a reshape, a view of a plain tensor)."""
    return (len(dims) > 1 and max(dims) - min(dims) == len(dims) - 1
            and all(shape[d] for d in dims))


def _count(x: Tensor, dims: Sequence[int]) -> int:
    shape = x._prim.shape
    n = 1
    for d in normalize_dims(dims, len(shape)):
        n *= shape[d]
    return n
