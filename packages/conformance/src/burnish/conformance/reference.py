"""Naive float64 NumPy references for the module ops, written from PyTorch's formulas, and the
exact integer product that 8-bit kernels compute."""

from __future__ import annotations

import itertools
import math

import numpy as np

Dims = tuple[int, ...]


# -- convolutions ---------------------------------------------------------------------------------


def conv(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride: Dims,
         padding: Dims, dilation: Dims, groups: int) -> np.ndarray:
    """Cross-correlation over N spatial dims (PyTorch's ``convNd``), one kernel tap at a time."""
    x = np.asarray(x, np.float64)
    weight = np.asarray(weight, np.float64)
    batch, channels, *size = x.shape
    out_channels, group_channels, *kernel = weight.shape
    spatial = len(size)
    out = [(size[d] + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1
           for d in range(spatial)]
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    grouped = weight.reshape(groups, out_channels // groups, group_channels, *kernel)
    result = np.zeros((batch, groups, out_channels // groups, *out))
    for tap in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(tap[d] * dilation[d], tap[d] * dilation[d]
                             + stride[d] * (out[d] - 1) + 1, stride[d]) for d in range(spatial))
        patch = padded[(slice(None), slice(None)) + window]
        patch = patch.reshape(batch, groups, group_channels, *out)
        taps = grouped[(slice(None), slice(None), slice(None)) + tap]
        result += np.einsum("bgc...,goc->bgo...", patch, taps)
    result = result.reshape(batch, out_channels, *out)
    if bias is not None:
        result += np.asarray(bias, np.float64).reshape((1, -1) + (1,) * spatial)
    return result


def conv_transpose(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride: Dims,
                   padding: Dims, output_padding: Dims, dilation: Dims,
                   groups: int) -> np.ndarray:
    """Transposed convolution (PyTorch's ``conv_transposeNd``): every input element scatters
    ``weight`` times itself into the output, which is then cropped by ``padding``."""
    x = np.asarray(x, np.float64)
    weight = np.asarray(weight, np.float64)
    batch, channels, *size = x.shape
    _, group_out, *kernel = weight.shape
    spatial = len(size)
    full = [(size[d] - 1) * stride[d] + dilation[d] * (kernel[d] - 1) + 1 + output_padding[d]
            for d in range(spatial)]
    out = [(size[d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel[d] - 1)
           + output_padding[d] + 1 for d in range(spatial)]
    buffer = np.zeros((batch, groups, group_out, *full))
    grouped_x = x.reshape(batch, groups, channels // groups, *size)
    grouped_w = weight.reshape(groups, channels // groups, group_out, *kernel)
    for tap in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(tap[d] * dilation[d], tap[d] * dilation[d]
                             + stride[d] * (size[d] - 1) + 1, stride[d]) for d in range(spatial))
        taps = grouped_w[(slice(None), slice(None), slice(None)) + tap]
        buffer[(slice(None),) * 3 + window] += np.einsum("bgc...,gco->bgo...", grouped_x, taps)
    crop = tuple(slice(padding[d], padding[d] + out[d]) for d in range(spatial))
    result = buffer[(slice(None),) * 3 + crop].reshape(batch, groups * group_out, *out)
    if bias is not None:
        result = result + np.asarray(bias, np.float64).reshape((1, -1) + (1,) * spatial)
    return result


def unfold(x: np.ndarray, kernel: Dims, stride: Dims, padding: Dims,
           dilation: Dims) -> np.ndarray:
    """PyTorch's ``F.unfold``: ``[batch, channels * kh * kw, blocks]``, channel-major rows."""
    x = np.asarray(x, np.float64)
    batch, channels, height, width = x.shape
    out = [(n + 2 * p - d * (k - 1) - 1) // s + 1
           for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation)]
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    rows = []
    for c in range(channels):
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                top, left = i * dilation[0], j * dilation[1]
                block = padded[:, c, top:top + stride[0] * (out[0] - 1) + 1:stride[0],
                               left:left + stride[1] * (out[1] - 1) + 1:stride[1]]
                rows.append(block.reshape(batch, -1))
    return np.stack(rows, axis=1)


# -- pools ----------------------------------------------------------------------------------------


def pool_output(size: int, kernel: int, stride: int, padding: int, dilation: int,
                ceil_mode: bool) -> int:
    """PyTorch's ``pooling_output_shape``: the last window must start inside the input or the
    left padding."""
    room = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (room + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def avg_pool(x: np.ndarray, kernel: Dims, stride: Dims, padding: Dims, count_include_pad: bool,
             ceil_mode: bool) -> np.ndarray:
    """PyTorch's ``avg_poolNd``: windows are clipped to the padded input for the divisor with
    padding, and to the input itself without."""
    x = np.asarray(x, np.float64)
    size = x.shape[2:]
    spatial = len(size)
    out = [pool_output(size[d], kernel[d], stride[d], padding[d], 1, ceil_mode)
           for d in range(spatial)]
    result = np.zeros(x.shape[:2] + tuple(out))
    for position in itertools.product(*(range(n) for n in out)):
        window, padded_count, real_count = [], 1, 1
        for d, o in enumerate(position):
            start = o * stride[d] - padding[d]
            end = min(start + kernel[d], size[d] + padding[d])
            padded_count *= end - start
            start, end = max(start, 0), min(end, size[d])
            real_count *= end - start
            window.append(slice(start, end))
        total = x[(slice(None), slice(None)) + tuple(window)].sum(axis=tuple(range(2, 2 + spatial)))
        result[(slice(None), slice(None)) + position] = total / (
            padded_count if count_include_pad else real_count)
    return result


def max_pool_with_indices(x: np.ndarray, kernel: Dims, stride: Dims, padding: Dims,
                          dilation: Dims, ceil_mode: bool) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's ``max_poolNd(return_indices=True)``: padding never wins, the first max does,
    indices are flattened over the input's spatial dims."""
    x = np.asarray(x, np.float64)
    size = x.shape[2:]
    spatial = len(size)
    out = [pool_output(size[d], kernel[d], stride[d], padding[d], dilation[d], ceil_mode)
           for d in range(spatial)]
    flat = x.reshape(x.shape[:2] + (-1,))
    values = np.zeros(x.shape[:2] + tuple(out))
    indices = np.zeros(x.shape[:2] + tuple(out), dtype=np.int64)
    for position in itertools.product(*(range(n) for n in out)):
        axes = []
        for d, o in enumerate(position):
            taps = o * stride[d] - padding[d] + dilation[d] * np.arange(kernel[d])
            axes.append(taps[(taps >= 0) & (taps < size[d])])
        grid = np.meshgrid(*axes, indexing="ij")
        candidates = np.ravel_multi_index(tuple(g.ravel() for g in grid), size)
        window = flat[:, :, candidates]
        best = _first_max(window)
        where = (slice(None), slice(None)) + position
        values[where] = np.take_along_axis(window, best[..., None], axis=2)[..., 0]
        indices[where] = candidates[best]
    return values, indices


def adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """``[floor(i * size / out), ceil((i + 1) * size / out))`` for each output index ``i``."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def adaptive_avg_pool(x: np.ndarray, output_size: Dims) -> np.ndarray:
    """Mean over the adaptive windows of each spatial dim."""
    x = np.asarray(x, np.float64)
    spatial = len(output_size)
    windows = [adaptive_windows(n, o) for n, o in zip(x.shape[2:], output_size)]
    result = np.zeros(x.shape[:2] + tuple(output_size))
    for position in itertools.product(*(range(n) for n in output_size)):
        region = tuple(slice(*windows[d][o]) for d, o in enumerate(position))
        block = x[(slice(None), slice(None)) + region]
        result[(slice(None), slice(None)) + position] = block.mean(
            axis=tuple(range(2, 2 + spatial)))
    return result


def adaptive_max_pool_with_indices(x: np.ndarray, output_size: Dims
                                   ) -> tuple[np.ndarray, np.ndarray]:
    """Max over the adaptive windows and the flattened spatial index of the first max."""
    x = np.asarray(x, np.float64)
    size = x.shape[2:]
    windows = [adaptive_windows(n, o) for n, o in zip(size, output_size)]
    flat = x.reshape(x.shape[:2] + (-1,))
    values = np.zeros(x.shape[:2] + tuple(output_size))
    indices = np.zeros(x.shape[:2] + tuple(output_size), dtype=np.int64)
    for position in itertools.product(*(range(n) for n in output_size)):
        axes = [np.arange(*windows[d][o]) for d, o in enumerate(position)]
        grid = np.meshgrid(*axes, indexing="ij")
        candidates = np.ravel_multi_index(tuple(g.ravel() for g in grid), size)
        window = flat[:, :, candidates]
        best = _first_max(window)
        where = (slice(None), slice(None)) + position
        values[where] = np.take_along_axis(window, best[..., None], axis=2)[..., 0]
        indices[where] = candidates[best]
    return values, indices


def _first_max(window: np.ndarray) -> np.ndarray:
    # np.argmax returns the first maximum and treats NaN as the largest value.
    return np.argmax(window, axis=-1)


# -- interpolation --------------------------------------------------------------------------------


def interpolate(x: np.ndarray, size: Dims, mode: str, align_corners: bool) -> np.ndarray:
    """PyTorch's ``F.interpolate`` over ``[batch, channels, height, width]`` with ``size`` given
    (so scales are ``in / out``): nearest (legacy), bilinear or bicubic (A = -0.75)."""
    x = np.asarray(x, np.float64)
    for axis, out in zip((2, 3), size):
        matrix = _resize_matrix(x.shape[axis], out, mode, align_corners)
        x = np.moveaxis(np.tensordot(x, matrix, axes=([axis], [1])), -1, axis)
    return x


def _resize_matrix(size: int, out: int, mode: str, align_corners: bool) -> np.ndarray:
    """The ``[out, size]`` matrix that resizes one axis; interpolation is separable."""
    matrix = np.zeros((out, size))
    for o in range(out):
        if mode == "nearest":
            matrix[o, min(o * size // out, size - 1)] = 1.0
            continue
        source = _source_index(o, size, out, align_corners, cubic=mode == "bicubic")
        base = math.floor(source)
        t = source - base
        if mode == "bilinear":
            low = min(base, size - 1)
            high = min(base + 1, size - 1)
            matrix[o, low] += 1.0 - t
            matrix[o, high] += t
        else:
            weights = _cubic_weights(t)
            for k, w in zip(range(base - 1, base + 3), weights):
                matrix[o, min(max(k, 0), size - 1)] += w
    return matrix


def _source_index(o: int, size: int, out: int, align_corners: bool, cubic: bool) -> float:
    if align_corners:
        return o * (size - 1) / (out - 1) if out > 1 else 0.0
    source = (o + 0.5) * size / out - 0.5
    return source if cubic or source >= 0 else 0.0


def _cubic_weights(t: float, a: float = -0.75) -> tuple[float, float, float, float]:
    def near(d: float) -> float:  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: float) -> float:  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return far(t + 1), near(t), near(1 - t), far(2 - t)


# -- activations ----------------------------------------------------------------------------------


def erf(x: np.ndarray) -> np.ndarray:
    """The error function in float64, element by element (NumPy has none)."""
    x = np.asarray(x, np.float64)
    return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x.copy()


def gelu(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x * (1.0 + erf(x / math.sqrt(2.0))) / 2.0


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(log_sigmoid(x))


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    x = np.asarray(x, np.float64)
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    x = np.asarray(x, np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


# -- quantized products ----------------------------------------------------------------------------


def quantized_product(qx, qw) -> np.ndarray:
    """``qx @ qw`` of two quantized tensors as an integer kernel computes it: NumPy's exact
    int64 sums of the centred integers (``q - zero_point``), which must fit int32, scaled once,
    ``float32(sum) * (sx * sw)``, with ``qx``'s scales per tensor or per row and ``qw``'s per
    tensor or per column."""
    def centred(q, axis: int) -> np.ndarray:
        ints = q.int_values().to_numpy().astype(np.int64)
        if q.zero_points is None:
            return ints - q.scheme.symmetric_zero
        return ints - _along(q, q.zero_points.to_numpy().astype(np.int64), axis)

    def scales(q, axis: int) -> np.ndarray:
        return _along(q, q.scales.to_numpy().astype(np.float32), axis)

    sums = centred(qx, qx.ndim - 2) @ centred(qw, 1)
    if sums.size and np.abs(sums).max() >= 2 ** 31:
        raise ValueError("quantized_product: the integer sums pass int32's range")
    return sums.astype(np.int32).astype(np.float32) * (scales(qx, qx.ndim - 2) * scales(qw, 1))


def _along(q, values: np.ndarray, axis: int) -> np.ndarray:
    """A quantized tensor's per-channel parameters shaped to broadcast along ``axis``."""
    from burnish.quantization import PerChannel

    if not isinstance(q.scheme.granularity, PerChannel):
        return values
    shape = [1] * q.ndim
    shape[axis] = -1
    return values.reshape(shape)
