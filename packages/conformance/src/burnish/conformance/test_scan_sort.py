"""Scans (cumsum, cumprod) and sorting (sort, argsort, their pair, topk): stable, NaN largest."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, bool_, int64
from burnish.conformance.compare import accumulated_atol, assert_close, assert_equal
from burnish.conformance.samples import FLOATS, LAYOUTS, NUMERIC, ids, laid_out, sample
from burnish.errors import ShapeError
from burnish.tensor_data import tolerance


def _wide(a, dtype):
    return a.astype(np.float64 if dtype.is_float else np.int64)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_cumsum(device, dtype, dim):
    a = sample((3, 4, 5), dtype, -3, 3)
    out = Tensor.from_numpy(a, device).cumsum(dim)
    expected = np.cumsum(_wide(a, dtype), axis=dim)
    if dtype.is_float:
        magnitude = np.cumsum(np.abs(_wide(a, dtype)), axis=dim)
        assert_close(out, expected, dtype, atol=accumulated_atol(dtype, magnitude))
    else:
        assert_equal(out, expected.astype(dtype.numpy), dtype)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_cumprod(device, dtype, dim):
    a = sample((3, 3, 3), dtype, -2, 2) if dtype.is_int else sample((3, 3, 3), dtype, 0.5, 1.5)
    out = Tensor.from_numpy(a, device).cumprod(dim)
    expected = np.cumprod(_wide(a, dtype), axis=dim)
    if dtype.is_float:
        # Each of the three factors rounds once.
        assert_close(out, expected, dtype, rtol=4 * tolerance(dtype)[0])
    else:
        assert_equal(out, expected.astype(dtype.numpy), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_scans_non_contiguous(device, dtype, layout):
    a = sample((4, 6), dtype, 0, 2)
    x = laid_out(a, device, dtype, layout)
    assert_close(x.cumsum(1), np.cumsum(_wide(a, dtype), axis=1), dtype)
    assert_close(x.cumprod(0), np.cumprod(_wide(a, dtype), axis=0), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_scans_with_nan_and_inf(device, dtype):
    a = np.array([1.0, np.nan, 2.0, np.inf, -np.inf])
    x = Tensor.from_data(a, device, dtype)
    with np.errstate(invalid="ignore"):
        assert_equal(x.cumsum(0), np.cumsum(a), dtype)
        assert_equal(x.cumprod(0), np.cumprod(a), dtype)


@pytest.mark.requires_dtype(int64)
def test_scans_of_bools_count(device):
    a = sample((2, 5), bool_)
    assert_equal(Tensor.from_numpy(a, device).cumsum(1), np.cumsum(a, axis=1), int64)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_scans_of_empty_and_zero_dim(device, dtype):
    empty = Tensor.from_numpy(sample((0, 3), dtype), device)
    assert_equal(empty.cumsum(0), np.zeros((0, 3), dtype.numpy), dtype)
    assert_equal(empty.cumprod(1), np.zeros((0, 3), dtype.numpy), dtype)
    a = sample((), dtype, 1, 3)
    assert_equal(Tensor.from_numpy(a, device).cumsum(0), a, dtype)


def sort_reference(a: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable argsort along ``axis``, NaN as the largest value (last ascending, first
    descending); equal values keep their order either way."""
    moved = np.moveaxis(np.asarray(a), axis, -1)
    if not descending:
        order = np.argsort(moved, axis=-1, kind="stable")
    else:
        wide = moved.astype(np.float64)
        nan = np.isnan(wide)
        keys = np.where(nan, 0.0, -wide)
        order = np.empty(moved.shape, dtype=np.int64)
        for index in np.ndindex(moved.shape[:-1]):
            # lexsort: the last key is the primary one (NaN first), then larger values first.
            order[index] = np.lexsort((keys[index], ~nan[index]))
    return np.moveaxis(order, -1, axis)


@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_sort_argsort_stable(device, dtype, dim, descending):
    # Few distinct values: stability decides the order of every tie.
    a = sample((4, 7, 3), dtype, 0, 3)
    x = Tensor.from_numpy(a, device)
    order = sort_reference(a, dim, descending)
    expected = np.take_along_axis(a, order, axis=dim)
    assert_equal(x.argsort(dim, descending), order, int64)
    assert_equal(x.sort(dim, descending), expected, dtype)
    values, indices = x.sort_with_indices(dim, descending)
    assert_equal(values, expected, dtype)
    assert_equal(indices, order, int64)


@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_sort_nan_and_inf(device, dtype, descending):
    a = np.array([[3.0, np.nan, -np.inf, 1.0, np.inf, np.nan, -0.5, 1.0]])
    x = Tensor.from_data(a, device, dtype)
    order = sort_reference(a, 1, descending)
    assert_equal(x.argsort(1, descending), order, int64)
    assert_equal(x.sort(1, descending), np.take_along_axis(a, order, axis=1), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_sort_non_contiguous(device, dtype, layout):
    a = sample((5, 6), dtype, -20, 20)
    x = laid_out(a, device, dtype, layout)
    assert_equal(x.sort(0), np.sort(a, axis=0), dtype)
    assert_equal(x.argsort(1), sort_reference(a, 1, False), int64)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_sort_large_odd_length(device, dtype):
    a = sample((3, 1031), dtype, -100, 100)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.sort(1), np.sort(a, axis=1), dtype)
    assert_equal(x.argsort(1, descending=True), sort_reference(a, 1, True), int64)


@pytest.mark.requires_dtype(int64)
def test_sort_bools(device):
    a = sample((2, 6), bool_)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.sort(1), np.sort(a, axis=1), bool_)
    assert_equal(x.argsort(1), sort_reference(a, 1, False), int64)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_sort_empty_dim(device, dtype):
    x = Tensor.from_numpy(sample((2, 0), dtype), device)
    assert_equal(x.sort(1), np.zeros((2, 0), dtype.numpy), dtype)
    assert_equal(x.argsort(0), np.zeros((2, 0), np.int64), int64)


@pytest.mark.parametrize("k", [0, 1, 3, 6])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_topk(device, dtype, dim, k):
    # Distinct values, so the indices do not depend on how ties are broken.
    a = _distinct((6, 6), dtype)
    x = Tensor.from_numpy(a, device)
    order = sort_reference(a, dim, True)
    keep = [slice(None)] * 2
    keep[dim] = slice(0, k)
    indices = order[tuple(keep)]
    values = np.take_along_axis(a, indices, axis=dim)
    assert_equal(x.topk(k, dim), values, dtype)
    got_values, got_indices = x.topk_with_indices(k, dim)
    assert_equal(got_values, values, dtype)
    assert_equal(got_indices, indices, int64)


def _distinct(shape, dtype):
    """Distinct values of ``dtype`` in a deterministic shuffled order."""
    count = int(np.prod(shape))
    values = np.arange(count) - (count // 2 if dtype.signed else 0)
    return np.random.default_rng(count).permutation(values).reshape(shape).astype(dtype.numpy)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_topk_out_of_range_raises(device, dtype):
    x = Tensor.from_numpy(sample((2, 3), dtype), device)
    with pytest.raises(ShapeError, match=r"k=4.*size 3"):
        x.topk(4)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_sort_zero_dim_raises(device, dtype):
    with pytest.raises(ShapeError, match="at least 1 dim"):
        Tensor.from_numpy(sample((), dtype), device).sort()
