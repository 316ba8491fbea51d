"""Tensor layout: reshaping, permuting, indexing, gathering, joining and splitting."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from burnish.dtype import DType, Kind, int64, promote, scalar_dtype
from burnish.errors import DTypeError, ShapeError
from burnish.shape import broadcast_shapes, infer_reshape, normalize_dim, normalize_dims, show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor.tensor import Tensor

_SCALARS = (bool, int, float)


class LayoutMixin:
    """Operations that move elements around without computing on them (every dtype)."""

    __slots__ = ()

    def _same(self, prim: Any) -> Tensor:
        return _core.make(prim, self._device, self._dtype)

    # -- shape ----------------------------------------------------------------------------------

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        """The same elements in row-major order with a new shape; one dim may be ``-1``. The
        shape is one sequence (``reshape([3, 2])``) or several ints (``reshape(3, 2)``)."""
        new = infer_reshape(self._prim.shape, _sizes(shape, "reshape"))
        if new == self._prim.shape:
            return self
        return self._same(self._device.backend.reshape(self._prim, new))

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Dims ``start_dim..=end_dim`` merged into one."""
        shape = self._prim.shape
        if not shape:
            return self.reshape([1])
        start, end = normalize_dim(start_dim, len(shape)), normalize_dim(end_dim, len(shape))
        if start > end:
            raise ShapeError(f"flatten: start_dim {start_dim} is after end_dim {end_dim}")
        return self.reshape(list(shape[:start]) + [-1 if 0 not in shape[start:end + 1] else 0]
                            + list(shape[end + 1:]))

    def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
        """Size-1 dims removed: all of them, or the ones named (which must have size 1)."""
        shape = self._prim.shape
        if dim is None:
            dims = tuple(i for i, n in enumerate(shape) if n == 1)
        else:
            dims = normalize_dims((dim,) if isinstance(dim, int) else dim, len(shape))
            for d in dims:
                if shape[d] != 1:
                    raise ShapeError(f"squeeze: dim {d} of shape {show(shape)} has size "
                                     f"{shape[d]}, not 1")
        return self.reshape([n for i, n in enumerate(shape) if i not in dims])

    def unsqueeze(self, dim: int = 0) -> Tensor:
        """A size-1 dim inserted at ``dim`` (``-1`` appends)."""
        shape = list(self._prim.shape)
        d = normalize_dim(dim, len(shape), allow_end=True)
        shape.insert(d, 1)
        return self.reshape(shape)

    def unsqueeze_dims(self, dims: Sequence[int]) -> Tensor:
        """Size-1 dims inserted so that they sit at ``dims`` in the result."""
        ndim = self.ndim + len(dims)
        targets = sorted(normalize_dim(d, ndim) for d in dims)
        x = self
        for d in targets:
            x = x.unsqueeze(d)
        return x

    def permute(self, *axes: int | Sequence[int]) -> Tensor:
        """Dims reordered: result dim ``i`` is dim ``axes[i]`` (one sequence or several ints)."""
        axes = _sizes(axes, "permute")
        ndim = self.ndim
        if len(axes) != ndim:
            raise ShapeError(f"permute: {list(axes)} does not name each of the {ndim} dims of "
                             f"{show(self._prim.shape)} once")
        axes = normalize_dims(axes, ndim)
        if axes == tuple(range(ndim)):
            return self
        return self._same(self._device.backend.permute(self._prim, axes))

    def swap_dims(self, dim0: int, dim1: int) -> Tensor:
        """Dims ``dim0`` and ``dim1`` exchanged."""
        axes = list(range(self.ndim))
        d0, d1 = normalize_dim(dim0, self.ndim), normalize_dim(dim1, self.ndim)
        axes[d0], axes[d1] = axes[d1], axes[d0]
        return self.permute(axes)

    def transpose(self, dim0: int = -2, dim1: int = -1) -> Tensor:
        """Two dims exchanged, by default the last two (Burn's ``transpose``)."""
        if self.ndim < 2:
            return self
        return self.swap_dims(dim0, dim1)

    @property
    def T(self) -> Tensor:
        """The last two dims exchanged."""
        return self.transpose()

    def expand(self, *shape: int | Sequence[int]) -> Tensor:
        """Broadcast to ``shape``: size-1 dims repeat, new dims are added in front, ``-1`` keeps
        (one sequence or several ints)."""
        old = self._prim.shape
        sizes = list(_sizes(shape, "expand"))
        if len(sizes) < len(old):
            raise ShapeError(f"expand: cannot expand {show(old)} to fewer dims {show(sizes)}")
        offset = len(sizes) - len(old)
        for i, n in enumerate(old):
            if sizes[offset + i] == -1:
                sizes[offset + i] = n
        target = tuple(sizes)
        if any(n < 0 for n in target):
            raise ShapeError(f"expand: -1 is only allowed for existing dims, got {show(sizes)}")
        if broadcast_shapes(old, target) != target:
            raise ShapeError(f"expand: cannot expand {show(old)} to {show(target)}")
        if target == old:
            return self
        return self._same(self._device.backend.expand(self._prim, target))

    def broadcast_to(self, shape: Sequence[int]) -> Tensor:
        """Same as ``expand``."""
        return self.expand(shape)

    def repeat_dim(self, dim: int, times: int) -> Tensor:
        """The tensor repeated ``times`` times along ``dim``."""
        d = normalize_dim(dim, self.ndim)
        if times < 0:
            raise ShapeError(f"repeat_dim: times must be >= 0, got {times}")
        if times == 1:
            return self
        if times == 0:
            # Backends repeat by concatenating copies; zero copies is an empty slice instead.
            return self.narrow(d, 0, 0)
        return self._same(self._device.backend.repeat_dim(self._prim, d, times))

    def repeat(self, *sizes: int | Sequence[int]) -> Tensor:
        """Tiled: dim ``i`` repeated ``sizes[i]`` times (PyTorch's ``repeat``); extra leading
        sizes add dims (one sequence or several ints)."""
        counts = _sizes(sizes, "repeat")
        if len(counts) < self.ndim:
            raise ShapeError(f"repeat: {len(counts)} sizes for a tensor of {self.ndim} dims")
        x = self.reshape([1] * (len(counts) - self.ndim) + list(self._prim.shape))
        for d, times in enumerate(counts):
            x = x.repeat_dim(d, times)
        return x

    def flip(self, dims: int | Sequence[int]) -> Tensor:
        """Elements reversed along each of ``dims``."""
        dims = normalize_dims((dims,) if isinstance(dims, int) else dims, self.ndim)
        if not dims:
            return self
        return self._same(self._device.backend.flip(self._prim, dims))

    # -- slicing --------------------------------------------------------------------------------

    def _ranges(self, ranges: Sequence[Any]) -> tuple[tuple[int, int, int], ...]:
        shape = self._prim.shape
        if len(ranges) > len(shape):
            raise ShapeError(f"{len(ranges)} ranges for a tensor of shape {show(shape)}")
        out = []
        for d, n in enumerate(shape):
            r = ranges[d] if d < len(ranges) else slice(None)
            if isinstance(r, slice):
                if r.step is not None and r.step <= 0:
                    raise ShapeError(f"slice steps must be positive, got {r.step} for dim {d}; "
                                     "use flip() to reverse")
                start, stop, step = r.indices(n)
                stop = max(stop, start)
            elif isinstance(r, tuple | list) and len(r) == 2:
                start, stop = (v + n if v < 0 else v for v in r)
                if not 0 <= start <= stop <= n:
                    raise ShapeError(f"range {list(r)} is out of bounds for dim {d} of shape "
                                     f"{show(shape)}")
                step = 1
            else:
                raise ShapeError(f"a range is a slice or a (start, end) pair, got {r!r}")
            out.append((start, stop, step))
        return tuple(out)

    def slice(self, ranges: Sequence[Any]) -> Tensor:
        """The elements in ``ranges``: one slice or ``(start, end)`` pair per leading dim."""
        ranges = self._ranges(ranges)
        if all(r == (0, n, 1) for r, n in zip(ranges, self._prim.shape)):
            return self
        return self._same(self._device.backend.slice(self._prim, ranges))

    def slice_assign(self, ranges: Sequence[Any], values: Tensor | bool | int | float) -> Tensor:
        """A copy with the elements in ``ranges`` replaced by ``values`` (broadcast to them)."""
        ranges = self._ranges(ranges)
        target = tuple(len(range(*r)) for r in ranges)
        values = _as_tensor_like(self, values).cast(self._dtype)
        _core.same_device(self, values, "slice_assign")
        if values.shape != target:
            try:
                values = values.expand(target)
            except ShapeError:
                raise ShapeError(f"slice_assign: values of shape {show(values.shape)} do not fit "
                                 f"the slice of shape {show(target)}") from None
        return self._same(self._device.backend.slice_assign(self._prim, ranges, values._prim))

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        """``length`` elements from ``start`` along ``dim``."""
        d = normalize_dim(dim, self.ndim)
        size = self._prim.shape[d]
        if start < 0:
            start += size
        if not (0 <= start and length >= 0 and start + length <= size):
            raise ShapeError(f"narrow: [{start}, {start + length}) is out of bounds for dim {d} "
                             f"of size {size}")
        ranges = [slice(None)] * d + [slice(start, start + length)]
        return self.slice(ranges)

    def chunk(self, chunks: int, dim: int = 0) -> list[Tensor]:
        """Up to ``chunks`` pieces of equal size along ``dim`` (the last may be smaller)."""
        if chunks <= 0:
            raise ShapeError(f"chunk: chunks must be positive, got {chunks}")
        size = self._prim.shape[normalize_dim(dim, self.ndim)]
        step = max(-(-size // chunks), 1)
        return self.split(step, dim)

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> list[Tensor]:
        """Pieces along ``dim``: of ``split_size`` each (the last may be smaller), or of the
        listed sizes, which must add up to the dim's size."""
        d = normalize_dim(dim, self.ndim)
        size = self._prim.shape[d]
        if isinstance(split_size, int):
            if split_size <= 0:
                raise ShapeError(f"split: split_size must be positive, got {split_size}")
            sizes = [min(split_size, size - s) for s in range(0, size, split_size)] or [0]
        else:
            sizes = list(split_size)
            if sum(sizes) != size or any(s < 0 for s in sizes):
                raise ShapeError(f"split: sizes {sizes} do not add up to dim {d}'s size {size}")
        return [self._same(piece)
                for piece in self._device.backend.split(self._prim, tuple(sizes), d)]

    def __getitem__(self, index: Any) -> Tensor:
        """NumPy-style basic indexing: ints (removing the dim), slices with positive steps,
        ``...`` and ``None``; a 1-d int tensor selects along its dim."""
        if not isinstance(index, tuple):
            index = (index,)
        shape = self._prim.shape
        explicit = sum(1 for i in index if i is not None and i is not Ellipsis)
        if explicit > len(shape):
            raise ShapeError(f"too many indices ({explicit}) for a tensor of shape {show(shape)}")
        if sum(1 for i in index if i is Ellipsis) > 1:
            raise ShapeError("an index can hold only one ellipsis (...)")
        expanded: list[Any] = []
        for i in index:
            if i is Ellipsis:
                expanded.extend([slice(None)] * (len(shape) - explicit))
            else:
                expanded.append(i)
        ranges, drop, insert, selects, out_pos, d = [], [], [], [], 0, 0
        for i in expanded:
            if i is None:
                insert.append(out_pos)
                out_pos += 1
                continue
            n = shape[d]
            if isinstance(i, slice):
                ranges.append(i)
            elif isinstance(i, _core.Tensor):
                ranges.append(slice(None))
                selects.append((d, i))
            elif isinstance(i, int):
                j = i + n if i < 0 else i
                if not 0 <= j < n:
                    raise ShapeError(f"index {i} is out of bounds for dim {d} of size {n} "
                                     f"(shape {show(shape)})")
                ranges.append(slice(j, j + 1))
                drop.append(d)
            else:
                raise TypeError(f"unsupported index {i!r}: use ints, slices, ..., None or a 1-d "
                                "int tensor (mask indexing: use mask_where or mask_fill)")
            d += 1
            out_pos += 1
        x = self.slice(ranges)
        for dim, indices in selects:
            x = x.select(dim, indices)
        if drop:
            x = x.squeeze(drop)
        if insert:
            x = x.unsqueeze_dims([p - sum(1 for dd in drop if dd < p) for p in insert])
        return x

    def __setitem__(self, index: Any, values: Tensor | bool | int | float) -> None:
        """``x[i] = v`` rebinds ``x`` to a copy with the indexed elements replaced (ints and
        slices only)."""
        if not isinstance(index, tuple):
            index = (index,)
        shape = self._prim.shape
        if Ellipsis in index:
            at = index.index(Ellipsis)
            fill = (slice(None),) * (len(shape) - (len(index) - 1))
            index = index[:at] + fill + index[at + 1:]
        ranges, dropped = [], []
        for d, i in enumerate(index):
            if isinstance(i, int):
                j = i + shape[d] if i < 0 else i
                if not 0 <= j < shape[d]:
                    raise ShapeError(f"index {i} is out of bounds for dim {d} of size {shape[d]}")
                ranges.append(slice(j, j + 1))
                dropped.append(d)
            elif isinstance(i, slice):
                ranges.append(i)
            else:
                raise TypeError(f"assignment supports int and slice indices, got {i!r}")
        if dropped and type(values) is _core.Tensor:
            # As in NumPy, an int index removes its dim: values broadcast against the indexed
            # shape without it, and get size-1 dims back before the assignment.
            target = [len(range(*r)) for r in self._ranges(ranges)]
            indexed = tuple(n for d, n in enumerate(target) if d not in dropped)
            if len(values.shape) > len(indexed) or \
                    broadcast_shapes(tuple(values.shape), indexed) != indexed:
                raise ShapeError(f"values of shape {show(values.shape)} do not fit the indexed "
                                 f"shape {show(indexed)}")
            values = values.expand(indexed).reshape(target)
        updated = self.slice_assign(ranges, values)
        self._prim = updated._prim

    # -- gathering and scattering ---------------------------------------------------------------

    def _indices(self, indices: Tensor, op: str, limit: int) -> Tensor:
        if type(indices) is not _core.Tensor:
            indices = _core.Tensor.from_data(indices, self._device, int64)
        if not indices._dtype.is_int:
            raise DTypeError(f"{op}: indices must be an int tensor, got {indices._dtype}")
        _core.same_device(self, indices, op)
        indices = indices.cast(int64)
        if indices.numel():
            if _core.checks_values(self._device):  # values on the host (or debug mode)
                from burnish.replay import guard

                guard(functools.partial(_in_bounds, limit=limit, op=op), indices,
                      key=(op, limit))
            else:  # on the device where the backend can: no synchronisation
                self._device.backend.check_indices(indices._prim, limit, op)
        return indices

    def select(self, dim: int, indices: Tensor | Sequence[int]) -> Tensor:
        """The slices at the 1-d int ``indices`` along ``dim`` (PyTorch's ``index_select``)."""
        d = normalize_dim(dim, self.ndim)
        indices = self._indices(indices, "select", self._prim.shape[d])
        if indices.ndim != 1:
            raise ShapeError(f"select: indices must be 1-d, got shape {show(indices.shape)}")
        return self._same(self._device.backend.select(self._prim, d, indices._prim))

    def select_add(self, dim: int, indices: Tensor | Sequence[int], values: Tensor) -> Tensor:
        """A copy where slice ``k`` of ``values`` along ``dim`` is added to slice ``indices[k]``
        (repeated indices accumulate; PyTorch's ``index_add``)."""
        d = normalize_dim(dim, self.ndim)
        indices = self._indices(indices, "select_add", self._prim.shape[d])
        values = _as_tensor_like(self, values).cast(self._dtype)
        expected = list(self._prim.shape)
        expected[d] = indices.numel()
        if indices.ndim != 1 or list(values.shape) != expected:
            raise ShapeError(f"select_add: values of shape {show(values.shape)} and indices of "
                             f"shape {show(indices.shape)} do not fit; values must be "
                             f"{show(expected)}")
        prim = self._device.backend.select_add(self._prim, d, indices._prim, values._prim)
        return self._same(prim)

    #: Burn's name: ``select_assign`` adds the values, as ``select_add`` does.
    select_assign = select_add

    def gather(self, dim: int, indices: Tensor) -> Tensor:
        """``out[i][j] = self[indices[i][j]][j]`` for ``dim=0`` (PyTorch's ``gather``):
        ``indices`` has this tensor's number of dims and gives the output's shape."""
        d = normalize_dim(dim, self.ndim)
        indices = self._indices(indices, "gather", self._prim.shape[d])
        self._check_index_shape(indices.shape, d, "gather")
        return self._same(self._device.backend.gather(self._prim, d, indices._prim))

    def scatter_add(self, dim: int, indices: Tensor, values: Tensor) -> Tensor:
        """A copy where ``values`` are added at ``indices`` along ``dim`` (the reverse of
        ``gather``; repeated indices accumulate)."""
        d = normalize_dim(dim, self.ndim)
        indices = self._indices(indices, "scatter_add", self._prim.shape[d])
        values = _as_tensor_like(self, values).cast(self._dtype)
        if values.shape != indices.shape:
            raise ShapeError(f"scatter_add: values {show(values.shape)} and indices "
                             f"{show(indices.shape)} must have one shape")
        self._check_index_shape(indices.shape, d, "scatter_add")
        prim = self._device.backend.scatter_add(self._prim, d, indices._prim, values._prim)
        return self._same(prim)

    #: Burn's name: ``scatter`` adds the values, as ``scatter_add`` does.
    scatter = scatter_add

    def _check_index_shape(self, shape: Sequence[int], dim: int, op: str) -> None:
        own = self._prim.shape
        if len(shape) != len(own) or any(s > n for i, (s, n) in enumerate(zip(shape, own))
                                         if i != dim):
            raise ShapeError(f"{op}: indices of shape {show(shape)} do not fit a tensor of shape "
                             f"{show(own)} along dim {dim}")

    # -- masks ------------------------------------------------------------------------------------

    def mask_where(self, mask: Tensor, value: Tensor) -> Tensor:
        """``value`` where ``mask`` is true, else ``self`` (Burn's ``mask_where``)."""
        return where(mask, value, self)

    def mask_fill(self, mask: Tensor, value: bool | int | float) -> Tensor:
        """``value`` where ``mask`` is true, else ``self``; the dtype stays this tensor's."""
        _check_mask(mask, self, "mask_fill")
        if not isinstance(value, _SCALARS):
            raise TypeError(f"mask_fill: value must be a Python scalar, got {type(value).__name__}")
        if broadcast_shapes(mask._prim.shape, self._prim.shape) != self._prim.shape:
            raise ShapeError(f"mask_fill: mask {show(mask.shape)} does not broadcast to "
                             f"{show(self.shape)}")
        prim = self._device.backend.mask_fill(self._prim, mask._prim, value, self._dtype)
        return self._same(prim)


def where(condition: Tensor, x: Tensor | bool | int | float, y: Tensor | bool | int | float
          ) -> Tensor:
    """``x`` where the bool ``condition`` is true, else ``y``; all three broadcast and ``x`` and
    ``y`` promote to a common dtype."""
    if type(condition) is not _core.Tensor:
        raise TypeError("where: condition must be a bool Tensor")
    x = _as_tensor_like(condition, x, y)
    y = _as_tensor_like(condition, y, x)
    _check_mask(condition, x, "where")
    _core.same_device(x, y, "where")
    dtype = promote(x._dtype, y._dtype)
    x, y = x.cast(dtype), y.cast(dtype)
    broadcast_shapes(broadcast_shapes(condition._prim.shape, x._prim.shape), y._prim.shape)
    prim = condition._device.backend.where(condition._prim, x._prim, y._prim)
    return _core.make(prim, condition._device, dtype)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """``tensors`` joined along ``dim``; they must match in every other dim and device, and
    their dtypes promote to a common one."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("cat needs at least one tensor")
    first = tensors[0]
    dtype = first._dtype
    for t in tensors[1:]:
        _core.same_device(first, t, "cat")
        dtype = promote(dtype, t._dtype)
    shape = first._prim.shape
    d = normalize_dim(dim, len(shape))
    for t in tensors[1:]:
        other = t._prim.shape
        if len(other) != len(shape) or any(a != b for i, (a, b) in enumerate(zip(shape, other))
                                           if i != d):
            raise ShapeError(f"cat along dim {d}: shapes {show(shape)} and {show(other)} differ "
                             "outside that dim")
    prims = [t.cast(dtype)._prim for t in tensors]
    if len(prims) == 1:
        return tensors[0].cast(dtype)
    return _core.make(first._device.backend.cat(prims, d), first._device, dtype)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """``tensors`` (all of one shape) joined along a new dim ``dim``."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("stack needs at least one tensor")
    shape = tensors[0]._prim.shape
    for t in tensors[1:]:
        if t._prim.shape != shape:
            raise ShapeError(f"stack: shapes {show(shape)} and {show(t._prim.shape)} differ")
    d = normalize_dim(dim, len(shape) + 1)
    return cat([t.unsqueeze(d) for t in tensors], d)


def _as_tensor_like(reference: Tensor, value: Any, partner: Any = None) -> Tensor:
    """``value`` as a tensor on ``reference``'s device; a scalar gets its partner's dtype kind."""
    if type(value) is _core.Tensor:
        return value
    if isinstance(value, _SCALARS):
        base = partner if type(partner) is _core.Tensor else reference
        dtype: DType = scalar_dtype(base._dtype if not base._dtype.is_bool or
                                    isinstance(value, bool) else int64, value)
        backend = reference._device.backend
        return _core.make(backend.full((), value, dtype, reference._device), reference._device,
                          dtype)
    return _core.Tensor.from_data(value, reference._device)


def _check_mask(mask: Tensor, x: Tensor, op: str) -> None:
    if type(mask) is not _core.Tensor or mask._dtype.kind is not Kind.BOOL:
        got = mask._dtype if type(mask) is _core.Tensor else type(mask).__name__
        raise DTypeError(f"{op}: the mask must be a bool tensor, got {got}")
    _core.same_device(mask, x, op)


def _sizes(args: tuple, op: str) -> tuple[int, ...]:
    """The sizes (or dims) of a shape argument, given as one sequence or as several ints, as
    PyTorch allows both: ``reshape([3, 2])`` and ``reshape(3, 2)``."""
    if len(args) == 1 and not isinstance(args[0], int):
        try:
            return tuple(args[0])
        except TypeError:
            pass  # one int-like value (a NumPy int)
    try:
        return tuple(operator.index(arg) for arg in args)
    except TypeError:
        raise TypeError(f"{op}: expected ints or one sequence of ints, got {list(args)!r}"
                        ) from None


def _in_bounds(values, limit: int, op: str) -> None:
    """Raise ShapeError naming ``op`` where ``values`` holds an index outside ``[0, limit)``."""
    if values.size:
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= limit:
            raise ShapeError(f"{op}: index {low if low < 0 else high} is out of bounds for a "
                             f"dim of size {limit}")
