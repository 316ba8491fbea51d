"""ONNX's neural-network operators on burnish tensors: convolutions and pools with ONNX's
padding rules, normalizations, softmax, Gemm, MatMul, Einsum, LRN."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import burnish as bn
import burnish.functional as F
from burnish import Tensor
from burnish.onnx.ops.core import scalar


def _auto_pads(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
               dilations: Sequence[int], auto_pad: str) -> list[int]:
    """Begins then ends for SAME_UPPER / SAME_LOWER: the output is ``ceil(in / stride)``."""
    begins, ends = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        small = total // 2
        if auto_pad == "SAME_UPPER":
            begins.append(small)
            ends.append(total - small)
        else:
            begins.append(total - small)
            ends.append(small)
    return begins + ends


def _pads(x: Tensor, kernel: Sequence[int], strides, dilations, pads, auto_pad) -> list[int]:
    spatial = x.ndim - 2
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return _auto_pads(list(x.shape[2:]), kernel, strides, dilations, auto_pad)
    if auto_pad == "VALID" or pads is None:
        return [0] * (2 * spatial)
    return list(pads)


def _pad_spatial(x: Tensor, begins: Sequence[int], ends: Sequence[int], value: float
                 ) -> Tensor:
    pairs = []
    for b, e in zip(reversed(list(begins)), reversed(list(ends))):
        pairs += [b, e]
    return F.pad(x, pairs, "constant", value) if any(pairs) else x


def conv(x: Tensor, weight: Tensor, bias: Tensor | None = None, strides=None, pads=None,
         dilations=None, group: int = 1, auto_pad: str = "NOTSET",
         kernel_shape=None) -> Tensor:
    """ONNX Conv over 1 to 3 spatial dims, asymmetric and automatic padding included."""
    x, strides, begins, dilations = window(x, list(weight.shape[2:]), strides, pads,
                                           dilations, auto_pad)
    return F.conv(x, weight, bias, strides, begins, dilations, group)


def window(x: Tensor, kernel: list[int], strides, pads, dilations, auto_pad: str,
           value: float = 0.0) -> tuple[Tensor, list[int], list[int], list[int]]:
    """A convolution's ``x``, strides, padding at both ends and dilations from ONNX's
    attributes: asymmetric and automatic padding become ``value`` around ``x`` (and no
    padding left)."""
    spatial = x.ndim - 2
    strides = list(strides or [1] * spatial)
    dilations = list(dilations or [1] * spatial)
    p = _pads(x, kernel, strides, dilations, pads, auto_pad)
    begins, ends = p[:spatial], p[spatial:]
    if begins != ends:
        x = _pad_spatial(x, begins, ends, value)
        begins = [0] * spatial
    return x, strides, begins, dilations


def conv_transpose(x: Tensor, weight: Tensor, bias: Tensor | None = None, strides=None,
                   pads=None, dilations=None, group: int = 1, auto_pad: str = "NOTSET",
                   output_padding=None, output_shape=None, kernel_shape=None) -> Tensor:
    """ONNX ConvTranspose: computed unpadded, then cropped (pads) and extended
    (output_padding), or fitted to ``output_shape``."""
    spatial = x.ndim - 2
    kernel = list(weight.shape[2:])
    strides = list(strides or [1] * spatial)
    dilations = list(dilations or [1] * spatial)
    extra = list(output_padding or [0] * spatial)
    sizes = list(x.shape[2:])
    full = [(n - 1) * s + (k - 1) * d + 1 for n, s, k, d in zip(sizes, strides, kernel,
                                                                dilations)]
    if output_shape is not None:
        target = list(output_shape)[-spatial:]
        totals = [f + e - t for f, e, t in zip(full, extra, target)]
        if auto_pad == "SAME_UPPER":  # NOTSET puts the larger half first, as SAME_LOWER
            begins = [t // 2 for t in totals]
        else:
            begins = [t - t // 2 for t in totals]
        ends = [t - b for t, b in zip(totals, begins)]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [n * s for n, s in zip(sizes, strides)]
        totals = [f + e - t for f, e, t in zip(full, extra, target)]
        if auto_pad == "SAME_UPPER":
            begins = [t // 2 for t in totals]
        else:
            begins = [t - t // 2 for t in totals]
        ends = [t - b for t, b in zip(totals, begins)]
    else:
        p = list(pads or [0] * (2 * spatial))
        begins, ends = p[:spatial], p[spatial:]
    y = F.conv_transpose(x, weight, None, strides, 0, 0, dilations, group)
    ranges = [slice(None), slice(None)]
    grow = []
    for f, b, e, o in zip(full, begins, ends, extra):
        stop = f - e + o
        ranges.append(slice(b, min(stop, f)))
        grow.append(max(stop - f, 0))
    y = y.slice(ranges)
    if any(grow):
        y = _pad_spatial(y, [0] * spatial, grow, 0.0)
    if bias is not None:
        y = y + bias.reshape([1, -1] + [1] * spatial)
    return y


def _windows(x: Tensor, kernel, strides, dilations, out_sizes):
    """Each kernel offset's strided view of ``x``: ``[batch, channels, *out]`` tensors."""
    spatial = len(kernel)
    for offsets in np.ndindex(*kernel):
        ranges = [slice(None), slice(None)]
        for d in range(spatial):
            start = offsets[d] * dilations[d]
            ranges.append(slice(start, start + (out_sizes[d] - 1) * strides[d] + 1, strides[d]))
        yield x.slice(ranges)


def _pool_geometry(x: Tensor, kernel, strides, pads, dilations, ceil_mode, auto_pad):
    spatial = len(kernel)
    strides = list(strides or [1] * spatial)
    dilations = list(dilations or [1] * spatial)
    p = _pads(x, kernel, strides, dilations, pads, auto_pad)
    begins, ends = p[:spatial], p[spatial:]
    out_sizes, tails = [], []
    for n, k, s, d, b, e in zip(x.shape[2:], kernel, strides, dilations, begins, ends):
        span = (k - 1) * d + 1
        room = n + b + e - span
        out = (-(-room // s) if ceil_mode else room // s) + 1
        if ceil_mode and (out - 1) * s >= n + b:
            out -= 1  # the last window must start inside the input or its left padding
        out_sizes.append(out)
        tails.append(max((out - 1) * s + span - (n + b + e), 0))
    return strides, dilations, begins, ends, out_sizes, tails


def max_pool(x: Tensor, kernel_shape, strides=None, pads=None, dilations=None,
             ceil_mode: int = 0, auto_pad: str = "NOTSET", storage_order: int = 0,
             with_indices: bool = False):
    """ONNX MaxPool over any number of spatial dims; with ``with_indices`` also the flat
    int64 positions of the maxima in the input (row-major, or column-major by
    ``storage_order``)."""
    kernel = list(kernel_shape)
    strides, dilations, begins, ends, out_sizes, tails = _pool_geometry(
        x, kernel, strides, pads, dilations, ceil_mode, auto_pad)
    if (not with_indices and x.dtype.is_float and 1 <= len(kernel) <= 3 and begins == ends
            and all(2 * b <= k for b, k in zip(begins, kernel))
            and out_sizes == [(n + 2 * b - (k - 1) * d - 1) // s + 1 for n, k, s, d, b in
                              zip(x.shape[2:], kernel, strides, dilations, begins)]):
        # The backend's pooling (one kernel) where its windows are ONNX's: symmetric padding
        # of at most half a window, no ceil-mode overhang.
        return F.max_pool(x, kernel, strides, begins, dilations)
    low = -math.inf if x.dtype.is_float else int(np.iinfo(x.dtype.numpy).min)
    padded = _pad_spatial(x, begins, [e + t for e, t in zip(ends, tails)], low)
    best = None
    best_index = None
    if with_indices:
        spatial_shape = list(x.shape[2:])
        positions = np.arange(math.prod(x.shape[1:]), dtype=np.int64).reshape(x.shape[1:])
        if storage_order:
            # Column-major: the first spatial dim varies fastest.
            grids = np.meshgrid(*[np.arange(n) for n in spatial_shape], indexing="ij")
            cm = sum(g * math.prod(spatial_shape[:d]) for d, g in enumerate(grids))
            positions = np.arange(x.shape[1])[:, None] * math.prod(spatial_shape) + cm.reshape(
                1, -1)
            positions = positions.reshape(x.shape[1:])
        batch_offsets = np.arange(x.shape[0], dtype=np.int64).reshape(
            [-1] + [1] * (x.ndim - 1)) * math.prod(x.shape[1:])
        index = Tensor.from_data(positions[None] + batch_offsets, device=x.device)
        index = _pad_spatial(index, begins, [e + t for e, t in zip(ends, tails)], -1)
        windows = zip(_windows(padded, kernel, strides, dilations, out_sizes),
                      _windows(index, kernel, strides, dilations, out_sizes))
        for view, where in windows:
            if best is None:
                best, best_index = view, where
            else:
                better = view > best
                best = bn.where(better, view, best)
                best_index = bn.where(better, where, best_index)
        return best, best_index
    for view in _windows(padded, kernel, strides, dilations, out_sizes):
        best = view if best is None else best.maximum(view)
    return best


def avg_pool(x: Tensor, kernel_shape, strides=None, pads=None, dilations=None,
             ceil_mode: int = 0, auto_pad: str = "NOTSET", count_include_pad: int = 0
             ) -> Tensor:
    """ONNX AveragePool: the mean over each window, counting the explicit padding when
    ``count_include_pad``, never the positions past it that ``ceil_mode`` adds."""
    kernel = list(kernel_shape)
    strides, dilations, begins, ends, out_sizes, tails = _pool_geometry(
        x, kernel, strides, pads, dilations, ceil_mode, auto_pad)
    full_ends = [e + t for e, t in zip(ends, tails)]
    padded = _pad_spatial(x, begins, full_ends, 0.0)
    ones = Tensor.ones([1, 1, *x.shape[2:]], x.device, x.dtype)
    if count_include_pad:
        ones = _pad_spatial(ones, begins, ends, 1.0)
        counts = _pad_spatial(ones, [0] * len(kernel), tails, 0.0)
    else:
        counts = _pad_spatial(ones, begins, full_ends, 0.0)
    total = count = None
    for view, c in zip(_windows(padded, kernel, strides, dilations, out_sizes),
                       _windows(counts, kernel, strides, dilations, out_sizes)):
        total = view if total is None else total + view
        count = c if count is None else count + c
    return total / count


def lp_pool(x: Tensor, kernel_shape, strides=None, pads=None, dilations=None,
            ceil_mode: int = 0, auto_pad: str = "NOTSET", p: int = 2) -> Tensor:
    kernel = list(kernel_shape)
    strides, dilations, begins, ends, out_sizes, tails = _pool_geometry(
        x, kernel, strides, pads, dilations, ceil_mode, auto_pad)
    padded = _pad_spatial(x, begins, [e + t for e, t in zip(ends, tails)], 0.0)
    total = None
    for view in _windows(padded, kernel, strides, dilations, out_sizes):
        term = view.abs() ** p
        total = term if total is None else total + term
    return total ** (1.0 / p)


def global_pool(x: Tensor, op: str, p: int = 2) -> Tensor:
    dims = tuple(range(2, x.ndim))
    if op == "max":
        return x.max(dims, True)
    if op == "lp":
        return ((x.abs() ** p).sum(dims, True)) ** (1.0 / p)
    return x.mean(dims, True)


def _channel_shape(x: Tensor) -> list[int]:
    return [1, -1] + [1] * (x.ndim - 2)


def batch_norm(x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor,
               epsilon: float = 1e-5, momentum: float = 0.9, training_mode: int = 0):
    """ONNX BatchNormalization; in training mode also the updated running mean and var."""
    shape = _channel_shape(x)
    if training_mode:
        dims = tuple(d for d in range(x.ndim) if d != 1)
        batch_mean = x.mean(dims)
        batch_var = ((x - batch_mean.reshape(shape)) ** 2).mean(dims)
        y = (x - batch_mean.reshape(shape)) / (batch_var.reshape(shape) + epsilon).sqrt()
        y = y * scale.reshape(shape) + bias.reshape(shape)
        running_mean = mean * momentum + batch_mean * (1 - momentum)
        running_var = var * momentum + batch_var * (1 - momentum)
        return y, running_mean, running_var
    y = (x - mean.reshape(shape)) / (var.reshape(shape) + epsilon).sqrt()
    return y * scale.reshape(shape) + bias.reshape(shape)


def instance_norm(x: Tensor, scale: Tensor, bias: Tensor, epsilon: float = 1e-5) -> Tensor:
    dims = tuple(range(2, x.ndim))
    mean = x.mean(dims, True)
    var = ((x - mean) ** 2).mean(dims, True)
    shape = _channel_shape(x)
    return (x - mean) / (var + epsilon).sqrt() * scale.reshape(shape) + bias.reshape(shape)


def layer_norm(x: Tensor, scale: Tensor, bias: Tensor | None = None, axis: int = -1,
               epsilon: float = 1e-5, outputs: int = 1):
    """ONNX LayerNormalization over the dims from ``axis`` on; with ``outputs=3`` also the
    mean and the inverse standard deviation."""
    axis = axis + x.ndim if axis < 0 else axis
    dims = tuple(range(axis, x.ndim))
    mean = x.mean(dims, True)
    var = ((x - mean) ** 2).mean(dims, True)
    inv = 1 / (var + epsilon).sqrt()
    y = (x - mean) * inv * scale
    if bias is not None:
        y = y + bias
    if outputs == 1:
        return y
    return y, mean, inv


def lrn(x: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0
        ) -> Tensor:
    """ONNX LRN: each value over its neighbours' squares across channels."""
    square = x * x
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = F.pad(square.swap_dims(1, -1), [before, after]).swap_dims(1, -1)
    channels = x.shape[1]
    total = None
    for i in range(size):
        part = padded.narrow(1, i, channels)
        total = part if total is None else total + part
    return x / (bias + alpha / size * total) ** beta


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """ONNX Softmax; float16 and bfloat16 step by step in their own dtype (the maximum
    subtracted, exp, sum, division), rounding where ONNX's reference rounds."""
    if x.dtype in (bn.float16, bn.bfloat16):
        shifted = (x - x.max(axis, True)).exp()
        return shifted / shifted.sum(axis, True)
    return F.softmax(x, axis)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    return F.log_softmax(x, axis)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """ONNX MatMul, NumPy's matmul: 1-d operands gain and lose a dim."""
    if a.ndim == 1 and b.ndim == 1:
        return (a * b).sum()
    if a.ndim == 1:
        return a.unsqueeze(0).matmul(b).squeeze(-2)
    if b.ndim == 1:
        return a.matmul(b.unsqueeze(-1)).squeeze(-1)
    return a.matmul(b)


def gemm(a: Tensor, b: Tensor, c: Tensor | None = None, alpha: float = 1.0, beta: float = 1.0,
         trans_a: int = 0, trans_b: int = 0) -> Tensor:
    a = a.transpose() if trans_a else a
    b = b.transpose() if trans_b else b
    y = a.matmul(b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c)
    return y


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """ONNX Einsum: operands lined up on all letters, multiplied, summed over the letters the
    output leaves out (``...`` broadcasts; a repeated letter takes a diagonal)."""
    equation = equation.replace(" ", "")
    if "->" in equation:
        inputs, output = equation.split("->")
    else:
        inputs, output = equation, None
    terms = inputs.split(",")
    ellipsis_rank = 0
    for term, x in zip(terms, operands):
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, x.ndim - len(term.replace("...", "")))
    ell = [chr(0x100 + i) for i in range(ellipsis_rank)]

    def letters(term: str, rank: int) -> list[str]:
        if "..." not in term:
            return list(term)
        head, tail = term.split("...")
        n = rank - len(head) - len(tail)
        return list(head) + ell[ellipsis_rank - n:] + list(tail)

    parsed = [letters(t, x.ndim) for t, x in zip(terms, operands)]
    if output is None:
        counts: dict[str, int] = {}
        for p in parsed:
            for c in p:
                counts[c] = counts.get(c, 0) + 1
        output_letters = ell + sorted(c for c, k in counts.items() if k == 1 and c not in ell)
    else:
        output_letters = letters(output, len(output.replace("...", "")) + ellipsis_rank)
    order: list[str] = list(output_letters)
    for p in parsed:
        for c in p:
            if c not in order:
                order.append(c)
    product = None
    for p, x in zip(parsed, operands):
        # Diagonals first: a letter twice in one operand.
        while len(set(p)) < len(p):
            c = next(c for c in p if p.count(c) > 1)
            i, j = p.index(c), p.index(c, p.index(c) + 1)
            n = x.shape[i]
            eye = Tensor.eye(n, device=x.device).cast(x.dtype)
            shape = [1] * x.ndim
            shape[i], shape[j] = n, n
            x = (x * eye.reshape(shape)).sum(j)
            p = p[:j] + p[j + 1:]
        perm = sorted(range(len(p)), key=lambda k: order.index(p[k]))
        x = x.permute(perm) if len(p) > 1 else x
        present = [p[k] for k in perm]
        shape = [x.shape[present.index(c)] if c in present else 1 for c in order]
        x = x.reshape(shape)
        product = x if product is None else product * x
    summed = tuple(range(len(output_letters), len(order)))
    if summed:
        product = product.sum(summed)
    return product


def lp_normalization(x: Tensor, axis: int = -1, p: int = 2) -> Tensor:
    """ONNX LpNormalization: ``x`` over its L1 or L2 norm along ``axis`` (0 where the norm
    is 0)."""
    norm = x.abs().sum(axis, True) if p == 1 else (x * x).sum(axis, True).sqrt()
    zero = norm == 0
    return bn.where(zero, x.zeros_like(), x / bn.where(zero, norm.ones_like(), norm))


def dropout_inference(x: Tensor, ratio: Tensor | None, training: Tensor | None) -> Tensor:
    """ONNX Dropout whose ratio or training flag is an input: ``x`` itself when it drops
    nothing (not training, or a ratio of 0); in training with a ratio above 0 an
    ``UnsupportedOperatorError``, as at import (random masks cannot be reproduced)."""
    from burnish.onnx.errors import UnsupportedOperatorError

    dropping = training is not None and bool(scalar(training))
    rate = 0.5 if ratio is None else float(scalar(ratio))
    if dropping and rate != 0.0:
        raise UnsupportedOperatorError(f"Dropout in training mode with ratio {rate} (random "
                                       "masks cannot be reproduced)")
    return x


def dropout_mask(x: Tensor) -> Tensor:
    return Tensor.ones(list(x.shape), x.device, bn.bool_)


def det(x: Tensor) -> Tensor:
    """ONNX Det: the determinant of the last two dims, by Gaussian elimination with partial
    pivoting in Tensor ops (differentiable)."""
    n = x.shape[-1]
    batch = list(x.shape[:-2])
    a = x.reshape([-1, n, n])
    sign = Tensor.ones([a.shape[0]], x.device, x.dtype)
    result = Tensor.ones([a.shape[0]], x.device, x.dtype)
    rows = Tensor.arange(0, n, device=x.device)
    for k in range(n):
        column = a[:, :, k].abs()
        column = bn.where(rows < k, column.zeros_like() - 1, column)
        pivot = column.argmax(1).reshape([-1])
        swap = pivot != k
        sign = bn.where(swap, -sign, sign)
        index = rows.reshape([1, n]).expand([a.shape[0], n])
        pk = pivot.reshape([-1, 1])
        perm = bn.where(index == k, pk, bn.where(index == pk, Tensor.full_like(index, k), index))
        a = a.gather(1, perm.unsqueeze(-1).expand([a.shape[0], n, n]))
        diag = a[:, k, k].reshape([-1])
        result = result * diag
        safe = bn.where(diag == 0, diag.ones_like(), diag)
        factors = a[:, :, k] / safe.reshape([-1, 1])
        factors = bn.where(rows.reshape([1, n]) > k, factors, factors.zeros_like())
        a = a - factors.unsqueeze(-1) * a[:, k:k + 1, :]
    return (result * sign).reshape(batch)
