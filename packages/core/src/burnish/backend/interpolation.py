"""Where each output element of ``interpolate`` reads from: PyTorch's source indices and weights.

Resizing is separable: along one dim, output ``i`` is a weighted sum of a few input elements
(1 tap for nearest, 2 for bilinear, 4 for bicubic). These functions compute those indices and
weights on the host, as PyTorch computes them (float32, or float64 for float64 images; nearest
always in float32), so every backend and every backward rule that uses them picks the same taps.
"""

from __future__ import annotations

import numpy as np

#: The bicubic kernel's parameter (Keys' a, as PyTorch and OpenCV use).
CUBIC_A = -0.75


def taps(mode: str, size: int, out: int, align_corners: bool, opmath: np.dtype
         ) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (indices, weights) pairs of ``mode`` along one dim of ``size`` resized to ``out``."""
    if mode == "nearest":
        return [(nearest_indices(size, out), np.ones(out, dtype=opmath))]
    if mode == "bilinear":
        return linear_taps(size, out, align_corners, opmath)
    if mode == "bicubic":
        return cubic_taps(size, out, align_corners, opmath)
    raise ValueError(f"interpolate: unknown mode {mode!r}")


def nearest_indices(size: int, out: int) -> np.ndarray:
    """PyTorch's legacy nearest: ``min(floor(i * scale), size - 1)`` with ``scale = size / out``
    and the product both float32, as PyTorch computes them for float32 images. This differs
    from the exact ``i * size // out`` for some sizes, where ``i * size / out`` is an integer
    that float32 rounds to just below it."""
    scale = np.float32(size) / np.float32(out)
    source = np.arange(out, dtype=np.float32) * scale
    return np.minimum(np.floor(source).astype(np.int64), size - 1)


def _source(size: int, out: int, align_corners: bool, opmath: np.dtype, cubic: bool
            ) -> np.ndarray:
    """PyTorch's ``area_pixel_compute_source_index`` for every output index, in ``opmath``."""
    dst = np.arange(out, dtype=opmath)
    if align_corners:
        scale = opmath.type(size - 1) / opmath.type(out - 1) if out > 1 else opmath.type(0)
        return dst * scale
    scale = opmath.type(size) / opmath.type(out)
    half = opmath.type(0.5)
    src = scale * (dst + half) - half
    return src if cubic else np.maximum(src, opmath.type(0))


def _guard(src: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's ``guard_index_and_lambda``: the integer part (at most ``size - 1``) and the
    fraction clamped to [0, 1]."""
    index = np.minimum(np.floor(src).astype(np.int64), size - 1)
    fraction = np.clip(src - index.astype(src.dtype), 0, 1)
    return index, fraction


def linear_taps(size: int, out: int, align_corners: bool, opmath: np.dtype
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """The two (indices, weights) pairs of linear interpolation along one dim."""
    index, fraction = _guard(_source(size, out, align_corners, opmath, False), size)
    upper = np.minimum(index + 1, size - 1)
    return [(index, 1 - fraction), (upper, fraction)]


def cubic_taps(size: int, out: int, align_corners: bool, opmath: np.dtype
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    """The four (indices, weights) pairs of cubic convolution (a = -0.75) along one dim; taps
    beyond the border read the border element."""
    index, t = _guard(_source(size, out, align_corners, opmath, True), size)
    a = opmath.type(CUBIC_A)
    weights = [_cubic_far(t + 1, a), _cubic_near(t, a), _cubic_near(1 - t, a),
               _cubic_far(2 - t, a)]
    return [(np.clip(index - 1 + j, 0, size - 1), w) for j, w in enumerate(weights)]


def _cubic_near(x: np.ndarray, a: np.floating) -> np.ndarray:
    """The cubic kernel on [0, 1]: ``((a + 2) x - (a + 3)) x^2 + 1``."""
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _cubic_far(x: np.ndarray, a: np.floating) -> np.ndarray:
    """The cubic kernel on [1, 2]: ``((a x - 5a) x + 8a) x - 4a``."""
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
