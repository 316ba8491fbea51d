"""Pools: average (padding counted or not, ceil mode), max with indices and dilation, and the
adaptive pools, over 1, 2 and 3 spatial dims."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float32, int64
from burnish import functional as F
from burnish.conformance import reference
from burnish.conformance.compare import accumulated_atol, assert_close, assert_equal
from burnish.conformance.samples import FLOATS, LAYOUTS, ids, laid_out, sample

FLOAT_DTYPES = pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))

# (input spatial size, kernel, stride or None for the kernel, padding)
AVG = [
    ((8,), (2,), None, (0,)),
    ((9,), (3,), (2,), (1,)),
    ((10,), (4,), (3,), (2,)),
    ((7, 6), (2, 2), None, (0, 0)),
    ((7, 8), (3, 3), (2, 2), (1, 1)),
    ((6, 9), (2, 4), (1, 3), (1, 2)),
    ((5, 4), (5, 4), None, (0, 0)),
    ((5, 6, 7), (2, 3, 2), (2, 2, 3), (1, 1, 0)),
    ((4, 4, 4), (2, 2, 2), None, (0, 0, 0)),
]


def _id(case) -> str:
    size, kernel, stride, padding = case[:4]
    parts = ["x".join(map(str, size)), "k" + "x".join(map(str, kernel))]
    if stride is not None:
        parts.append("s" + "x".join(map(str, stride)))
    if any(padding):
        parts.append("p" + "x".join(map(str, padding)))
    if len(case) > 4 and any(d != 1 for d in case[4]):
        parts.append("d" + "x".join(map(str, case[4])))
    return "-".join(parts)


@pytest.mark.parametrize("ceil_mode", [False, True], ids=["floor", "ceil"])
@pytest.mark.parametrize("count_include_pad", [True, False], ids=["count_pad", "skip_pad"])
@pytest.mark.parametrize("case", AVG, ids=[_id(c) for c in AVG])
@FLOAT_DTYPES
def test_avg_pool(device, dtype, case, count_include_pad, ceil_mode):
    size, kernel, stride, padding = case
    x = sample((2, 3, *size), dtype)
    out = F.avg_pool(Tensor.from_numpy(x, device), kernel, stride, padding, count_include_pad,
                     ceil_mode)
    options = (kernel, stride or kernel, padding, count_include_pad, ceil_mode)
    expected = reference.avg_pool(x, *options)
    magnitude = reference.avg_pool(np.abs(x.astype(np.float64)), *options)
    assert_close(out, expected, dtype, atol=accumulated_atol(dtype, magnitude))


@FLOAT_DTYPES
def test_avg_pool_named_forms(device, dtype):
    x1, x2 = sample((1, 2, 9), dtype), sample((1, 2, 6, 7), dtype, key=1)
    out = F.avg_pool1d(Tensor.from_numpy(x1, device), 3, 2, 1, count_include_pad=False)
    assert_close(out, reference.avg_pool(x1, (3,), (2,), (1,), False, False), dtype)
    out = F.avg_pool2d(Tensor.from_numpy(x2, device), (2, 3), ceil_mode=True)
    assert_close(out, reference.avg_pool(x2, (2, 3), (2, 3), (0, 0), True, True), dtype)


# (input spatial size, kernel, stride or None, padding, dilation)
MAX = [
    ((8,), (2,), None, (0,), (1,)),
    ((9,), (3,), (2,), (1,), (1,)),
    ((11,), (3,), (2,), (1,), (2,)),
    ((10,), (4,), (3,), (2,), (1,)),
    ((7, 6), (2, 2), None, (0, 0), (1, 1)),
    ((7, 8), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((9, 9), (3, 2), (2, 1), (1, 1), (2, 3)),
    ((6, 9), (2, 4), (1, 3), (1, 2), (1, 1)),
    ((5, 6, 7), (2, 3, 2), (2, 2, 3), (1, 1, 0), (1, 1, 1)),
    ((6, 5, 6), (2, 2, 3), (1, 2, 2), (0, 1, 1), (2, 1, 2)),
]


@pytest.mark.parametrize("ceil_mode", [False, True], ids=["floor", "ceil"])
@pytest.mark.parametrize("case", MAX, ids=[_id(c) for c in MAX])
@FLOAT_DTYPES
@pytest.mark.requires_dtype(int64)
def test_max_pool_with_indices(device, dtype, case, ceil_mode):
    size, kernel, stride, padding, dilation = case
    # Whole numbers from a narrow range: ties are common, and the first max must win.
    x = sample((2, 3, *size), int64, -3, 3).astype(dtype.numpy)
    tensor = Tensor.from_numpy(x, device)
    values, indices = F.max_pool_with_indices(tensor, kernel, stride, padding, dilation,
                                              ceil_mode)
    want_values, want_indices = reference.max_pool_with_indices(
        x, kernel, stride or kernel, padding, dilation, ceil_mode)
    assert_equal(values, want_values, dtype)
    assert_equal(indices, want_indices, int64)
    assert_equal(F.max_pool(tensor, kernel, stride, padding, dilation, ceil_mode), want_values,
                 dtype)


@pytest.mark.parametrize("case", MAX, ids=[_id(c) for c in MAX])
@FLOAT_DTYPES
@pytest.mark.requires_dtype(int64)
def test_max_pool_distinct_values(device, dtype, case):
    size, kernel, stride, padding, dilation = case
    x = sample((1, 2, *size), dtype, -100, 100)
    values, indices = F.max_pool_with_indices(Tensor.from_numpy(x, device), kernel, stride,
                                              padding, dilation)
    want_values, want_indices = reference.max_pool_with_indices(
        x, kernel, stride or kernel, padding, dilation, False)
    assert_equal(values, want_values, dtype)
    assert_equal(indices, want_indices, int64)


@FLOAT_DTYPES
@pytest.mark.requires_dtype(int64)
def test_max_pool_named_forms(device, dtype):
    x1, x2 = sample((1, 2, 9), dtype), sample((1, 2, 6, 7), dtype, key=1)
    v1, i1 = reference.max_pool_with_indices(x1, (3,), (2,), (1,), (1,), False)
    v2, i2 = reference.max_pool_with_indices(x2, (2, 3), (2, 3), (1, 1), (1, 1), True)
    t1, t2 = Tensor.from_numpy(x1, device), Tensor.from_numpy(x2, device)
    assert_equal(F.max_pool1d(t1, 3, 2, 1), v1, dtype)
    assert_equal(F.max_pool2d(t2, (2, 3), padding=1, ceil_mode=True), v2, dtype)
    values, indices = F.max_pool1d_with_indices(t1, 3, 2, 1)
    assert_equal(values, v1, dtype)
    assert_equal(indices, i1, int64)
    values, indices = F.max_pool2d_with_indices(t2, (2, 3), padding=1, ceil_mode=True)
    assert_equal(values, v2, dtype)
    assert_equal(indices, i2, int64)


@FLOAT_DTYPES
def test_max_pool_nan_and_infinities(device, dtype):
    x = np.array([[[1.0, np.nan, 2.0, -np.inf, -np.inf, 3.0, np.inf, 0.0]]])
    out = F.max_pool1d(Tensor.from_data(x, device, dtype), 2)
    assert_equal(out, np.array([[[np.nan, 2.0, 3.0, np.inf]]]), dtype)
    # Padding never wins, even over -inf.
    out = F.max_pool1d(Tensor.from_data(np.full((1, 1, 3), -np.inf), device, dtype), 2, 2, 1)
    assert_equal(out, np.full((1, 1, 2), -np.inf), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.requires_dtype(int64)
def test_pools_non_contiguous(device, layout):
    dtype = float32
    x = sample((2, 3, 7, 8), dtype)
    tensor = laid_out(x, device, dtype, layout)
    assert_close(F.avg_pool2d(tensor, 3, 2, 1),
                 reference.avg_pool(x, (3, 3), (2, 2), (1, 1), True, False), dtype)
    values, indices = F.max_pool2d_with_indices(tensor, 3, 2, 1)
    want_values, want_indices = reference.max_pool_with_indices(x, (3, 3), (2, 2), (1, 1),
                                                                (1, 1), False)
    assert_equal(values, want_values, dtype)
    assert_equal(indices, want_indices, int64)
    assert_close(F.adaptive_avg_pool2d(tensor, (3, 5)), reference.adaptive_avg_pool(x, (3, 5)),
                 dtype)


ADAPTIVE = [((8,), (4,)), ((10,), (3,)), ((5,), (7,)), ((7,), (1,)), ((6, 6), (3, 3)),
            ((7, 9), (3, 4)), ((5, 4), (5, 4)), ((3, 5), (6, 2)), ((5, 6, 7), (2, 3, 4)),
            ((4, 3, 5), (4, 1, 2))]


@pytest.mark.parametrize(("size", "output"), ADAPTIVE,
                         ids=[f"{ids(a)[0]}-to-{ids(a)[1]}" for a in ADAPTIVE])
@FLOAT_DTYPES
def test_adaptive_avg_pool(device, dtype, size, output):
    x = sample((2, 3, *size), dtype)
    out = F.adaptive_avg_pool(Tensor.from_numpy(x, device), output)
    magnitude = reference.adaptive_avg_pool(np.abs(x.astype(np.float64)), output)
    assert_close(out, reference.adaptive_avg_pool(x, output), dtype,
                 atol=accumulated_atol(dtype, magnitude))
    named = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}
    out = named[len(size)](Tensor.from_numpy(x, device), output)
    assert_close(out, reference.adaptive_avg_pool(x, output), dtype,
                 atol=accumulated_atol(dtype, magnitude))


@pytest.mark.parametrize(("size", "output"), ADAPTIVE,
                         ids=[f"{ids(a)[0]}-to-{ids(a)[1]}" for a in ADAPTIVE])
@FLOAT_DTYPES
@pytest.mark.requires_dtype(int64)
def test_adaptive_max_pool(device, dtype, size, output):
    x = sample((2, 3, *size), int64, -3, 3).astype(dtype.numpy)
    tensor = Tensor.from_numpy(x, device)
    want_values, want_indices = reference.adaptive_max_pool_with_indices(x, output)
    values, indices = F.adaptive_max_pool_with_indices(tensor, output)
    assert_equal(values, want_values, dtype)
    assert_equal(indices, want_indices, int64)
    assert_equal(F.adaptive_max_pool(tensor, output), want_values, dtype)
    named = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d}
    if len(size) in named:
        assert_equal(named[len(size)](tensor, output), want_values, dtype)
