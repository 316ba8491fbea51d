"""Convolutions, transposed convolutions and unfold over 1, 2 or 3 spatial dims, through GEMM."""

from __future__ import annotations

import math

import numpy as np

from burnish.dtype import DType
from burnish.ndarray.dtypes import quiet, widen
from burnish.ndarray.windows import Dims, output_size, pad, tap, windows

#: Most elements an im2col buffer may hold (float32: 256 MiB); larger batches go in chunks.
COLUMN_LIMIT = 1 << 26


class ConvOps:
    """conv, conv_transpose and unfold. Half floats are computed in float32 (one rounding)."""

    @quiet
    def conv(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride: Dims,
             padding: Dims, dilation: Dims, groups: int) -> np.ndarray:
        dtype = x.dtype
        x, weight = widen(x), widen(weight)
        batch, channels = x.shape[:2]
        kernel = weight.shape[2:]
        out_size = tuple(output_size(n, k, s, p, d) for n, k, s, p, d in
                         zip(x.shape[2:], kernel, stride, padding, dilation))
        out_channels = weight.shape[0]
        per_group = channels // groups
        spatial = len(kernel)

        padded = pad(x, [(p, p) for p in padding])
        out = np.empty((batch, out_channels) + out_size, x.dtype)
        # Viewed as [batch, groups, out / groups, *out].
        grouped = out.reshape((batch, groups, out_channels // groups) + out_size)
        if per_group == 1:
            _depthwise(padded, weight, stride, dilation, grouped)
        else:
            _im2col_gemm(padded, weight, stride, dilation, grouped)
        if bias is not None:
            out += widen(bias).reshape((out_channels,) + (1,) * spatial)
        return out.astype(dtype, copy=False)

    @quiet
    def conv_transpose(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
                       stride: Dims, padding: Dims, output_padding: Dims, dilation: Dims,
                       groups: int) -> np.ndarray:
        dtype = x.dtype
        x, weight = widen(x), widen(weight)
        batch, channels = x.shape[:2]
        kernel = weight.shape[2:]
        spatial = len(kernel)
        out_per_group = weight.shape[1]
        out_channels = out_per_group * groups
        # Every input element scatters weight * value into a kernel-sized patch of the output:
        # accumulate into the uncropped output (padding not yet removed), then crop.
        full = tuple((n - 1) * s + d * (k - 1) + 1 + op for n, s, d, k, op in
                     zip(x.shape[2:], stride, dilation, kernel, output_padding))
        acc = np.zeros((batch, groups, out_per_group) + full, x.dtype)
        grouped = x.reshape((batch, groups, channels // groups) + x.shape[2:])
        if channels == groups:
            _depthwise_transpose(grouped, weight, stride, dilation, acc)
        else:
            _gemm_col2im(grouped, weight, stride, dilation, acc)
        crop = (slice(None), slice(None)) + tuple(slice(p, f - p) for p, f in zip(padding, full))
        out = acc.reshape((batch, out_channels) + full)[crop]
        if bias is not None:
            out = out + widen(bias).reshape((out_channels,) + (1,) * spatial)
        else:
            out = np.ascontiguousarray(out)
        return out.astype(dtype, copy=False)

    def unfold(self, x: np.ndarray, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
               dtype: DType) -> np.ndarray:
        out_size = tuple(output_size(n, k, s, p, d) for n, k, s, p, d in
                         zip(x.shape[2:], kernel, stride, padding, dilation))
        padded = pad(x, [(p, p) for p in padding])
        view = windows(padded, kernel, stride, dilation, out_size)
        batch, channels = x.shape[:2]
        # [batch, channels, *out, *kernel] -> [batch, channels, *kernel, *out], then flattened.
        spatial = len(kernel)
        order = (0, 1) + tuple(range(2 + spatial, 2 + 2 * spatial)) + tuple(range(2, 2 + spatial))
        return view.transpose(order).reshape(
            batch, channels * math.prod(kernel), math.prod(out_size))


def _im2col_gemm(padded: np.ndarray, weight: np.ndarray, stride: Dims, dilation: Dims,
                 out: np.ndarray) -> None:
    """Convolution as one GEMM per group over the whole batch (im2col), written into ``out``
    ([batch, groups, out / groups, *out_size]); large batches go in chunks."""
    batch, groups, out_per_group = out.shape[:3]
    out_size = out.shape[3:]
    kernel = weight.shape[2:]
    spatial = len(kernel)
    per_group = weight.shape[1]
    taps = math.prod(kernel)
    positions = math.prod(out_size)
    # [batch, groups, channels / groups, *out, *kernel], a view: nothing is copied yet.
    view = windows(padded, kernel, stride, dilation, out_size).reshape(
        (batch, groups, per_group) + out_size + kernel)
    # Columns as [groups, channels / groups * kernel, batch * positions]: one GEMM per group
    # for the whole batch, which is what makes batches of small images fast.
    order = ((1, 2) + tuple(range(3 + spatial, 3 + 2 * spatial)) + (0,)
             + tuple(range(3, 3 + spatial)))
    weights = weight.reshape(groups, out_per_group, per_group * taps)
    step = max(1, COLUMN_LIMIT // max(1, groups * per_group * taps * positions))
    for start in range(0, batch, step):
        stop = min(batch, start + step)
        columns = view[start:stop].transpose(order).reshape(
            groups, per_group * taps, (stop - start) * positions)
        result = np.matmul(weights, columns).reshape(
            (groups, out_per_group, stop - start) + out_size)
        # Back to [batch, groups, out / groups, *out] while copying into the output.
        out[start:stop] = np.moveaxis(result, 2, 0)


def _depthwise(padded: np.ndarray, weight: np.ndarray, stride: Dims, dilation: Dims,
               out: np.ndarray) -> None:
    """Convolution with one input channel per group (depthwise), written into ``out``
    ([batch, groups, out / groups, *out_size]): a multiply-add per kernel tap. A GEMM with
    an inner dimension of one kernel's taps would spend its time copying columns."""
    groups, out_per_group = out.shape[1:3]
    out_size = out.shape[3:]
    kernel = weight.shape[2:]
    spatial = len(kernel)
    weights = weight.reshape((groups, out_per_group) + kernel)
    out[...] = 0
    term = np.empty_like(out)
    for k in np.ndindex(*kernel):
        view = tap(padded, tuple(t * d for t, d in zip(k, dilation)), stride, out_size)
        scale = weights[(slice(None), slice(None)) + k].reshape(
            (groups, out_per_group) + (1,) * spatial)
        np.multiply(view[:, :, None], scale, out=term)
        out += term


def _gemm_col2im(x: np.ndarray, weight: np.ndarray, stride: Dims, dilation: Dims,
                 acc: np.ndarray) -> None:
    """Transposed convolution of ``x`` ([batch, groups, channels / groups, *in]) added into
    ``acc`` ([batch, groups, out / groups, *full]): one GEMM per group gives every product
    ``[groups, out / groups * kernel, batch * positions]``, then each kernel tap adds its slab
    into a strided view of ``acc`` (col2im). Large batches go in chunks."""
    batch, groups, per_group = x.shape[:3]
    in_size = x.shape[3:]
    out_per_group = acc.shape[2]
    kernel = weight.shape[2:]
    spatial = len(kernel)
    positions = math.prod(in_size)
    weights = weight.reshape(groups, per_group, out_per_group * math.prod(kernel))
    weights = weights.transpose(0, 2, 1)
    # products[g, o, *k, n, *in] read as [n, g, o, *in] for one tap k.
    order = (2, 0, 1) + tuple(range(3, 3 + spatial))
    step = max(1, COLUMN_LIMIT // max(1, weights.shape[0] * weights.shape[1] * positions))
    for start in range(0, batch, step):
        stop = min(batch, start + step)
        inputs = np.moveaxis(x[start:stop].reshape(stop - start, groups, per_group, positions),
                             0, 2).reshape(groups, per_group, (stop - start) * positions)
        products = np.matmul(weights, inputs).reshape(
            (groups, out_per_group) + kernel + (stop - start,) + in_size)
        for k in np.ndindex(*kernel):
            view = tap(acc[start:stop], tuple(t * d for t, d in zip(k, dilation)), stride,
                       in_size)
            view += products[(slice(None), slice(None)) + k].transpose(order)


def _depthwise_transpose(x: np.ndarray, weight: np.ndarray, stride: Dims, dilation: Dims,
                         acc: np.ndarray) -> None:
    """Transposed convolution with one input channel per group, added into ``acc``: each
    kernel tap is a broadcast multiply-add into a strided view, no GEMM."""
    groups, out_per_group = acc.shape[1:3]
    in_size = x.shape[3:]
    kernel = weight.shape[2:]
    weights = weight.reshape((groups, out_per_group) + kernel)
    term = np.empty(x.shape[:2] + (out_per_group,) + in_size, x.dtype)
    for k in np.ndindex(*kernel):
        scale = weights[(slice(None), slice(None)) + k].reshape(
            (groups, out_per_group) + (1,) * len(kernel))
        view = tap(acc, tuple(t * d for t, d in zip(k, dilation)), stride, in_size)
        view += np.multiply(x, scale, out=term)
