"""Comparisons (bool results, broadcast, NaN never equal) and logic: boolean ops on bools,
bitwise ops on ints."""

from __future__ import annotations

import operator

import numpy as np
import pytest

from burnish import Tensor, bool_, float32, int64, uint8
from burnish.conformance.compare import assert_equal
from burnish.conformance.samples import ALL, FLOATS, INTS, LAYOUTS, NUMERIC, ids, laid_out, sample

COMPARISONS = {
    "equal": operator.eq, "not_equal": operator.ne, "greater": operator.gt,
    "greater_equal": operator.ge, "lower": operator.lt, "lower_equal": operator.le,
}
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (5,)), ((0, 2), (2,))]


def _values(shape, dtype, key=0):
    # A narrow range makes equal pairs common.
    return sample(shape, dtype, -2, 2, key=key)


@pytest.mark.parametrize(("lhs", "rhs"), SHAPES, ids=[f"{ids(p)[0]}-{ids(p)[1]}" for p in SHAPES])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", list(COMPARISONS))
@pytest.mark.requires_dtype(bool_)
def test_compare_tensors(device, name, dtype, lhs, rhs):
    a, b = _values(lhs, dtype), _values(rhs, dtype, key=1)
    out = getattr(Tensor.from_numpy(a, device), name)(Tensor.from_numpy(b, device))
    assert_equal(out, COMPARISONS[name](a, b), bool_)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", list(COMPARISONS))
@pytest.mark.requires_dtype(bool_)
def test_compare_operators_and_scalars(device, name, dtype):
    a = _values((3, 5), dtype)
    x = Tensor.from_numpy(a, device)
    op = COMPARISONS[name]
    assert_equal(op(x, Tensor.from_numpy(a[::-1].copy(), device)), op(a, a[::-1]), bool_)
    assert_equal(op(x, 1), op(a, 1), bool_)
    # Reflected: ``1 < x`` is ``x > 1``.
    assert_equal(op(1, x), op(1, a), bool_)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.requires_dtype(bool_)
def test_compare_non_contiguous(device, dtype, layout):
    a, b = _values((3, 4, 2), dtype), _values((3, 4, 2), dtype, key=1)
    x, y = laid_out(a, device, dtype, layout), laid_out(b, device, dtype, layout)
    assert_equal(x.greater_equal(y), a >= b, bool_)
    assert_equal(x.equal(y), a == b, bool_)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", list(COMPARISONS))
@pytest.mark.requires_dtype(bool_)
def test_compare_nan_and_inf(device, name, dtype):
    a = np.array([np.nan, np.nan, 1.0, np.inf, -np.inf, np.inf, 0.0])
    b = np.array([np.nan, 1.0, np.nan, np.inf, np.inf, 1e4, -0.0])
    out = getattr(Tensor.from_data(a, device, dtype), name)(Tensor.from_data(b, device, dtype))
    assert_equal(out, COMPARISONS[name](a, b), bool_)


@pytest.mark.parametrize("name", list(COMPARISONS))
@pytest.mark.requires_dtype(bool_, uint8)
def test_compare_bools(device, name):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    out = getattr(Tensor.from_numpy(a, device), name)(Tensor.from_numpy(b, device))
    assert_equal(out, COMPARISONS[name](a, b), bool_)


@pytest.mark.requires_dtype(bool_, int64, float32)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_compare_int_with_float_promotes(device, dtype):
    a = sample((6,), dtype, 0, 4)
    x = Tensor.from_numpy(a, device)
    assert_equal(x > 1.5, a > 1.5, bool_)
    assert_equal(x == Tensor.from_data(a.astype(np.float32) + 0.5, device), np.zeros(6, bool),
                 bool_)


@pytest.mark.requires_dtype(float32, bool_)
def test_all_close(device):
    x = Tensor.from_data([1.0, 2.0, 3.0], device)
    assert x.all_close(Tensor.from_data([1.0, 2.0, 3.0 + 1e-7], device))
    assert not x.all_close(Tensor.from_data([1.0, 2.0, 3.1], device))
    assert not Tensor.from_data([np.nan], device).all_close(Tensor.from_data([np.nan], device))


LOGIC = {"and": (operator.and_, "logical_and"), "or": (operator.or_, "logical_or"),
         "xor": (operator.xor, "logical_xor")}


@pytest.mark.parametrize(("lhs", "rhs"), SHAPES, ids=[f"{ids(p)[0]}-{ids(p)[1]}" for p in SHAPES])
@pytest.mark.parametrize("name", list(LOGIC))
@pytest.mark.requires_dtype(bool_)
def test_logic_on_bools(device, name, lhs, rhs):
    a, b = sample(lhs, bool_), sample(rhs, bool_, key=1)
    op, method = LOGIC[name]
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
    assert_equal(op(x, y), op(a, b), bool_)
    assert_equal(getattr(x, method)(y), op(a, b), bool_)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.requires_dtype(bool_)
def test_logical_not(device, layout):
    a = sample((3, 4), bool_)
    x = laid_out(a, device, bool_, layout)
    assert_equal(~x, ~a, bool_)
    assert_equal(x.logical_not(), ~a, bool_)
    assert_equal(x.bool_not(), ~a, bool_)


@pytest.mark.requires_dtype(bool_)
@pytest.mark.parametrize("name", list(LOGIC))
def test_logic_with_bool_scalar(device, name):
    a = sample((5,), bool_)
    op = LOGIC[name][0]
    assert_equal(op(Tensor.from_numpy(a, device), True), op(a, True), bool_)
    assert_equal(op(False, Tensor.from_numpy(a, device)), op(False, a), bool_)


@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
@pytest.mark.parametrize("name", list(LOGIC))
def test_bitwise_on_ints(device, name, dtype):
    a, b = sample((3, 4), dtype, -100, 100), sample((4,), dtype, -100, 100, key=1)
    op = LOGIC[name][0]
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
    assert_equal(op(x, y), op(a, b), dtype)
    assert_equal(getattr(x, "bitwise_" + name)(y), op(a, b), dtype)
    assert_equal(op(x, 6), op(a, dtype.numpy.type(6)), dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_bitwise_not(device, dtype, layout):
    a = sample((3, 4), dtype, -100, 100)
    x = laid_out(a, device, dtype, layout)
    assert_equal(~x, np.invert(a), dtype)
    assert_equal(x.bitwise_not(), np.invert(a), dtype)


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
@pytest.mark.requires_dtype(bool_)
def test_equal_on_empty(device, dtype):
    x = Tensor.from_numpy(sample((0, 3), dtype), device)
    assert_equal(x == x, np.zeros((0, 3), bool), bool_)
