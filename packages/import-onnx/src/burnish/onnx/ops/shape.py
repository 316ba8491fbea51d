"""ONNX's shape, indexing and joining operators on burnish tensors: Reshape's 0 and -1,
Slice's clamping, Gather's negative indices, scatters, Pad's modes, DepthToSpace..."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import burnish as bn
import burnish.functional as F
from burnish import Tensor
from burnish.errors import ShapeError
from burnish.onnx.ops.core import host


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def shape_of(x: Tensor, start: int = 0, end: int | None = None) -> Tensor:
    """ONNX Shape: the dims ``start:end`` as an int64 tensor."""
    dims = list(x.shape)[slice(start, end)]
    return Tensor.from_data(np.array(dims, dtype=np.int64), device=x.device)


def size(x: Tensor) -> Tensor:
    return Tensor.from_data(np.array(x.numel(), dtype=np.int64), device=x.device)


def reshape(x: Tensor, shape: Sequence[int], allowzero: int = 0) -> Tensor:
    """ONNX Reshape: ``0`` copies the input's dim (unless ``allowzero``), ``-1`` is inferred."""
    shape = list(shape)
    if not allowzero:
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        shape[shape.index(-1)] = x.numel() // known if known else 0
    return x.reshape(shape)


def relayout(x: Tensor, shape: Sequence[int], perm: Sequence[int], to: Sequence[int]) -> Tensor:
    """``x.reshape(shape).permute(perm).reshape(to)`` in one: ``x``'s dims and ``shape``'s are
    split to their common refinement (splitting a dim is a view), permuted, then merged into
    ``to`` (a view where the strides allow). Where the first reshape alone would copy (heads
    split across a gap in ``x``'s layout) the whole is often a view. The three steps as they are
    where the two shapes have no common refinement."""
    groups = _refinement(list(x.shape), list(shape))
    if groups is None:
        return x.reshape(list(shape)).permute(list(perm)).reshape(list(to))
    fine, of_shape = groups
    order = [d for p in perm for d in of_shape[p]]
    return x.reshape(fine).permute(order).reshape(list(to))


def _refinement(a: list[int], b: list[int]) -> tuple[list[int], list[list[int]]] | None:
    """The coarsest shape both ``a`` and ``b`` merge from (their dims' row-major boundaries
    together), and for each dim of ``b`` the dims of that shape it spans (none for a dim of
    one); None where they have none (a dim of one's boundary is not a multiple of the other's)
    or are empty."""
    def boundaries(shape: list[int]) -> list[int]:
        found = [1]
        for n in reversed(shape):
            found.append(found[-1] * n)
        return found

    ba, bb = boundaries(a), boundaries(b)
    if ba[-1] != bb[-1] or ba[-1] == 0:
        return None
    points = sorted(set(ba) | set(bb))
    if any(high % low for low, high in zip(points, points[1:])):
        return None
    count = len(points) - 1
    fine = [points[k + 1] // points[k] for k in reversed(range(count))]
    index = {p: k for k, p in enumerate(points)}
    spans = []
    for d in range(len(b)):
        low, high = index[bb[len(b) - 1 - d]], index[bb[len(b) - d]]
        spans.append(list(range(count - high, count - low)))
    return fine, spans


def flatten(x: Tensor, axis: int = 1) -> Tensor:
    axis = _axis(axis, x.ndim)
    dims = list(x.shape)
    return x.reshape([math.prod(dims[:axis]), math.prod(dims[axis:])])


def squeeze(x: Tensor, axes: Sequence[int] | None = None) -> Tensor:
    dims = list(x.shape)
    if axes is None:
        keep = [d for d in dims if d != 1]
    else:
        drop = {_axis(a, len(dims)) for a in axes}
        keep = [d for i, d in enumerate(dims) if i not in drop]
    return x.reshape(keep)


def unsqueeze(x: Tensor, axes: Sequence[int]) -> Tensor:
    rank = x.ndim + len(axes)
    new = sorted(_axis(a, rank) for a in axes)
    dims = list(x.shape)
    for a in new:
        dims.insert(a, 1)
    return x.reshape(dims)


def transpose(x: Tensor, perm: Sequence[int] | None = None) -> Tensor:
    perm = list(reversed(range(x.ndim))) if perm is None else list(perm)
    return x.permute(perm) if x.ndim > 1 else x


def concat(tensors: Sequence[Tensor], axis: int) -> Tensor:
    return bn.cat(list(tensors), axis)


def split(x: Tensor, axis: int, sizes: Sequence[int] | None, count: int,
          num_outputs: int | None = None) -> list[Tensor]:
    """ONNX Split into ``count`` outputs: by ``sizes``, or evenly (the last one smaller)."""
    axis = _axis(axis, x.ndim)
    n = x.shape[axis]
    if sizes is None:
        parts = num_outputs or count
        chunk = -(-n // parts)
        sizes = [min(chunk, n - i * chunk) for i in range(parts)]
    out, start = [], 0
    for s in sizes:
        out.append(x.narrow(axis, start, s))
        start += s
    return out


def slice_(x: Tensor, starts: Sequence[int], ends: Sequence[int],
           axes: Sequence[int] | None = None, steps: Sequence[int] | None = None) -> Tensor:
    """ONNX Slice: bounds clamped into range, negative steps walking backwards."""
    axes = list(range(len(starts))) if axes is None else [_axis(a, x.ndim) for a in axes]
    steps = [1] * len(starts) if steps is None else list(steps)
    ranges: list[slice] = [slice(None)] * x.ndim
    backwards = []
    for axis, start, end, step in zip(axes, starts, ends, steps):
        n = x.shape[axis]
        start = start + n if start < 0 else start
        end = end + n if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), n), min(max(end, 0), n)
            ranges[axis] = slice(start, max(start, end), step)
        else:
            start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
            backwards.append((axis, list(range(start, end, step))))
    out = x.slice(ranges) if any(r != slice(None) for r in ranges) else x
    for axis, indices in backwards:
        out = out.select(axis, Tensor.from_data(np.array(indices, np.int64), device=x.device))
    return out


def _positive(indices: Tensor, n: int) -> Tensor:
    indices = indices.cast(bn.int64)
    return bn.where(indices < 0, indices + n, indices)


def gather(x: Tensor, indices: Tensor, axis: int = 0) -> Tensor:
    """ONNX Gather: ``x``'s slices along ``axis`` at ``indices`` of any rank (negative from
    the end)."""
    axis = _axis(axis, x.ndim)
    flat = _positive(indices, x.shape[axis]).reshape([-1])
    picked = x.select(axis, flat)
    dims = list(x.shape)
    return picked.reshape(dims[:axis] + list(indices.shape) + dims[axis + 1:])


def gather_one(x: Tensor, index: int, axis: int, index_shape: Sequence[int]) -> Tensor:
    """ONNX Gather of one constant ``index`` (negative from the end) whose indices tensor has
    ``index_shape`` (``[]``: the axis goes; dims of one: they take its place): a slice of
    ``x``, a view where the backend has them, rather than a gather. Raises ShapeError for an
    index out of range, naming it and the dim."""
    axis = _axis(axis, x.ndim)
    n = x.shape[axis]
    if not -n <= index < n:
        raise ShapeError(f"Gather: index {index} is out of range for axis {axis} of size {n} "
                         f"(shape {list(x.shape)})")
    picked = x.narrow(axis, index + n if index < 0 else index, 1)
    dims = list(x.shape)
    return picked.reshape(dims[:axis] + list(index_shape) + dims[axis + 1:])


def gather_elements(x: Tensor, indices: Tensor, axis: int = 0) -> Tensor:
    axis = _axis(axis, x.ndim)
    return x.gather(axis, _positive(indices, x.shape[axis]))


def _nd_positions(data_shape: list[int], indices: np.ndarray, batch_dims: int) -> np.ndarray:
    """Flat row numbers into ``data`` reshaped to ``[prod(batch + indexed dims), rest]``."""
    k = indices.shape[-1]
    batch = data_shape[:batch_dims]
    indexed = data_shape[batch_dims:batch_dims + k]
    idx = np.where(indices < 0, indices + np.array(indexed, dtype=np.int64), indices)
    strides = [math.prod(indexed[i + 1:]) for i in range(k)]
    within = (idx * np.array(strides, dtype=np.int64)).sum(-1) if k else np.zeros(
        indices.shape[:-1], np.int64)
    batch_count = math.prod(batch)
    within = within.reshape(batch_count, -1)
    offsets = np.arange(batch_count, dtype=np.int64)[:, None] * math.prod(indexed)
    return (within + offsets).reshape(indices.shape[:-1])


def gather_nd(x: Tensor, indices: Tensor, batch_dims: int = 0) -> Tensor:
    """ONNX GatherND: slices of ``x`` at the index tuples in ``indices``' last dim."""
    dims = list(x.shape)
    idx = host(indices).astype(np.int64)
    k = idx.shape[-1]
    rest = dims[batch_dims + k:]
    rows = x.reshape([math.prod(dims[:batch_dims + k])] + rest)
    positions = _nd_positions(dims, idx, batch_dims)
    picked = rows.select(0, Tensor.from_data(positions.reshape(-1), device=x.device))
    return picked.reshape(list(idx.shape[:-1]) + rest)


def _scatter_flat(data: Tensor, targets: np.ndarray, updates: Tensor, reduction: str) -> Tensor:
    """``data`` (flattened) with ``updates`` written at the flat positions ``targets``:
    replaced, or combined by ``reduction`` (add, mul, max, min); done in rounds so that
    repeated positions combine in order."""
    shape = list(data.shape)
    flat = data.reshape([-1])
    values = updates.reshape([-1]).cast(data.dtype)
    order = np.argsort(targets, kind="stable")
    sorted_targets = targets[order]
    first = np.r_[0, np.flatnonzero(np.diff(sorted_targets)) + 1] if targets.size else []
    occurrence = np.zeros(targets.size, np.int64)
    for i, start in enumerate(first):
        end = first[i + 1] if i + 1 < len(first) else targets.size
        occurrence[order[start:end]] = np.arange(end - start)
    device = data.device
    for k in range(int(occurrence.max()) + 1 if targets.size else 0):
        chosen = np.flatnonzero(occurrence == k)
        where = targets[chosen]
        index = Tensor.from_data(where.astype(np.int64), device=device)
        new = values.select(0, Tensor.from_data(chosen.astype(np.int64), device=device))
        if reduction != "none":
            old = flat.select(0, index)
            new = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b,
                   "max": lambda a, b: a.maximum(b), "min": lambda a, b: a.minimum(b)}[
                reduction](old, new)
        mask = np.zeros(flat.shape[0], bool)
        mask[where] = True
        placed = flat.zeros_like().select_add(0, index, new) if flat.kind is not bn.Kind.BOOL \
            else flat.int().zeros_like().select_add(0, index, new.int()).bool()
        flat = bn.where(Tensor.from_data(mask, device=device), placed, flat)
    return flat.reshape(shape)


def scatter_elements(data: Tensor, indices: Tensor, updates: Tensor, axis: int = 0,
                     reduction: str = "none") -> Tensor:
    """ONNX ScatterElements (and the deprecated Scatter)."""
    axis = _axis(axis, data.ndim)
    idx = host(indices).astype(np.int64)
    dims = list(data.shape)
    idx = np.where(idx < 0, idx + dims[axis], idx)
    grids = list(np.meshgrid(*[np.arange(n) for n in idx.shape], indexing="ij"))
    grids[axis] = idx
    targets = np.ravel_multi_index([g.reshape(-1) for g in grids], dims) if idx.size else \
        np.zeros(0, np.int64)
    return _scatter_flat(data, np.asarray(targets, np.int64), updates, reduction)


def scatter_nd(data: Tensor, indices: Tensor, updates: Tensor, reduction: str = "none"
               ) -> Tensor:
    """ONNX ScatterND: ``updates`` written at the index tuples of ``indices``."""
    dims = list(data.shape)
    idx = host(indices).astype(np.int64)
    k = idx.shape[-1]
    rows = _nd_positions(dims, idx, 0).reshape(-1)
    row_size = math.prod(dims[k:])
    targets = (rows[:, None] * row_size + np.arange(row_size)[None, :]).reshape(-1)
    return _scatter_flat(data, targets, updates, reduction)


def expand(x: Tensor, shape: Sequence[int]) -> Tensor:
    """ONNX Expand: broadcast both ways (a 1 in ``shape`` keeps ``x``'s dim)."""
    shape = list(shape)
    dims = list(x.shape)
    rank = max(len(shape), len(dims))
    shape = [1] * (rank - len(shape)) + shape
    dims = [1] * (rank - len(dims)) + dims
    out = [d if s == 1 else s for s, d in zip(shape, dims)]
    return x.reshape(dims).expand(out)


def tile(x: Tensor, repeats: Sequence[int]) -> Tensor:
    return x.repeat(list(repeats))


def pad(x: Tensor, pads: Sequence[int], mode: str = "constant", value: Tensor | None = None,
        axes: Sequence[int] | None = None) -> Tensor:
    """ONNX Pad: ``pads`` are all begins then all ends (of ``axes``); negative ones crop."""
    rank = x.ndim
    axes = list(range(rank)) if axes is None else [_axis(a, rank) for a in axes]
    n = len(axes)
    begins, ends = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        begins[axis], ends[axis] = int(pads[i]), int(pads[i + n])
    crop = [slice(max(-b, 0), x.shape[d] - max(-e, 0)) for d, (b, e) in
            enumerate(zip(begins, ends))]
    if any(b < 0 or e < 0 for b, e in zip(begins, ends)):
        x = x.slice(crop)
    pairs = []
    for d in reversed(range(rank)):
        pairs += [max(begins[d], 0), max(ends[d], 0)]
    if not any(pairs):
        return x
    fill = 0 if value is None else np.asarray(value.to_numpy()).reshape(-1)[0].item()
    fmode = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
             "wrap": "circular"}[mode]
    if x.kind is bn.Kind.BOOL:
        return F.pad(x.int(), pairs, fmode, fill).bool()
    return F.pad(x, pairs, fmode, fill)


def depth_to_space(x: Tensor, blocksize: int, mode: str = "DCR") -> Tensor:
    b, c, h, w = x.shape
    s = blocksize
    if mode == "DCR":
        y = x.reshape([b, s, s, c // (s * s), h, w]).permute([0, 3, 4, 1, 5, 2])
    else:
        y = x.reshape([b, c // (s * s), s, s, h, w]).permute([0, 1, 4, 2, 5, 3])
    return y.reshape([b, c // (s * s), h * s, w * s])


def space_to_depth(x: Tensor, blocksize: int, mode: str = "DCR") -> Tensor:
    b, c, h, w = x.shape
    s = blocksize
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    y = x.reshape([b, c, h // s, s, w // s, s]).permute(perm)
    return y.reshape([b, c * s * s, h // s, w // s])


def constant_of_shape(shape: Sequence[int], value: Tensor | None, device) -> Tensor:
    if value is None:
        return Tensor.zeros(list(shape), device, bn.float32)
    return value.reshape([1] * len(shape)).expand(list(shape)) if shape else value.reshape([])


def range_(start: Tensor, limit: Tensor, delta: Tensor) -> Tensor:
    """ONNX Range: ``start, start + delta, ...`` while short of ``limit``."""
    s, lim, d = (np.asarray(t.to_numpy()).reshape(-1)[0] for t in (start, limit, delta))
    count = max(int(np.ceil((lim - s) / d)), 0)
    steps = Tensor.arange(0, count, device=start.device).cast(start.dtype)
    return steps * delta.reshape([]) + start.reshape([])


def one_hot(indices: Tensor, depth: Tensor, values: Tensor, axis: int = -1) -> Tensor:
    n = int(np.asarray(depth.to_numpy()).reshape(-1)[0])
    rank = indices.ndim + 1
    axis = _axis(axis, rank)
    idx = indices.cast(bn.int64)
    idx = bn.where(idx < 0, idx + n, idx).unsqueeze(axis)
    shape = [1] * rank
    shape[axis] = n
    classes = Tensor.arange(0, n, device=indices.device).reshape(shape)
    off, on = values.reshape([2])[0], values.reshape([2])[1]
    return bn.where(classes == idx, on.reshape([]), off.reshape([]))


def eye_like(x: Tensor, k: int = 0, dtype_name: str | None = None) -> Tensor:
    from burnish.onnx.ops.core import DTYPES

    rows, cols = x.shape
    r = Tensor.arange(0, rows, device=x.device).reshape([rows, 1])
    c = Tensor.arange(0, cols, device=x.device).reshape([1, cols])
    target = DTYPES[dtype_name] if dtype_name else x.dtype
    return ((c - r) == k).cast(target)


def trilu(x: Tensor, k: int = 0, upper: int = 1) -> Tensor:
    rows, cols = x.shape[-2], x.shape[-1]
    r = Tensor.arange(0, rows, device=x.device).reshape([rows, 1])
    c = Tensor.arange(0, cols, device=x.device).reshape([1, cols])
    keep = (c - r) >= k if upper else (c - r) <= k
    return bn.where(keep, x, x.zeros_like())


def compress(x: Tensor, condition: Tensor, axis: int | None = None) -> Tensor:
    keep = np.flatnonzero(host(condition).reshape(-1))
    if axis is None:
        x = x.reshape([-1])
        axis = 0
    axis = _axis(axis, x.ndim)
    keep = keep[keep < x.shape[axis]]
    return x.select(axis, Tensor.from_data(keep.astype(np.int64), device=x.device))


def top_k(x: Tensor, k: int, axis: int = -1, largest: int = 1, sorted: int = 1
          ) -> tuple[Tensor, Tensor]:
    """ONNX TopK: values and int64 indices, the lower index first among equal values."""
    axis = _axis(axis, x.ndim)
    if largest:
        return x.topk_with_indices(k, axis)
    values, indices = x.sort_with_indices(axis)
    return values.narrow(axis, 0, k), indices.narrow(axis, 0, k)


def cumsum(x: Tensor, axis: int, exclusive: int = 0, reverse: int = 0) -> Tensor:
    axis = _axis(axis, x.ndim)
    if reverse:
        x = x.flip(axis)
    out = x.cumsum(axis)
    if exclusive:
        out = out - x
    return out.flip(axis) if reverse else out


def reverse_sequence(x: Tensor, lengths: Tensor, batch_axis: int = 1, time_axis: int = 0
                     ) -> Tensor:
    lens = host(lengths).astype(np.int64)
    dims = list(x.shape)
    idx = np.broadcast_to(np.arange(dims[time_axis]).reshape(
        [-1 if d == time_axis else 1 for d in range(x.ndim)]), dims).copy()
    for b, n in enumerate(lens):
        view = [slice(None)] * x.ndim
        view[batch_axis] = b
        view[time_axis] = slice(0, n)
        idx[tuple(view)] = np.flip(idx[tuple(view)], axis=time_axis - (time_axis > batch_axis))
    return x.gather(time_axis, Tensor.from_data(idx, device=x.device))


def arg_max(x: Tensor, axis: int = 0, keepdims: int = 1, select_last_index: int = 0,
            smallest: bool = False) -> Tensor:
    """ONNX ArgMax (ArgMin with ``smallest``): int64 indices of the first (or last) extreme."""
    axis = _axis(axis, x.ndim)
    y = x.flip(axis) if select_last_index else x
    out = y.argmin(axis) if smallest else y.argmax(axis)
    if out.ndim == x.ndim:
        out = out.squeeze(axis)
    if select_last_index:
        out = (x.shape[axis] - 1) - out
    return out.unsqueeze(axis) if keepdims else out


def hardmax(x: Tensor, axis: int = -1) -> Tensor:
    axis = _axis(axis, x.ndim)
    index = arg_max(x, axis, keepdims=1)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    classes = Tensor.arange(0, x.shape[axis], device=x.device).reshape(shape)
    return (classes == index).cast(x.dtype)


def cumprod(x: Tensor, axis: int, exclusive: int = 0, reverse: int = 0) -> Tensor:
    axis = _axis(axis, x.ndim)
    if reverse:
        x = x.flip(axis)
    if exclusive:
        ones = Tensor.ones(list(x.shape[:axis]) + [1] + list(x.shape[axis + 1:]), x.device,
                           x.dtype)
        x = bn.cat([ones, x.narrow(axis, 0, x.shape[axis] - 1)], axis)
    out = x.cumprod(axis)
    return out.flip(axis) if reverse else out


def unique(x: Tensor, axis: int | None = None, sorted: int = 1):
    """ONNX Unique: values, first indices, inverse indices and counts (the sizes depend on
    the data, so the positions are found on the host and the values gathered)."""
    data = host(x)
    if axis is None:
        flat = data.reshape(-1)
        _, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                              return_counts=True)
        if not sorted:
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            first, counts, inverse = first[order], counts[order], rank[inverse]
        values = x.reshape([-1]).select(0, Tensor.from_data(first.astype(np.int64),
                                                            device=x.device))
    else:
        axis = _axis(axis, x.ndim)
        moved = np.moveaxis(data, axis, 0).reshape(data.shape[axis], -1)
        _, first, inverse, counts = np.unique(moved, axis=0, return_index=True,
                                              return_inverse=True, return_counts=True)
        if not sorted:
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            first, counts, inverse = first[order], counts[order], rank[inverse.reshape(-1)]
        values = x.select(axis, Tensor.from_data(first.astype(np.int64), device=x.device))

    def ints(a):
        return Tensor.from_data(np.asarray(a, np.int64).reshape(-1), device=x.device)

    return values, ints(first), ints(inverse), ints(counts)


def max_unpool(x: Tensor, indices: Tensor, kernel_shape, strides=None, pads=None,
               output_shape: Sequence[int] | None = None) -> Tensor:
    """ONNX MaxUnpool: values put back at their flat positions, zeros elsewhere."""
    spatial = x.ndim - 2
    strides = list(strides or [1] * spatial)
    pads = list(pads or [0] * (2 * spatial))
    default = [(n - 1) * s + k - pads[i] - pads[i + spatial] for i, (n, s, k) in
               enumerate(zip(x.shape[2:], strides, kernel_shape))]
    index = indices.reshape([-1]).cast(bn.int64)
    if output_shape is None:
        output_shape = list(x.shape[:2]) + default
    output_shape = list(output_shape)
    if output_shape[2:] != default:
        # The indices count positions of the unpadded input (the default shape): moved to
        # the same coordinates in the larger output.
        plane = index // math.prod(default)
        moved = plane * math.prod(output_shape[2:])
        for d in range(spatial):
            coordinate = (index // math.prod(default[d + 1:])) % default[d]
            moved = moved + coordinate * math.prod(output_shape[2 + d + 1:])
        index = moved
    zeros = Tensor.zeros([math.prod(output_shape)], x.device, x.dtype)
    flat = zeros.select_add(0, index, x.reshape([-1]))
    return flat.reshape(output_shape)


def array_feature_extractor(x: Tensor, indices: Tensor) -> Tensor:
    """ONNX-ML ArrayFeatureExtractor: the entries of ``x``'s last dim at ``indices`` (all of
    them, flattened); a 1-d ``x`` gives one row."""
    picked = x.select(x.ndim - 1, _positive(indices, x.shape[-1]).reshape([-1]))
    return picked.reshape([1, -1]) if x.ndim == 1 else picked
