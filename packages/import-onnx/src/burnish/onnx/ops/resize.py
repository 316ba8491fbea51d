"""ONNX Resize: one axis at a time, each a [out, in] interpolation matrix computed on the host
from the sizes alone (nearest, linear and cubic, every coordinate transformation, antialias),
applied with a matmul (a gather for nearest), so gradients flow to the input."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import burnish as bn
from burnish import Tensor


def _nearest(mode: str):
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        if mode == "round_prefer_floor":
            return np.array([ratio <= 0.5, ratio > 0.5], dtype=float)
        if mode == "round_prefer_ceil":
            return np.array([ratio < 0.5, ratio >= 0.5], dtype=float)
        if mode == "floor":
            return np.array([1.0, 0.0])
        return np.array([0.0, 1.0])

    return coeffs


def _linear(antialias: bool):
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        footprint = 2 - 2 * start
        args = (np.arange(start, start + footprint) - ratio) * scale
        found = np.clip(1 - np.abs(args), 0, 1)
        return found / found.sum()

    return coeffs


def _cubic(a: float, antialias: bool):
    def kernel(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
        if x < 2:
            return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a
        return 0.0

    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([kernel(ratio + 1), kernel(ratio), kernel(1 - ratio),
                             kernel(2 - ratio)])
        scale = min(scale, 1.0)
        i_start = int(np.floor(-2 / scale) + 1)
        found = np.array([kernel(scale * (i - ratio)) for i in range(i_start, 2 - i_start)])
        return found / found.sum()

    return coeffs


def _source(mode: str, y: np.ndarray, scale: float, n_in: int, n_out: int, roi):
    width = scale * n_in
    extrapolated = None
    if mode == "align_corners":
        x = np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_crop_and_resize":
        if width == 1:
            x = np.full(n_out, (roi[1] - roi[0]) * (n_in - 1) / 2)
        else:
            x = y * (roi[1] - roi[0]) * (n_in - 1) / (width - 1)
        x = x + roi[0] * (n_in - 1)
        extrapolated = (x < 0) | (x > n_in - 1)
    elif mode == "pytorch_half_pixel":
        x = np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)
        x = offset + (y + 0.5) / scale - 0.5
    else:
        raise ValueError(f"unknown coordinate_transformation_mode {mode!r}")
    return x, extrapolated


def interpolation_matrix(n_in: int, n_out: int, scale: float, coeffs, transform: str, roi,
                         exclude_outside: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``[n_out, n_in]`` weights of one axis (ONNX's reference, made a matrix), and which
    outputs fall outside the input (tf_crop_and_resize only)."""
    y = np.arange(n_out, dtype=np.float64)
    x, extrapolated = _source(transform, y, scale, n_in, n_out, roi)
    x_int = np.floor(x).astype(np.int64)
    ratios = np.where(x == x_int, 1.0, x - x_int)
    rows = np.array([coeffs(float(r), scale) for r in ratios]) if n_out else np.zeros((0, 2))
    n = rows.shape[1]
    pad = int(np.ceil(n / 2))
    padded = x + pad
    p = np.floor(padded).astype(np.int64)
    frac = padded - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        base = -((n - 1) // 2)
        offset = np.where(frac <= 0.5, base, base + 1)
    neighbours = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        rows = np.where((neighbours < 0) | (neighbours >= n_in), 0.0, rows)
        sums = rows.sum(-1, keepdims=True)
        rows = rows / np.where(sums == 0, 1.0, sums)
    clamped = np.clip(neighbours, 0, n_in - 1)
    matrix = np.zeros((n_out, n_in))
    for k in range(n):
        np.add.at(matrix, (np.arange(n_out), clamped[:, k]), rows[:, k])
    return matrix, extrapolated


def resize(x: Tensor, roi: Sequence[float] | None = None, scales: Sequence[float] | None = None,
           sizes: Sequence[int] | None = None, mode: str = "nearest",
           coordinate_transformation_mode: str = "half_pixel", cubic_coeff_a: float = -0.75,
           exclude_outside: int = 0, extrapolation_value: float = 0.0,
           nearest_mode: str = "round_prefer_floor", antialias: int = 0,
           axes: Sequence[int] | None = None, keep_aspect_ratio_policy: str = "stretch"
           ) -> Tensor:
    """ONNX Resize (and Upsample), every mode and attribute."""
    rank = x.ndim
    dims = list(x.shape)
    roi = list(roi) if roi else None
    scales = list(scales) if scales else None
    sizes = list(sizes) if sizes else None
    if axes is not None:
        axes = [a + rank if a < 0 else a for a in axes]
        if scales is not None:
            full = [1.0] * rank
            for i, a in enumerate(axes):
                full[a] = scales[i]
            scales = full
        if sizes is not None:
            full_sizes = list(dims)
            for i, a in enumerate(axes):
                full_sizes[a] = sizes[i]
            sizes = full_sizes
        if roi is not None:
            full_roi = [0.0] * rank + [1.0] * rank
            for i, a in enumerate(axes):
                full_roi[a], full_roi[rank + a] = roi[i], roi[len(axes) + i]
            roi = full_roi
    else:
        axes = list(range(rank))
    if sizes is not None:
        scales = [sizes[i] / dims[i] for i in range(rank)]
        if keep_aspect_ratio_policy != "stretch":
            pick = min if keep_aspect_ratio_policy == "not_larger" else max
            scale = pick(scales[a] for a in axes)
            scales = [scale if i in axes else 1.0 for i in range(rank)]
            sizes = [int(scale * dims[i] + 0.5) if i in axes else dims[i] for i in range(rank)]
    else:
        sizes = [int(s * d) for s, d in zip(scales, dims)]
    if mode == "nearest":
        coeffs = _nearest(nearest_mode)
    elif mode == "linear":
        coeffs = _linear(bool(antialias))
    else:
        coeffs = _cubic(cubic_coeff_a, bool(antialias))
    out = x
    outside = None
    for axis in axes:
        scale, n_out = float(scales[axis]), int(sizes[axis])
        axis_roi = None if roi is None else [roi[axis], roi[axis + rank]]
        if math.isclose(scale, 1.0) and n_out == out.shape[axis] and (
                axis_roi is None or (axis_roi[0] == 0 and axis_roi[1] == 1)):
            continue
        matrix, extrapolated = interpolation_matrix(out.shape[axis], n_out, scale, coeffs,
                                                    coordinate_transformation_mode, axis_roi,
                                                    bool(exclude_outside))
        if mode == "nearest":
            index = Tensor.from_data(matrix.argmax(1).astype(np.int64), device=x.device)
            out = out.select(axis, index)
        else:
            weights = Tensor.from_data(matrix.T.astype(np.float64), device=x.device)
            moved = out.swap_dims(axis, -1)
            work = moved if moved.dtype.is_float else moved.double()
            moved = work.matmul(weights.cast(work.dtype))
            out = moved.swap_dims(axis, -1)
        if extrapolated is not None and extrapolated.any():
            shape = [1] * rank
            shape[axis] = n_out
            mask = Tensor.from_data(extrapolated.reshape(shape), device=x.device)
            outside = mask if outside is None else outside | mask
    if outside is not None:
        out = bn.where(outside, Tensor.full([], extrapolation_value, x.device, out.dtype), out)
    if out.dtype is not x.dtype:
        out = out.round().cast(x.dtype) if not x.dtype.is_float else out.cast(x.dtype)
    return out
