"""Writing blocks of values into place on burnish tensors: Col2Im (sliding blocks summed into
an image, the inverse of unfold) and TensorScatter (a key-value cache update)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import burnish as bn
from burnish import Tensor


def col2im(x: Tensor, image_shape: Sequence[int], block_shape: Sequence[int],
           dilations: Sequence[int] | None = None, pads: Sequence[int] | None = None,
           strides: Sequence[int] | None = None) -> Tensor:
    """ONNX Col2Im: ``x`` ``[N, C * prod(block), L]`` (one column per block position) summed
    into ``[N, C, *image_shape]``; values falling into the padding are dropped. Where each
    value goes depends on the shapes only, so the positions are computed once on the host."""
    image, block = list(image_shape), list(block_shape)
    k = len(image)
    dilations = list(dilations or [1] * k)
    strides = list(strides or [1] * k)
    pads = list(pads or [0] * (2 * k))
    counts = [(n + pads[d] + pads[d + k] - (dilations[d] * (block[d] - 1) + 1)) // strides[d] + 1
              for d, n in enumerate(image)]
    n, rows, length = x.shape
    channels = rows // math.prod(block)
    # For each (block offset, block position): its image position, or the extra slot past
    # the end where it falls into the padding.
    offsets = np.stack(np.meshgrid(*[np.arange(b) for b in block], indexing="ij"), -1)
    positions = np.stack(np.meshgrid(*[np.arange(c) for c in counts], indexing="ij"), -1)
    offsets = offsets.reshape(-1, 1, k)
    positions = positions.reshape(1, -1, k)
    at = positions * np.array(strides) - np.array(pads[:k]) + offsets * np.array(dilations)
    inside = ((at >= 0) & (at < np.array(image))).all(-1)
    pixels = math.prod(image)
    flat = (at * np.array([math.prod(image[d + 1:]) for d in range(k)])).sum(-1)
    flat = np.where(inside, flat, pixels)
    planes = np.arange(channels).reshape(-1, 1, 1) * (pixels + 1)
    target = (planes + flat[None]).reshape(-1).astype(np.int64)
    index = Tensor.from_data(target, device=x.device)
    zeros = Tensor.zeros([n, channels * (pixels + 1)], x.device, x.dtype)
    summed = zeros.select_add(1, index, x.reshape([n, rows * length]))
    summed = summed.reshape([n, channels, pixels + 1]).narrow(2, 0, pixels)
    return summed.reshape([n, channels, *image])


def tensor_scatter(cache: Tensor, update: Tensor, write_indices: Tensor | None = None,
                   mode: str = "linear", axis: int = -2) -> Tensor:
    """ONNX TensorScatter: ``update``'s sequence written into ``cache`` along ``axis`` from
    each batch entry's ``write_indices`` on (wrapping around in ``circular`` mode)."""
    axis = axis % cache.ndim
    length, count = cache.shape[axis], update.shape[axis]
    shape = [1] * cache.ndim
    shape[0] = cache.shape[0]
    if write_indices is None:
        start = Tensor.zeros(shape, cache.device, bn.int64)
    else:
        start = write_indices.cast(bn.int64).reshape(shape)
    along = [1] * cache.ndim
    along[axis] = length
    source = Tensor.arange(0, length, device=cache.device).reshape(along) - start
    if mode == "circular":
        source = source % length
    written = (source >= 0) & (source < count)
    source = source.clamp(min=0, max=count - 1)
    full = list(cache.shape)
    picked = update.gather(axis, source.expand([*full[:axis], length, *full[axis + 1:]]))
    return bn.where(written.expand(full), picked, cache)
