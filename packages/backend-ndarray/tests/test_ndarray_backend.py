"""The ndarray backend called directly, on its tricky parts, against naive NumPy references."""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import pytest

from burnish.distribution import Distribution
from burnish.dtype import (
    ALL_DTYPES,
    STANDARD_DTYPES,
    bfloat16,
    bool_,
    float16,
    float32,
    float64,
    int64,
)
from burnish.ndarray.backend import NdArrayBackend
from burnish.tensor_data import TensorData


@pytest.fixture(scope="module")
def b() -> NdArrayBackend:
    return NdArrayBackend()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# -- naive references ---------------------------------------------------------------------------


def source(pos, k, stride, padding, dilation):
    """The input position that kernel tap ``k`` of the window at ``pos`` reads."""
    return [q * s - p + t * d for q, s, p, t, d in zip(pos, stride, padding, k, dilation)]


def naive_conv(x, w, bias, stride, padding, dilation, groups):
    """Cross-correlation by the definition, one output element at a time."""
    batch, channels, *size = x.shape
    out_channels, per_group, *kernel = w.shape
    out_size = [(n + 2 * p - d * (k - 1) - 1) // s + 1
                for n, k, s, p, d in zip(size, kernel, stride, padding, dilation)]
    out = np.zeros([batch, out_channels, *out_size])
    per_out = out_channels // groups
    for n, o in itertools.product(range(batch), range(out_channels)):
        g = o // per_out
        for pos in itertools.product(*map(range, out_size)):
            total = 0.0 if bias is None else bias[o]
            for c, k in itertools.product(range(per_group), itertools.product(*map(range, kernel))):
                src = source(pos, k, stride, padding, dilation)
                if all(0 <= i < m for i, m in zip(src, size)):
                    total += x[(n, g * per_group + c, *src)] * w[(o, c, *k)]
            out[(n, o, *pos)] = total
    return out


def naive_conv_transpose(x, w, bias, stride, padding, output_padding, dilation, groups):
    """Transposed convolution by the definition: every input element scatters a weighted
    kernel into the output."""
    batch, channels, *size = x.shape
    _, per_out, *kernel = w.shape
    out_channels = per_out * groups
    per_group = channels // groups
    out_size = [(n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, s, p, d, k, op in
                zip(size, stride, padding, dilation, kernel, output_padding)]
    out = np.zeros([batch, out_channels, *out_size])
    for n, c in itertools.product(range(batch), range(channels)):
        g = c // per_group
        for pos in itertools.product(*map(range, size)):
            for o, k in itertools.product(range(per_out), itertools.product(*map(range, kernel))):
                dst = source(pos, k, stride, padding, dilation)
                if all(0 <= i < m for i, m in zip(dst, out_size)):
                    out[(n, g * per_out + o, *dst)] += x[(n, c, *pos)] * w[(c, o, *k)]
    if bias is not None:
        out += bias.reshape([-1] + [1] * len(size))
    return out


def pool_output(size, kernel, stride, padding, dilation, ceil_mode):
    span = dilation * (kernel - 1) + 1
    room = size + 2 * padding - span
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def naive_max_pool(x, kernel, stride, padding, dilation, ceil_mode):
    """PyTorch's CPU loop: scan the window's in-bounds elements in row-major order and take
    ``val > max or isnan(val)``."""
    batch, channels, *size = x.shape
    out_size = [pool_output(n, k, s, p, d, ceil_mode)
                for n, k, s, p, d in zip(size, kernel, stride, padding, dilation)]
    values = np.zeros([batch, channels, *out_size])
    indices = np.zeros([batch, channels, *out_size], np.int64)
    for n, c in itertools.product(range(batch), range(channels)):
        for pos in itertools.product(*map(range, out_size)):
            best, where = -np.inf, None
            for k in itertools.product(*map(range, kernel)):
                src = source(pos, k, stride, padding, dilation)
                if not all(0 <= i < m for i, m in zip(src, size)):
                    continue
                flat = int(np.ravel_multi_index(src, size))
                where = flat if where is None else where
                value = x[(n, c, *src)]
                if value > best or np.isnan(value):
                    best, where = value, flat
            values[(n, c, *pos)], indices[(n, c, *pos)] = best, where
    return values, indices


def naive_avg_pool(x, kernel, stride, padding, count_include_pad, ceil_mode):
    batch, channels, *size = x.shape
    out_size = [pool_output(n, k, s, p, 1, ceil_mode)
                for n, k, s, p in zip(size, kernel, stride, padding)]
    out = np.zeros([batch, channels, *out_size])
    for pos in itertools.product(*map(range, out_size)):
        starts = [q * s - p for q, s, p in zip(pos, stride, padding)]
        ends = [min(a + k, n + p) for a, k, n, p in zip(starts, kernel, size, padding)]
        count = math.prod(e - a for a, e in zip(starts, ends))
        lo = [max(a, 0) for a in starts]
        hi = [min(e, n) for e, n in zip(ends, size)]
        if not count_include_pad:
            count = math.prod(e - a for a, e in zip(lo, hi))
        window = x[(slice(None), slice(None)) + tuple(slice(a, e) for a, e in zip(lo, hi))]
        out[(slice(None), slice(None), *pos)] = window.sum(axis=tuple(range(2, x.ndim))) / count
    return out


def adaptive_windows(size, out):
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


# -- erf ----------------------------------------------------------------------------------------


def test_erf_float64_matches_math_erf(b):
    xs = np.concatenate([
        np.linspace(-7.0, 7.0, 400_001),
        np.geomspace(1e-310, 8.0, 20_001),
        -np.geomspace(1e-310, 8.0, 20_001),
        # fdlibm's region boundaries, on both sides
        np.nextafter([0.84375, 1.25, 2.857142925262451, 6.0, 2.0**-28], 0.0),
        [0.84375, 1.25, 2.857142925262451, 6.0, 2.0**-28],
    ])
    got = b.erf(xs)
    expected = np.array([math.erf(v) for v in xs])
    relative = np.abs(got - expected) / np.maximum(np.abs(expected), np.finfo(float).tiny)
    assert relative.max() <= 4e-16
    assert got.dtype == np.float64


def test_erf_special_values(b):
    got = b.erf(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 30.0, -30.0]))
    assert np.array_equal(got, [0.0, -0.0, 1.0, -1.0, np.nan, 1.0, -1.0], equal_nan=True)
    assert np.signbit(got[1])


@pytest.mark.parametrize("dtype", [float32, float16, bfloat16], ids=str)
def test_erf_narrow_floats_keep_dtype(b, dtype):
    xs = np.linspace(-4, 4, 1001).astype(dtype.numpy)
    got = b.erf(xs)
    assert got.dtype == dtype.numpy
    expected = np.array([math.erf(v) for v in xs.astype(np.float64)]).astype(dtype.numpy)
    # Computed in float64 and rounded once: exactly the correctly rounded value.
    assert np.array_equal(got, expected)


def test_gelu_is_exact_gelu(b):
    xs = np.linspace(-6, 6, 2001)
    expected = np.array([v * (1 + math.erf(v / math.sqrt(2))) / 2 for v in xs])
    # 1 + erf cancels for negative x: an ulp of erf is all the absolute error there is.
    np.testing.assert_allclose(b.gelu(xs, float64), expected, rtol=1e-14, atol=1e-15)


# -- convolutions -------------------------------------------------------------------------------

CONV_CASES = [
    # spatial size, kernel, stride, padding, dilation, groups, in, out
    ((7,), (3,), (1,), (0,), (1,), 1, 2, 3),
    ((9,), (3,), (2,), (2,), (2,), 2, 4, 6),
    ((6, 5), (3, 2), (1, 1), (1, 0), (1, 1), 1, 3, 4),
    ((7, 8), (3, 3), (2, 3), (1, 2), (2, 1), 3, 6, 3),
    ((6, 6), (3, 3), (1, 2), (1, 1), (1, 1), 4, 4, 8),  # depthwise, channel multiplier 2
    ((4, 5, 4), (2, 3, 2), (1, 2, 1), (1, 1, 0), (1, 1, 2), 2, 4, 2),
]


@pytest.mark.parametrize("size, kernel, stride, padding, dilation, groups, cin, cout", CONV_CASES)
def test_conv_matches_naive_loop(b, rng, size, kernel, stride, padding, dilation, groups, cin,
                                 cout):
    x = rng.standard_normal((2, cin, *size))
    w = rng.standard_normal((cout, cin // groups, *kernel))
    bias = rng.standard_normal(cout)
    got = b.conv(x, w, bias, stride, padding, dilation, groups)
    expected = naive_conv(x, w, bias, stride, padding, dilation, groups)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    no_bias = b.conv(x, w, None, stride, padding, dilation, groups)
    np.testing.assert_allclose(no_bias, naive_conv(x, w, None, stride, padding, dilation, groups),
                               rtol=1e-12, atol=1e-12)


def test_convolutions_in_chunks_match_one_gemm(b, rng, monkeypatch):
    import burnish.ndarray.conv as conv_module

    x = rng.standard_normal((5, 4, 6, 6))
    w = rng.standard_normal((4, 2, 3, 3))
    whole = b.conv(x, w, None, (1, 1), (1, 1), (1, 1), 2)
    whole_transposed = b.conv_transpose(x, w, None, (2, 2), (1, 1), (1, 1), (1, 1), 2)
    monkeypatch.setattr(conv_module, "COLUMN_LIMIT", 1)  # one image per GEMM
    np.testing.assert_allclose(b.conv(x, w, None, (1, 1), (1, 1), (1, 1), 2), whole,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.conv_transpose(x, w, None, (2, 2), (1, 1), (1, 1), (1, 1), 2),
                               whole_transposed, rtol=1e-12, atol=1e-12)


TRANSPOSE_CASES = [
    # spatial size, kernel, stride, padding, output_padding, dilation, groups, in, out
    ((5,), (3,), (1,), (0,), (0,), (1,), 1, 2, 3),
    ((4,), (3,), (2,), (1,), (1,), (1,), 2, 4, 2),
    ((4, 3), (3, 2), (2, 3), (1, 0), (1, 2), (1, 1), 1, 3, 2),
    ((3, 4), (2, 3), (2, 1), (0, 1), (0, 1), (2, 2), 3, 3, 6),  # depthwise
    ((3, 3), (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 2, 4, 4),
    ((3, 2, 3), (2, 2, 3), (2, 1, 2), (0, 0, 1), (1, 0, 0), (1, 2, 1), 2, 2, 4),
]


@pytest.mark.parametrize("size, kernel, stride, padding, output_padding, dilation, groups, cin, "
                         "cout", TRANSPOSE_CASES)
def test_conv_transpose_matches_naive_loop(b, rng, size, kernel, stride, padding,
                                           output_padding, dilation, groups, cin, cout):
    x = rng.standard_normal((2, cin, *size))
    w = rng.standard_normal((cin, cout // groups, *kernel))
    bias = rng.standard_normal(cout)
    got = b.conv_transpose(x, w, bias, stride, padding, output_padding, dilation, groups)
    expected = naive_conv_transpose(x, w, bias, stride, padding, output_padding, dilation, groups)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [float32, float16, bfloat16], ids=str)
def test_conv_keeps_narrow_dtypes(b, rng, dtype):
    x = rng.standard_normal((2, 4, 5, 5)).astype(dtype.numpy)
    w = rng.standard_normal((2, 2, 3, 3)).astype(dtype.numpy)
    got = b.conv(x, w, None, (1, 1), (1, 1), (1, 1), 2)
    assert got.dtype == dtype.numpy
    expected = naive_conv(x.astype(np.float64), w.astype(np.float64), None, (1, 1), (1, 1),
                          (1, 1), 2)
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=2e-2, atol=5e-2)
    wt = rng.standard_normal((4, 3, 2, 2)).astype(dtype.numpy)
    t = b.conv_transpose(x, wt, None, (2, 2), (0, 0), (1, 1), (1, 1), 1)
    assert t.dtype == dtype.numpy
    expected = naive_conv_transpose(x.astype(np.float64), wt.astype(np.float64), None, (2, 2),
                                    (0, 0), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(t.astype(np.float64), expected, rtol=2e-2, atol=5e-2)


def test_unfold_columns(b, rng):
    x = rng.standard_normal((2, 3, 5, 4))
    got = b.unfold(x, (2, 3), (2, 1), (1, 0), (1, 1), float64)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)))
    blocks = [padded[:, :, i:i + 2, j:j + 3].reshape(2, -1) for i in range(0, 6, 2)
              for j in range(2)]
    assert np.array_equal(got, np.stack(blocks, axis=-1))


# -- pools --------------------------------------------------------------------------------------

POOL_CASES = [
    # size, kernel, stride, padding, dilation, ceil_mode
    ((7,), (3,), (2,), (1,), (1,), False),
    ((8,), (2,), (3,), (1,), (2,), True),
    ((5, 6), (2, 2), (2, 2), (0, 0), (1, 1), True),
    ((7, 7), (3, 3), (2, 2), (1, 1), (1, 1), True),
    ((6, 5), (3, 2), (2, 1), (1, 1), (2, 1), False),
    ((4, 5, 3), (2, 3, 2), (2, 2, 1), (1, 1, 0), (1, 1, 1), True),
]


@pytest.mark.parametrize("size, kernel, stride, padding, dilation, ceil_mode", POOL_CASES)
def test_max_pool_with_indices_matches_pytorch_loop(b, rng, size, kernel, stride, padding,
                                                    dilation, ceil_mode):
    # Few distinct values: ties everywhere; some NaN and -inf.
    x = rng.integers(-2, 3, (2, 2, *size)).astype(np.float64)
    x[rng.random(x.shape) < 0.05] = np.nan
    x[rng.random(x.shape) < 0.1] = -np.inf
    values, indices = b.max_pool_with_indices(x, kernel, stride, padding, dilation, ceil_mode)
    expected_values, expected_indices = naive_max_pool(x, kernel, stride, padding, dilation,
                                                       ceil_mode)
    assert indices.dtype == np.int64
    assert np.array_equal(indices, expected_indices)
    assert np.array_equal(values, expected_values, equal_nan=True)
    assert np.array_equal(b.max_pool(x, kernel, stride, padding, dilation, ceil_mode),
                          expected_values, equal_nan=True)


def test_max_pool_window_of_minus_inf_points_into_the_input(b):
    x = np.full((1, 1, 4), -np.inf)
    values, indices = b.max_pool_with_indices(x, (2,), (2,), (1,), (1,), False)
    assert np.array_equal(indices, [[[0, 1, 3]]])
    assert np.all(values == -np.inf)


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("size, kernel, stride, padding, dilation, ceil_mode", POOL_CASES)
def test_avg_pool_matches_pytorch_divisor(b, rng, size, kernel, stride, padding, dilation,
                                          ceil_mode, count_include_pad):
    x = rng.standard_normal((2, 3, *size))
    got = b.avg_pool(x, kernel, stride, padding, count_include_pad, ceil_mode)
    expected = naive_avg_pool(x, kernel, stride, padding, count_include_pad, ceil_mode)
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-14)


def test_avg_pool_known_values(b):
    x = np.arange(1.0, 6.0).reshape(1, 1, 5)  # 1 2 3 4 5
    # Windows [-1, 1), [1, 3), [3, 5), and with ceil_mode [5, 7) is dropped (starts in padding).
    assert np.array_equal(b.avg_pool(x, (2,), (2,), (1,), True, False), [[[0.5, 2.5, 4.5]]])
    assert np.array_equal(b.avg_pool(x, (2,), (2,), (1,), False, False), [[[1.0, 2.5, 4.5]]])
    # ceil_mode without padding: the last window [4, 6) overhangs and divides by 1 either way.
    assert np.array_equal(b.avg_pool(x, (2,), (2,), (0,), True, True), [[[1.5, 3.5, 5.0]]])


@pytest.mark.parametrize("size, out", [((7,), (3,)), ((5, 7), (3, 4)), ((4, 6), (2, 3)),
                                       ((3, 2), (5, 4)), ((5, 4, 3), (2, 3, 2))])
def test_adaptive_pools_match_pytorch_windows(b, rng, size, out):
    x = rng.integers(-2, 3, (2, 2, *size)).astype(np.float64)
    x[rng.random(x.shape) < 0.05] = np.nan
    avg = b.adaptive_avg_pool(x, out)
    values, indices = b.adaptive_max_pool_with_indices(x, out)
    windows = [adaptive_windows(n, o) for n, o in zip(size, out)]
    for pos in itertools.product(*map(range, out)):
        region = tuple(slice(*windows[d][q]) for d, q in enumerate(pos))
        block = x[(slice(None), slice(None)) + region]
        axes = tuple(range(2, x.ndim))
        np.testing.assert_allclose(avg[(slice(None), slice(None), *pos)],
                                   block.mean(axis=axes), rtol=1e-13)
        # Same scan as max_pool: first max in row-major order, or the last NaN.
        starts = [windows[d][q][0] for d, q in enumerate(pos)]
        for n, c in itertools.product(range(2), range(2)):
            best, where = -np.inf, None
            for k in itertools.product(*map(range, block.shape[2:])):
                value = block[(n, c, *k)]
                flat = int(np.ravel_multi_index([a + t for a, t in zip(starts, k)], size))
                where = flat if where is None else where
                if value > best or np.isnan(value):
                    best, where = value, flat
            assert indices[(n, c, *pos)] == where
            assert np.array_equal(values[(n, c, *pos)], best, equal_nan=True)
    assert np.array_equal(b.adaptive_max_pool(x, out), values, equal_nan=True)


# -- interpolation ------------------------------------------------------------------------------


def test_nearest_uses_pytorch_float32_scale(b):
    x = np.arange(2.0).reshape(1, 1, 1, 2)
    # 41 * (2 / 82) is 1 exactly, but PyTorch's float32 product rounds just below it.
    got = b.interpolate(x, (1, 82), "nearest", False)
    assert got[0, 0, 0, 41] == 0.0 and got[0, 0, 0, 42] == 1.0
    y = np.arange(12.0).reshape(1, 1, 3, 4)
    assert np.array_equal(b.interpolate(y, (2, 2), "nearest", False)[0, 0], [[0, 2], [4, 6]])


def test_bilinear_known_values(b):
    x = np.array([[[[0.0, 1.0], [2.0, 3.0]]]])
    corners = b.interpolate(x, (3, 3), "bilinear", True)[0, 0]
    assert np.allclose(corners, [[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]])
    # align_corners=False: source = (i + 0.5) / 2 - 0.5, clamped at 0.
    half = b.interpolate(x, (4, 4), "bilinear", False)[0, 0]
    row = [0.0, 0.25, 0.75, 1.0]
    assert np.allclose(half, [[r + 2 * c for r in row] for c in row])
    # One output with align_corners: the first input element.
    assert b.interpolate(x, (1, 1), "bilinear", True)[0, 0, 0, 0] == 0.0


def cubic_weights(t, a=-0.75):
    def near(v):
        return ((a + 2) * v - (a + 3)) * v * v + 1

    def far(v):
        return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def naive_bicubic_1d(row, out, align_corners):
    n = len(row)
    result = []
    for i in range(out):
        if align_corners:
            src = i * (n - 1) / (out - 1) if out > 1 else 0.0
        else:
            src = (i + 0.5) * n / out - 0.5
        base = min(math.floor(src), n - 1)
        t = min(max(src - base, 0.0), 1.0)
        taps = [row[min(max(base - 1 + j, 0), n - 1)] for j in range(4)]
        result.append(sum(w * v for w, v in zip(cubic_weights(t), taps)))
    return result


@pytest.mark.parametrize("align_corners", [False, True])
def test_bicubic_separable_with_clamped_borders(b, rng, align_corners):
    x = rng.standard_normal((1, 1, 4, 5))
    got = b.interpolate(x, (7, 3), "bicubic", align_corners)[0, 0]
    rows = np.array([naive_bicubic_1d(r, 3, align_corners) for r in x[0, 0]])
    expected = np.array([naive_bicubic_1d(c, 7, align_corners) for c in rows.T]).T
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    # Same size without align_corners is the identity (weights 0, 1, 0, 0).
    np.testing.assert_allclose(b.interpolate(x, (4, 5), "bicubic", False), x, atol=1e-15)


@pytest.mark.parametrize("dtype", [float32, float16, bfloat16], ids=str)
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_keeps_dtype(b, rng, dtype, mode):
    x = rng.standard_normal((1, 2, 3, 4)).astype(dtype.numpy)
    assert b.interpolate(x, (5, 2), mode, False).dtype == dtype.numpy


# -- sorting ------------------------------------------------------------------------------------


def test_argsort_is_stable_both_ways_with_nan(b):
    x = np.array([2.0, np.nan, 1.0, 2.0, np.nan, 1.0, -np.inf])
    assert np.array_equal(b.argsort(x, 0, False), [6, 2, 5, 0, 3, 1, 4])
    assert np.array_equal(b.argsort(x, 0, True), [1, 4, 0, 3, 2, 5, 6])
    assert np.array_equal(b.sort(x, 0, True), [np.nan, np.nan, 2, 2, 1, 1, -np.inf],
                          equal_nan=True)
    values, indices = b.sort_with_indices(x, 0, True)
    assert np.array_equal(values, x[indices], equal_nan=True)


def test_descending_argsort_of_ints_at_the_minimum(b):
    low = np.iinfo(np.int8).min
    x = np.array([[low, 5, low, 127, 5]], np.int8)
    assert np.array_equal(b.argsort(x, 1, True), [[3, 1, 4, 0, 2]])
    assert np.array_equal(b.argsort(x, 1, False), [[0, 2, 1, 4, 3]])
    assert b.sort(x, 1, True).dtype == np.int8


def test_sort_along_a_middle_dim(b, rng):
    x = rng.integers(0, 3, (3, 6, 2)).astype(np.int32)
    order = b.argsort(x, 1, True)
    for i, j in itertools.product(range(3), range(2)):
        column = x[i, :, j]
        expected = sorted(range(6), key=lambda k: (-int(column[k]), k))
        assert list(order[i, :, j]) == expected


def test_topk_largest_first_ties_by_index(b):
    x = np.array([[1.0, 3.0, 3.0, 2.0]], np.float16)
    values, indices = b.topk_with_indices(x, 1, 3)
    assert np.array_equal(indices, [[1, 2, 3]]) and values.dtype == np.float16


def test_bfloat16_sort_and_argmax(b):
    x = np.array([1.5, np.nan, -2.0, 1.5], ml_dtypes.bfloat16)
    assert np.array_equal(b.argsort(x, 0, False), [2, 0, 3, 1])
    assert b.argmax(x, 0)[0] == 1
    assert b.max(x, None).dtype == ml_dtypes.bfloat16 and np.isnan(float(b.max(x, None)))


# -- dtypes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_int_results_keep_their_dtype(b, dtype):
    x = np.array([[100, 27], [3, 100]], dtype)
    for out in (b.sum(x, None), b.sum(x, 0), b.prod(x, 1), b.cumsum(x, 0), b.cumprod(x, 1),
                b.matmul(x, x), b.add_scalar(x, 300, None), b.div(x, np.array(7, dtype)),
                b.abs(x), b.max(x, None)):
        assert out.dtype == np.dtype(dtype)
    if dtype == "int8":
        assert b.sum(x, None) == np.int8(-26)  # 230 wraps, as the protocol says
        assert np.array_equal(b.add_scalar(x, 300, None), x + np.int8(44))


def test_int_division_and_remainder_follow_python(b):
    lhs = np.array([7, -7, 7, -7], np.int32)
    rhs = np.array([2, 2, -2, -2], np.int32)
    assert np.array_equal(b.div(lhs, rhs), [7 // 2, -7 // 2, 7 // -2, -7 // -2])
    assert np.array_equal(b.remainder(lhs, rhs), [7 % 2, -7 % 2, 7 % -2, -7 % -2])
    floats = b.remainder(np.array([5.5, -5.5]), np.array([-2.0, 2.0]))
    assert np.array_equal(floats, [5.5 % -2.0, -5.5 % 2.0])


@pytest.mark.parametrize("dtype", [d for d in STANDARD_DTYPES if d.is_float], ids=str)
def test_half_float_reductions_accumulate_wide(b, dtype):
    x = np.full(4096, 0.1, dtype.numpy)
    total = b.sum(x, None)
    assert total.dtype == dtype.numpy
    assert abs(float(total) - 409.6) / 409.6 < 1e-2
    assert b.mean(x, None, dtype).dtype == dtype.numpy
    assert b.var(x.reshape(64, 64), 1, 1, dtype).shape == (64, 1)


def test_var_with_too_few_elements_is_nan(b):
    out = b.var(np.ones((2, 1)), 1, 1, float64)
    assert out.shape == (2, 1) and np.all(np.isnan(out))


def test_cast_truncates_and_tests_nonzero(b):
    x = np.array([-1.7, -0.5, 0.0, 0.5, 2.9])
    assert np.array_equal(b.cast(x, float64, int64), [-1, 0, 0, 0, 2])
    assert np.array_equal(b.cast(x, float64, bool_), [True, True, False, True, True])


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_creation_keeps_dtype(b, dtype):
    device = b.default_device()
    for out in (b.zeros((2, 3), dtype, device), b.ones((2, 3), dtype, device),
                b.full((2, 3), 1, dtype, device), b.arange(0, 5, 2, dtype, device),
                b.random((4,), Distribution.default(), dtype, device)):
        assert out.dtype == dtype.numpy


# -- ownership ----------------------------------------------------------------------------------


def test_from_data_shares_and_into_data_does_not_copy(b):
    array = np.arange(6.0).reshape(2, 3)
    prim = b.from_data(TensorData(array), b.default_device())
    assert np.shares_memory(prim, array)
    assert b.into_data(prim, float64).to_numpy() is prim


def test_writing_ops_never_touch_their_input(b):
    x = np.zeros((3, 4))
    before = x.copy()
    b.slice_assign(x, ((0, 2, 1), (1, 3, 1)), np.ones((2, 2)))
    b.scatter_add(x, 1, np.array([[0, 0], [1, 3]]), np.ones((2, 2)))
    b.select_add(x, 0, np.array([2, 2]), np.ones((2, 4)))
    b.clamp(x, -1, 1, float64)
    b.sigmoid(x, float64)
    b.softmax(x, 1, float64)
    assert np.array_equal(x, before)
    # A broadcast view (read-only) is a valid input to every writing op.
    view = b.expand(np.zeros((1, 4)), (3, 4))
    out = b.scatter_add(view, 0, np.array([[0, 1, 2, 0]]), np.ones((1, 4)))
    assert np.array_equal(out.sum(axis=0), np.ones(4))


def test_scatter_add_and_gather_with_small_indices(b):
    x = np.arange(12.0).reshape(3, 4)
    indices = np.array([[2, 0], [1, 1]])
    assert np.array_equal(b.gather(x, 0, indices), [[8.0, 1.0], [4.0, 5.0]])
    out = b.scatter_add(np.zeros((3, 4)), 0, indices, np.ones((2, 2)))
    assert np.array_equal(out, [[0, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0]])
    repeated = b.select_add(np.zeros(3, np.int8), 0, np.array([1, 1, 1]),
                            np.array([100, 100, 100], np.int8))
    assert repeated.dtype == np.int8 and repeated[1] == np.int8(44)


# -- random -------------------------------------------------------------------------------------


def test_seed_reproduces_and_uniform_stays_half_open(b):
    device = b.default_device()
    b.seed(7)
    first = b.random((1000,), Distribution.uniform(-1.0, 1.0), float16, device)
    b.seed(7)
    second = b.random((1000,), Distribution.uniform(-1.0, 1.0), float16, device)
    assert np.array_equal(first, second)
    narrow = b.random((100_000,), Distribution.uniform(0.0, 1.0), bfloat16, device)
    assert float(narrow.max()) < 1.0 and float(narrow.min()) >= 0.0
    ints = b.random((1000,), Distribution.uniform(0.0, 3.0), int64, device)
    assert set(np.unique(ints)) <= {0, 1, 2}
    coin = b.random((1000,), Distribution.bernoulli(0.5), bool_, device)
    assert coin.dtype == np.bool_ and 300 < coin.sum() < 700
