"""Average, max and adaptive pools over 1, 2 or 3 spatial dims, with PyTorch's semantics."""

from __future__ import annotations

import math

import numpy as np

from burnish.ndarray.dtypes import BFLOAT16, FLOAT32, INT64, quiet, widen
from burnish.ndarray.windows import Dims, output_size, pad, tap


class PoolOps:
    """Pools. A window is visited one kernel tap at a time: each tap is a strided view of every
    window's element at that offset, so the work is a few whole-array ufuncs per tap."""

    @quiet
    def avg_pool(self, x: np.ndarray, kernel: Dims, stride: Dims, padding: Dims,
                 count_include_pad: bool, ceil_mode: bool) -> np.ndarray:
        dtype = x.dtype
        acc = widen(x)
        in_size = x.shape[2:]
        out_size = _out_sizes(in_size, kernel, stride, padding, (1,) * len(kernel), ceil_mode)
        acc = pad(acc, _widths(in_size, kernel, stride, padding, (1,) * len(kernel), out_size))
        divisor = np.ones((), FLOAT32 if acc.dtype == FLOAT32 else acc.dtype)
        spatial = len(kernel)
        # The window sum is separable: sum along one dim at a time.
        for d, (n, k, s, p, o) in enumerate(zip(in_size, kernel, stride, padding, out_size)):
            axis = 2 + d
            total = None
            for t in range(k):
                part = acc[(slice(None),) * axis + (slice(t, t + (o - 1) * s + 1, s),)]
                total = part.copy() if total is None else np.add(total, part, out=total)
            acc = total
            # PyTorch: a window's size counts padding but not the ceil_mode overhang beyond it;
            # without count_include_pad only the input's own elements count.
            starts = np.arange(o) * s - p
            ends = np.minimum(starts + k, n + p)
            if not count_include_pad:
                starts, ends = np.maximum(starts, 0), np.minimum(ends, n)
            shape = [1] * spatial
            shape[d] = o
            divisor = divisor * (ends - starts).reshape(shape).astype(divisor.dtype)
        acc /= divisor
        return acc.astype(dtype, copy=False)

    @quiet
    def max_pool(self, x: np.ndarray, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
                 ceil_mode: bool) -> np.ndarray:
        work = _exact(x)
        out_size = _out_sizes(x.shape[2:], kernel, stride, padding, dilation, ceil_mode)
        padded = pad(work, _widths(x.shape[2:], kernel, stride, padding, dilation, out_size),
                     -np.inf)
        best = None
        for k in np.ndindex(*kernel):
            view = tap(padded, _offset(k, dilation), stride, out_size)
            # np.maximum keeps NaN, so a NaN anywhere in a window wins, as in PyTorch.
            best = view.copy() if best is None else np.maximum(best, view, out=best)
        return best.astype(x.dtype, copy=False)  # type: ignore[union-attr]  # >= 1 tap

    @quiet
    def max_pool_with_indices(self, x: np.ndarray, kernel: Dims, stride: Dims, padding: Dims,
                              dilation: Dims, ceil_mode: bool) -> tuple[np.ndarray, np.ndarray]:
        work = _exact(x)
        in_size = x.shape[2:]
        out_size = _out_sizes(in_size, kernel, stride, padding, dilation, ceil_mode)
        padded = pad(work, _widths(in_size, kernel, stride, padding, dilation, out_size),
                     -np.inf)
        in_strides = _flat_strides(in_size)
        taps = list(np.ndindex(*kernel))
        # The winning tap of each window, as a small int; turned into flat indices at the end.
        winner_dtype = np.int16 if len(taps) < 1 << 15 else INT64
        # Start as PyTorch does: value -inf at the window's first element inside the input, so
        # a window of -inf (or one whose only larger values are padding) points into the input.
        first = [np.maximum(0, -(-(p - np.arange(o) * s) // d)) for o, s, p, d in
                 zip(out_size, stride, padding, dilation)]
        shape = x.shape[:2] + out_size
        best = np.full(shape, -np.inf, work.dtype)
        winner = np.empty(shape, winner_dtype)
        winner[...] = _outer_sum([f * k for f, k in zip(first, _flat_strides(kernel))])
        has_nan = bool(np.isnan(work).any())
        change = np.empty(shape, winner_dtype)
        for number, k in enumerate(taps):
            view = tap(padded, _offset(k, dilation), stride, out_size)
            # Strictly greater, in row-major kernel order: the first max wins ties. A NaN
            # always takes over, so the last NaN of a window wins (PyTorch's rule).
            take = view > best
            if has_nan:
                take |= np.isnan(view)
            # Branch-free updates: a masked copy with a data-dependent mask costs ten times
            # as much as these passes (np.maximum keeps NaN, as the values must).
            np.maximum(best, view, out=best)
            np.subtract(number, winner, out=change)
            change *= take
            winner += change
        # Flat input index = the window's start + the winning tap's offset.
        start = _outer_sum([(np.arange(o) * s - p) * st for o, s, p, st in
                            zip(out_size, stride, padding, in_strides)])
        tap_offset = np.array([sum(t * d * st for t, d, st in zip(k, dilation, in_strides))
                               for k in taps], INT64)
        index = np.add(start, tap_offset[winner], dtype=INT64)
        return best.astype(x.dtype, copy=False), index

    @quiet
    def adaptive_avg_pool(self, x: np.ndarray, output_size: Dims) -> np.ndarray:
        dtype = x.dtype
        acc = widen(x)
        for d, o in enumerate(output_size):
            axis = 2 + d
            n = acc.shape[axis]
            if n % o == 0:
                # Equal windows: a reshape and one mean.
                shape = acc.shape[:axis] + (o, n // o) + acc.shape[axis + 1:]
                acc = acc.reshape(shape).mean(axis=axis + 1)
                continue
            out = np.empty(acc.shape[:axis] + (o,) + acc.shape[axis + 1:], acc.dtype)
            for i, (start, end) in enumerate(_adaptive_windows(n, o)):
                index = (slice(None),) * axis
                out[index + (i,)] = acc[index + (slice(start, end),)].mean(axis=axis)
            acc = out
        return acc.astype(dtype, copy=False)

    @quiet
    def adaptive_max_pool(self, x: np.ndarray, output_size: Dims) -> np.ndarray:
        work = _exact(x)
        for d, o in enumerate(output_size):
            axis = 2 + d
            n = work.shape[axis]
            out = np.empty(work.shape[:axis] + (o,) + work.shape[axis + 1:], work.dtype)
            for i, (start, end) in enumerate(_adaptive_windows(n, o)):
                index = (slice(None),) * axis
                # np.max keeps NaN.
                out[index + (i,)] = work[index + (slice(start, end),)].max(axis=axis)
            work = out
        return work.astype(x.dtype, copy=False)

    @quiet
    def adaptive_max_pool_with_indices(self, x: np.ndarray, output_size: Dims
                                       ) -> tuple[np.ndarray, np.ndarray]:
        in_size = x.shape[2:]
        if all(n % o == 0 for n, o in zip(in_size, output_size)):
            kernel = tuple(n // o for n, o in zip(in_size, output_size))
            spatial = len(kernel)
            return self.max_pool_with_indices(x, kernel, kernel, (0,) * spatial,
                                              (1,) * spatial, False)
        # Separable, last dim first: the first max of each row, then the first row holding the
        # window's max, is the first max in row-major order. Likewise for the last NaN.
        values = _exact(x)
        has_nan = bool(np.isnan(values).any())
        coords: list[np.ndarray] = []  # source coordinates of the dims already reduced
        for d in reversed(range(len(output_size))):
            axis = 2 + d
            o = output_size[d]
            shape = values.shape[:axis] + (o,) + values.shape[axis + 1:]
            new_values = np.empty(shape, values.dtype)
            new_coords = [np.empty(shape, INT64) for _ in range(len(coords) + 1)]
            index = (slice(None),) * axis
            for i, (start, end) in enumerate(_adaptive_windows(values.shape[axis], o)):
                window = index + (slice(start, end),)
                at = _argmax(values[window], axis, has_nan)
                new_values[index + (slice(i, i + 1),)] = np.take_along_axis(
                    values[window], at, axis)
                new_coords[0][index + (slice(i, i + 1),)] = at + start
                for carried, new in zip(coords, new_coords[1:]):
                    new[index + (slice(i, i + 1),)] = np.take_along_axis(carried[window], at,
                                                                         axis)
            values, coords = new_values, new_coords
        strides = _flat_strides(in_size)
        flat = sum(c * s for c, s in zip(coords, strides))
        return values.astype(x.dtype, copy=False), flat.astype(INT64, copy=False)


def _argmax(x: np.ndarray, axis: int, has_nan: bool) -> np.ndarray:
    """The index of the first max along ``axis`` (kept), or of the last NaN where there is one,
    which is where PyTorch's ``val > max || isnan(val)`` scan ends."""
    at = np.argmax(x, axis=axis, keepdims=True)
    if has_nan:
        nan = np.isnan(x)
        last = x.shape[axis] - 1 - np.argmax(np.flip(nan, axis), axis=axis, keepdims=True)
        at = np.where(nan.any(axis=axis, keepdims=True), last, at)
    return at


def _exact(x: np.ndarray) -> np.ndarray:
    """Max needs no wider accumulator; bfloat16 still goes through float32 (exact) for NumPy's
    fast comparisons."""
    return x.astype(FLOAT32) if x.dtype == BFLOAT16 else x


def _out_sizes(in_size: Dims, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
               ceil_mode: bool) -> Dims:
    return tuple(output_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in
                 zip(in_size, kernel, stride, padding, dilation))


def _widths(in_size: Dims, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
            out_size: Dims) -> list[tuple[int, int]]:
    """Padding per dim: ``padding`` before, and after enough to hold ceil_mode's last window."""
    widths = []
    for n, k, s, p, d, o in zip(in_size, kernel, stride, padding, dilation, out_size):
        needed = (o - 1) * s + d * (k - 1) + 1
        widths.append((p, max(p, needed - n - p)))
    return widths


def _offset(k: tuple[int, ...], dilation: Dims) -> Dims:
    return tuple(t * d for t, d in zip(k, dilation))


def _flat_strides(size: Dims) -> list[int]:
    """Row-major strides, in elements, of an array of ``size``."""
    return [math.prod(size[d + 1:]) for d in range(len(size))]


def _outer_sum(parts: list[np.ndarray]) -> np.ndarray:
    """``parts[0][i] + parts[1][j] + ...`` as an array of shape ``(len(parts[0]), ...)``."""
    total = np.zeros((1,) * len(parts), INT64)
    for d, part in enumerate(parts):
        shape = [1] * len(parts)
        shape[d] = len(part)
        total = total + np.asarray(part, INT64).reshape(shape)
    return total


def _adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive windows: ``[floor(i * size / out), ceil((i + 1) * size / out))``."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]
