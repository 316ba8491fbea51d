"""Reductions: sum, prod, mean, var, std, max, min, any, all, and the arg/with-indices forms,
over every element, one dim or several, with and without keepdim."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, bool_, float32, int8, int16, int64, uint8
from burnish.conformance.compare import accumulated_atol, assert_close, assert_equal
from burnish.conformance.samples import ALL, FLOATS, INTS, LAYOUTS, NUMERIC, ids, laid_out, sample
from burnish.errors import ShapeError
from burnish.tensor_data import tolerance

#: One dim, several apart, and adjacent runs (a global pool's (2, 3)), which core reduces as
#: one merged dim.
DIMS = [None, 0, 1, -1, (0, 2), (2, 0, 1), (1, 2), (-2, 0)]
DIM_IDS = ["all", "0", "1", "-1", "0_2", "2_0_1", "1_2", "-2_0"]
KEEPDIM = pytest.mark.parametrize("keepdim", [False, True], ids=["drop", "keep"])


def _axis(dim):
    return dim if dim is None or isinstance(dim, int) else tuple(dim)


def _wide(a, dtype):
    return a.astype(np.float64 if dtype.is_float else np.int64)


def _check_sum_like(out, a, dtype, dim, keepdim, reduce):
    """``reduce`` of ``a`` over ``dim``, with an accumulation-aware tolerance for floats."""
    expected = reduce(_wide(a, dtype), axis=_axis(dim), keepdims=keepdim)
    if dtype.is_float:
        magnitude = reduce(np.abs(_wide(a, dtype)), axis=_axis(dim), keepdims=keepdim)
        assert_close(out, expected, dtype, atol=accumulated_atol(dtype, magnitude))
    else:
        assert_equal(out, expected.astype(out.dtype.numpy), dtype)


@KEEPDIM
@pytest.mark.parametrize("dim", DIMS, ids=DIM_IDS)
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_sum(device, dtype, dim, keepdim):
    a = sample((3, 4, 5), dtype, -3, 3)
    out = Tensor.from_numpy(a, device).sum(dim, keepdim)
    # Ints accumulate in their own dtype: the sum of int8 is int8.
    _check_sum_like(out, a, dtype, dim, keepdim, np.sum)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dim", [None, 0, 2, (1, 2)], ids=["all", "0", "2", "1_2"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_sum_non_contiguous(device, dtype, dim, layout):
    a = sample((3, 4, 5), dtype, -3, 3)
    out = laid_out(a, device, dtype, layout).sum(dim)
    _check_sum_like(out, a, dtype, dim, False, np.sum)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_mean_over_adjacent_dims_of_any_layout(device, dtype, layout):
    # A global average pool: the middle run of a 4-d tensor, merged by a reshape that is a
    # copy where the layout is not plain.
    a = sample((2, 3, 4, 5), dtype, -3, 3)
    out = laid_out(a, device, dtype, layout).mean((2, 1), keepdim=True)
    _check_sum_like(out, a, dtype, (1, 2), True, np.mean)


WRAPS = [(int8, [100, 100, 100], 44), (uint8, [200, 100], 44), (int16, [30000, 30000], -5536)]


@pytest.mark.parametrize(("dtype", "values", "total"), WRAPS, ids=[str(w[0]) for w in WRAPS])
def test_int_sum_stays_in_its_dtype(device, dtype, values, total):
    # The protocol: ints accumulate in their own dtype, so the sum wraps as that dtype does.
    x = Tensor.from_data(np.array(values, dtype=dtype.numpy), device)
    assert_equal(x.sum(), np.array(total, dtype=dtype.numpy), dtype)
    assert_equal(x.cumsum(0)[-1], np.array(total, dtype=dtype.numpy), dtype)


@pytest.mark.requires_dtype(int64)
def test_sum_of_bools_counts(device):
    a = sample((4, 6), bool_)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.sum(), np.array(a.sum()), int64)
    assert_equal(x.sum(1), a.sum(1), int64)


@pytest.mark.parametrize("dtype", [float32, int64], ids=ids([float32, int64]))
def test_sum_large_odd_shape(device, dtype):
    a = sample((1023, 257), dtype, -2, 2)
    x = Tensor.from_numpy(a, device)
    for dim in (None, 0, 1):
        _check_sum_like(x.sum(dim), a, dtype, dim, False, np.sum)


@KEEPDIM
@pytest.mark.parametrize("dim", DIMS[:4], ids=DIM_IDS[:4])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_prod(device, dtype, dim, keepdim):
    # Small factors keep every product inside int8.
    a = sample((3, 2, 3), dtype, -2, 2) if dtype.is_int else sample((3, 2, 3), dtype, 0.5, 1.5)
    out = Tensor.from_numpy(a, device).prod(dim, keepdim)
    expected = np.prod(_wide(a, dtype), axis=_axis(dim), keepdims=keepdim)
    if dtype.is_float:
        # Each of the three factors rounds once.
        assert_close(out, expected, dtype, rtol=4 * tolerance(dtype)[0])
    else:
        assert_equal(out, expected.astype(dtype.numpy), dtype)


@KEEPDIM
@pytest.mark.parametrize("dim", DIMS, ids=DIM_IDS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_mean(device, dtype, dim, keepdim):
    a = sample((3, 4, 5), dtype)
    out = Tensor.from_numpy(a, device).mean(dim, keepdim)
    _check_sum_like(out, a, dtype, dim, keepdim, np.mean)


@pytest.mark.requires_dtype(float32)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_mean_of_ints_is_float32(device, dtype):
    a = sample((4, 5), dtype, 0, 9)
    x = Tensor.from_numpy(a, device)
    assert_close(x.mean(), a.mean(), float32)
    assert_close(x.mean(1), a.mean(1), float32)


@KEEPDIM
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("dim", DIMS, ids=DIM_IDS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_var_and_std(device, dtype, dim, correction, keepdim):
    a = sample((3, 4, 5), dtype)
    x = Tensor.from_numpy(a, device)
    wide = a.astype(np.float64)
    var = np.var(wide, axis=_axis(dim), ddof=correction, keepdims=keepdim)
    # The squares of deviations up to 8 add up to at most 64 per term.
    atol = accumulated_atol(dtype, 64.0 * 2)
    assert_close(x.var(dim, correction, keepdim), var, dtype, atol=atol)
    assert_close(x.std(dim, correction, keepdim), np.sqrt(var), dtype, atol=atol)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_var_of_one_element_with_correction_is_nan(device, dtype):
    x = Tensor.from_data([[1.0], [2.0]], device, dtype)
    assert_equal(x.var(1), np.array([np.nan, np.nan]), dtype)
    assert_equal(x.var(1, correction=0), np.array([0.0, 0.0]), dtype)


@KEEPDIM
@pytest.mark.parametrize("dim", DIMS, ids=DIM_IDS)
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min(device, name, dtype, dim, keepdim):
    a = sample((3, 4, 5), dtype, -50, 50)
    out = getattr(Tensor.from_numpy(a, device), name)(dim, keepdim)
    assert_equal(out, getattr(np, name)(a, axis=_axis(dim), keepdims=keepdim), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_max_min_non_contiguous(device, name, dtype, layout):
    a = sample((4, 6), dtype, -50, 50)
    x = laid_out(a, device, dtype, layout)
    out = getattr(x, name)(1)
    assert_equal(out, getattr(np, name)(a, axis=1))


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["max", "min", "sum", "prod", "mean"])
def test_reductions_propagate_nan(device, name, dtype):
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    x = Tensor.from_data(a, device, dtype)
    expected = getattr(np, name)(a, axis=1)
    assert_close(getattr(x, name)(1), expected, dtype)
    assert_equal(getattr(x, name)().is_nan(), np.array(True))


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_max_min_with_infinities(device, dtype):
    a = np.array([[-np.inf, 2.0], [np.inf, -1.0]])
    x = Tensor.from_data(a, device, dtype)
    assert_equal(x.max(1), np.array([2.0, np.inf]), dtype)
    assert_equal(x.min(0), np.array([-np.inf, -1.0]), dtype)


@KEEPDIM
@pytest.mark.parametrize("dim", [None, 0, 1, -1], ids=["all", "0", "1", "-1"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_first_of_ties(device, name, dtype, dim, keepdim):
    # Few distinct values: ties everywhere, and the first one must win.
    a = sample((4, 5, 3), dtype, 0, 2)
    out = getattr(Tensor.from_numpy(a, device), name)(dim, keepdim)
    expected = getattr(np, name)(a, axis=dim, keepdims=keepdim)
    assert_equal(out, np.asarray(expected), int64)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_nan_wins(device, name, dtype):
    a = np.array([[1.0, np.nan, 7.0, np.nan], [np.inf, -np.inf, 0.0, 1.0]])
    out = getattr(Tensor.from_data(a, device, dtype), name)(1)
    assert_equal(out, getattr(np, name)(a, axis=1), int64)


@KEEPDIM
@pytest.mark.parametrize("dim", [0, 1, -1], ids=["0", "1", "-1"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", ["max", "min"])
def test_with_indices(device, name, dtype, dim, keepdim):
    a = sample((4, 5, 3), dtype, 0, 3)
    values, indices = getattr(Tensor.from_numpy(a, device), f"{name}_with_indices")(dim, keepdim)
    assert_equal(values, getattr(np, name)(a, axis=dim, keepdims=keepdim), dtype)
    assert_equal(indices, getattr(np, f"arg{name}")(a, axis=dim, keepdims=keepdim), int64)


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
@pytest.mark.parametrize("name", ["any", "all"])
@pytest.mark.requires_dtype(bool_)
def test_any_all(device, name, dtype):
    a = sample((3, 4, 5), dtype, -1, 1)
    x = Tensor.from_numpy(a, device)
    fn = getattr(np, name)
    assert_equal(getattr(x, name)(), np.array(fn(a)), bool_)
    for dim in (0, 1, 2):
        assert_equal(getattr(x, name)(dim), fn(a, axis=dim), bool_)
    assert_equal(getattr(x, name)((0, 2), keepdim=True), fn(a, axis=(0, 2), keepdims=True), bool_)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.requires_dtype(bool_)
def test_any_all_count_nan_as_true(device, dtype):
    x = Tensor.from_data([0.0, np.nan], device, dtype)
    assert_equal(x.any(), np.array(True), bool_)
    assert_equal(x.all(), np.array(False), bool_)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_reductions_of_empty(device, dtype):
    a = sample((0, 3), dtype)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.sum(), np.array(0, dtype=dtype.numpy), dtype)
    assert_equal(x.sum(0), np.zeros(3, dtype=dtype.numpy), dtype)
    assert_equal(x.sum(1), np.zeros(0, dtype=dtype.numpy), dtype)
    assert_equal(x.prod(0), np.ones(3, dtype=dtype.numpy), dtype)
    assert_equal(x.max(1), np.zeros(0, dtype=dtype.numpy), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_mean_of_empty_is_nan(device, dtype):
    x = Tensor.from_numpy(sample((0, 3), dtype), device)
    assert_equal(x.mean(), np.array(np.nan), dtype)
    assert_equal(x.mean(0), np.full(3, np.nan), dtype)
    assert_equal(x.mean((0, 1)), np.array(np.nan), dtype)


@pytest.mark.requires_dtype(bool_)
def test_any_all_of_empty(device):
    x = Tensor.from_numpy(np.zeros((0, 2), bool), device)
    assert_equal(x.any(), np.array(False), bool_)
    assert_equal(x.all(), np.array(True), bool_)
    assert_equal(x.all(0), np.ones(2, bool), bool_)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_max_of_empty_dim_raises(device, name, dtype):
    x = Tensor.from_numpy(sample((2, 0), dtype), device)
    with pytest.raises(ShapeError, match=r"\[2, 0\]"):
        getattr(x, name)(1)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
def test_zero_dim_reductions(device, name, dtype):
    a = sample((), dtype, 1, 3)
    x = Tensor.from_numpy(a, device)
    out = getattr(x, name)()
    assert out.shape == ()
    assert_equal(out, a, dtype)
    assert_equal(getattr(x, name)(keepdim=True), a, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_zero_dim_mean(device, dtype):
    a = sample((), dtype, 1, 3)
    assert_equal(Tensor.from_numpy(a, device).mean(), a, dtype)
