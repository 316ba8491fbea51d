"""Buckets: many tensors as one flat buffer per dtype and back, so that one collective call
carries a whole model's gradients or parameters. Written with burnish tensor ops only, so it
runs (and is tested) on any backend."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import burnish as bn
from burnish import Tensor
from burnish.dtype import DType

#: What a bucketed collective runs: the flat 1-d buffers (one per dtype) in, the buffers that
#: replace them out, each of the same length and dtype.
Collective = Callable[[list[Tensor]], list[Tensor]]


@dataclass(frozen=True)
class Bucket:
    """Where the tensors of one dtype lie in their flat buffer: tensor ``indices[i]`` (its
    position in the list that was planned) of shape ``shapes[i]`` holds the ``sizes[i]``
    elements from ``offsets[i]``; ``numel`` is the buffer's length."""

    dtype: DType
    indices: tuple[int, ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    numel: int


def plan(tensors: Sequence[Tensor]) -> list[Bucket]:
    """One bucket per dtype among ``tensors``, ordered by dtype name (so every process that
    plans the same list gets the same buckets); in a bucket, tensors keep their list order."""
    by_dtype: dict[DType, list[int]] = {}
    for i, tensor in enumerate(tensors):
        by_dtype.setdefault(tensor.dtype, []).append(i)
    buckets = []
    for dtype in sorted(by_dtype, key=lambda d: d.name):
        indices = by_dtype[dtype]
        shapes = tuple(tuple(tensors[i].dims()) for i in indices)
        sizes = tuple(tensors[i].numel() for i in indices)
        offsets, total = [], 0
        for size in sizes:
            offsets.append(total)
            total += size
        buckets.append(Bucket(dtype, tuple(indices), shapes, tuple(offsets), sizes, total))
    return buckets


def flatten(tensors: Sequence[Tensor], bucket: Bucket) -> Tensor:
    """The bucket's tensors (taken from ``tensors`` by index) in one 1-d tensor, row-major."""
    parts = [tensors[i].reshape([-1]) for i, size in zip(bucket.indices, bucket.sizes) if size]
    if not parts:  # only empty tensors: an empty buffer of the dtype
        return tensors[bucket.indices[0]].reshape([-1])
    return parts[0] if len(parts) == 1 else bn.cat(parts)


def unflatten(flat: Tensor, bucket: Bucket) -> list[Tensor]:
    """The bucket's tensors cut back out of ``flat`` (views where the backend has them), in the
    bucket's order."""
    if flat.dims() != [bucket.numel] or flat.dtype is not bucket.dtype:
        raise ValueError(f"unflatten: the bucket holds {bucket.numel} elements of "
                         f"{bucket.dtype}, the buffer is {flat.dims()} of {flat.dtype}")
    return [flat.narrow(0, offset, size).reshape(list(shape))
            for shape, offset, size in zip(bucket.shapes, bucket.offsets, bucket.sizes)]


def bucketed(tensors: Sequence[Tensor], collective: Collective) -> list[Tensor]:
    """``tensors`` after ``collective`` ran on their flat buffers (one per dtype, in a single
    call), in the same order, shapes and dtypes."""
    tensors = list(tensors)
    if not tensors:
        return []
    buckets = plan(tensors)
    results = collective([flatten(tensors, bucket) for bucket in buckets])
    if len(results) != len(buckets):
        raise ValueError(f"bucketed: the collective returned {len(results)} buffers for "
                         f"{len(buckets)}")
    out: list[Tensor | None] = [None] * len(tensors)
    for bucket, flat in zip(buckets, results):
        for i, tensor in zip(bucket.indices, unflatten(flat, bucket)):
            out[i] = tensor
    return out  # type: ignore[return-value]
