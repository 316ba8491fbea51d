"""ONNX's sampling at computed positions on burnish tensors: GridSample (nearest, linear,
cubic; zeros, border and reflection padding; 2 or 3 spatial dims), AffineGrid, and
DeformConv, whose kernel taps sample at learned offsets."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product

import burnish as bn
from burnish import Tensor

#: Keys' cubic convolution parameter, as ONNX's GridSample uses it.
CUBIC_ALPHA = -0.75


def _reflect(x: Tensor, low: float, high: float) -> Tensor:
    """``x`` reflected off ``low`` and ``high`` until it lies between them."""
    span = high - low
    below, above = low - x, x - high
    flips_below, flips_above = (below / span).floor(), (above / span).floor()
    rest_below, rest_above = below - flips_below * span, above - flips_above * span
    even_below = (flips_below - (flips_below / 2).floor() * 2) == 0
    even_above = (flips_above - (flips_above / 2).floor() * 2) == 0
    from_below = bn.where(even_below, low + rest_below, high - rest_below)
    from_above = bn.where(even_above, high - rest_above, low + rest_above)
    return bn.where(x < low, from_below, bn.where(x > high, from_above, x))


def _cubic_weights(t: Tensor) -> list[Tensor]:
    """The weights of the taps at ``-1, 0, 1, 2`` for a fraction ``t`` in ``[0, 1)``."""
    a = CUBIC_ALPHA

    def far(d: Tensor) -> Tensor:  # 1 <= d < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    def near(d: Tensor) -> Tensor:  # 0 <= d < 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def grid_sample(x: Tensor, grid: Tensor, mode: str = "linear", padding_mode: str = "zeros",
                align_corners: int = 0) -> Tensor:
    """ONNX GridSample: ``x`` ``[N, C, *D]`` read at the normalized positions of ``grid``
    ``[N, *O, len(D)]`` (its last dim lists the last spatial dim's coordinate first), giving
    ``[N, C, *O]``. Each output is a weighted sum of gathered taps, so gradients reach ``x``."""
    n, channels, *dims = x.shape
    k = len(dims)
    out_dims = list(grid.shape[1:-1])
    points = math.prod(out_dims)
    coords = grid.cast(bn.float32).reshape([n, points, k])
    positions = []
    for d, size in enumerate(dims):
        g = coords[:, :, k - 1 - d].reshape([n, points])
        positions.append((g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2)
    y = sample(x, positions, mode, padding_mode, align_corners)
    return y.reshape([n, channels, *out_dims])


def sample(x: Tensor, positions: list[Tensor], mode: str = "linear",
           padding_mode: str = "zeros", align_corners: int = 1) -> Tensor:
    """``x`` ``[N, C, *D]`` read at ``positions`` (one ``[N, P]`` float32 tensor of pixel
    coordinates per spatial dim), as GridSample reads it: ``[N, C, P]``. ``align_corners``
    places the borders reflection and out-of-range tests use."""
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    n, channels, *dims = x.shape
    k = len(dims)
    points = positions[0].shape[1]
    strides = [math.prod(dims[d + 1:]) for d in range(k)]
    taps_per_dim = []  # per spatial dim: [(index, weight or None, inside or None)]
    for d, size in enumerate(dims):
        pos = positions[d]
        low, high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
        if mode == "nearest":
            pos = pos.round()
        outside = (pos < low) | (pos > high)
        if padding_mode == "border":
            pos = bn.where(outside, pos.clamp(min=0.0, max=size - 1.0), pos)
        elif padding_mode == "reflection":
            pos = _reflect(pos, low, high)
        if mode == "nearest":
            offsets, weights = [pos], [None]
        else:
            start = pos.floor()
            t = pos - start
            if mode == "linear":
                offsets, weights = [start, start + 1], [1 - t, t]
            else:
                offsets = [start - 1, start, start + 1, start + 2]
                weights = _cubic_weights(t)
        taps = []
        for at, weight in zip(offsets, weights):
            inside = None
            if padding_mode == "zeros":
                inside = (at >= 0) & (at <= size - 1)
            elif padding_mode == "reflection":
                at = _reflect(at, low, high).clamp_min(0.0)
            at = at.clamp(min=0.0, max=size - 1.0).floor().cast(bn.int64)
            taps.append((at, weight, inside))
        taps_per_dim.append(taps)
    flat = x.reshape([n, channels, math.prod(dims)])
    total = None
    for combination in product(*taps_per_dim):
        index = sum((at * stride for (at, _, _), stride in zip(combination, strides)),
                    start=Tensor.zeros([n, points], x.device, bn.int64))
        value = flat.gather(2, index.unsqueeze(1).expand([n, channels, points]))
        weight = None
        for _, w, inside in combination:
            if w is not None:
                weight = w if weight is None else weight * w
            if inside is not None:
                mask = inside.cast(bn.float32)
                weight = mask if weight is None else weight * mask
        if weight is not None:
            value = value * weight.cast(x.dtype).unsqueeze(1)
        total = value if total is None else total + value
    return total


def deform_conv(x: Tensor, weight: Tensor, offset: Tensor, bias: Tensor | None = None,
                mask: Tensor | None = None, dilations=None, group: int = 1,
                offset_group: int = 1, pads=None, strides=None) -> Tensor:
    """ONNX DeformConv (2 spatial dims): each kernel tap reads ``x`` bilinearly at its
    position moved by ``offset`` ``[N, offset_group * kh * kw * 2, oh, ow]`` (zeros outside),
    scaled by ``mask``; the taps are then combined with ``weight`` as a grouped Conv."""
    n, channels, height, width = x.shape
    out_channels, per_group, kh, kw = weight.shape
    oh, ow = offset.shape[2:]
    dh, dw = list(dilations or [1, 1])
    sh, sw = list(strides or [1, 1])
    top, left = list(pads or [0, 0, 0, 0])[:2]
    taps = kh * kw
    offset = offset.cast(bn.float32).reshape([n, offset_group, kh, kw, 2, oh * ow])
    if mask is not None:
        mask = mask.reshape([n, offset_group, kh, kw, oh * ow])
    rows = Tensor.arange(0, oh, device=x.device).cast(bn.float32).reshape([oh, 1])
    cols = Tensor.arange(0, ow, device=x.device).cast(bn.float32).reshape([1, ow])
    base_h = (rows * sh - top).expand([oh, ow]).reshape([1, oh * ow])
    base_w = (cols * sw - left).expand([oh, ow]).reshape([1, oh * ow])
    per_offset_group = channels // offset_group
    columns = []  # per offset group: [N, channels of the group, taps, oh * ow]
    for g in range(offset_group):
        part = x.narrow(1, g * per_offset_group, per_offset_group)
        sampled = []
        for a in range(kh):
            for b in range(kw):
                h = base_h + a * dh + offset[:, g, a, b, 0]
                w = base_w + b * dw + offset[:, g, a, b, 1]
                value = sample(part, [h, w], "linear", "zeros", align_corners=1)
                if mask is not None:
                    value = value * mask[:, g, a, b].cast(x.dtype).unsqueeze(1)
                sampled.append(value.unsqueeze(2))
        columns.append(bn.cat(sampled, 2))
    cols_all = bn.cat(columns, 1).reshape([n, group, per_group * taps, oh * ow])
    kernel = weight.reshape([group, out_channels // group, per_group * taps])
    y = kernel.unsqueeze(0).matmul(cols_all).reshape([n, out_channels, oh, ow])
    if bias is not None:
        y = y + bias.reshape([1, -1, 1, 1])
    return y


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: int = 0) -> Tensor:
    """ONNX AffineGrid: the normalized positions ``theta`` ``[N, k, k + 1]`` maps a
    ``size`` ``[N, C, *D]`` output grid to, as ``[N, *D, k]`` (x first)."""
    dims = list(size[2:])
    k = len(dims)
    axes = []
    for length in dims:
        steps = Tensor.arange(0, length, device=theta.device).cast(bn.float32)
        if align_corners:
            axes.append(steps * (2.0 / max(length - 1, 1)) - 1)
        else:
            axes.append((steps * 2 + 1) / length - 1)
    columns = []
    for d in reversed(range(k)):  # x (the last dim) first
        shape = [1] * k
        shape[d] = dims[d]
        columns.append(axes[d].reshape(shape).expand(dims).reshape([-1, 1]))
    points = math.prod(dims)
    columns.append(Tensor.ones([points, 1], theta.device, bn.float32))
    base = bn.cat(columns, 1)  # [points, k + 1]
    grid = theta.cast(bn.float32).matmul(base.transpose().unsqueeze(0))  # [N, k, points]
    return grid.swap_dims(1, 2).reshape([theta.shape[0], *dims, k]).cast(theta.dtype)
