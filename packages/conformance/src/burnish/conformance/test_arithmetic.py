"""Arithmetic: binary operators with broadcasting, scalars, division rules, and the numeric
unary ops (neg, abs, sign, clamp, maximum, minimum)."""

from __future__ import annotations

import operator

import numpy as np
import pytest

from burnish import Tensor, bool_, float16, float32, int8, int64, uint8
from burnish.conformance.compare import assert_close, assert_equal
from burnish.conformance.samples import (
    FLOATS,
    INTS,
    LAYOUTS,
    NUMERIC,
    SIGNED,
    ids,
    laid_out,
    sample,
)
from burnish.errors import DTypeError, ShapeError

BROADCASTS = [
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((4, 1, 3), (1, 5, 1)),
    ((), (2, 3)),
    ((3, 1), ()),
    ((2, 0, 3), (1, 3)),
    ((1,), (0,)),
    ((), ()),
]
OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}


def reference(op, a: np.ndarray, b: np.ndarray, dtype) -> np.ndarray:
    """``op`` in float64 for floats, in int64 for ints (test values never overflow)."""
    wide = np.float64 if dtype.is_float else np.int64
    return op(a.astype(wide), b.astype(wide))


def check(out: Tensor, expected: np.ndarray, dtype) -> None:
    if dtype.is_float:
        assert_close(out, expected, dtype)
    else:
        assert_equal(out, expected.astype(dtype.numpy), dtype)


@pytest.mark.parametrize(("lhs", "rhs"), BROADCASTS, ids=[f"{ids(p)[0]}-{ids(p)[1]}"
                                                          for p in BROADCASTS])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", list(OPS))
def test_binary_broadcast(device, name, dtype, lhs, rhs):
    # uint8 stays non-negative: sub gets a larger left operand.
    a = sample(lhs, dtype, 5, 9) if not dtype.signed else sample(lhs, dtype)
    b = sample(rhs, dtype, 0, 4, key=1)
    out = OPS[name](Tensor.from_numpy(a, device), Tensor.from_numpy(b, device))
    check(out, reference(OPS[name], a, b, dtype), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_binary_non_contiguous(device, dtype, layout):
    a, b = sample((3, 4, 5), dtype, 0, 5), sample((3, 4, 5), dtype, 0, 5, key=1)
    x, y = laid_out(a, device, dtype, layout), laid_out(b, device, dtype, layout)
    check(x * y + x, reference(operator.mul, a, b, dtype) + a, dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_binary_expanded_operand(device, dtype):
    a, b = sample((4, 1), dtype, 0, 5), sample((4, 6), dtype, 0, 5, key=1)
    x = Tensor.from_numpy(a, device).expand((4, 6))
    check(x + Tensor.from_numpy(b, device), reference(operator.add, a, b, dtype), dtype)


@pytest.mark.parametrize("dtype", [float32, int64], ids=ids([float32, int64]))
def test_binary_large_odd_shape(device, dtype):
    a, b = sample((1023, 257), dtype), sample((257,), dtype, key=1)
    out = Tensor.from_numpy(a, device) - Tensor.from_numpy(b, device)
    check(out, reference(operator.sub, a, b, dtype), dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
@pytest.mark.parametrize("name", list(OPS))
def test_scalar_both_sides(device, name, dtype):
    a = sample((2, 5), dtype, 3, 9)
    x = Tensor.from_numpy(a, device)
    scalar = 2.0 if dtype.is_float else 2
    check(OPS[name](x, scalar), reference(OPS[name], a, np.array(scalar), dtype), dtype)
    if name != "sub" or dtype.signed:
        check(OPS[name](scalar, x), reference(OPS[name], np.array(scalar), a, dtype), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_true_division_floats(device, dtype):
    a, b = sample((3, 4), dtype), sample((4,), dtype, 0.5, 3, key=1)
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
    assert_close(x / y, a.astype(np.float64) / b.astype(np.float64), dtype)
    assert_close(x / 4.0, a.astype(np.float64) / 4.0, dtype)
    assert_close(2.0 / y, 2.0 / b.astype(np.float64), dtype)


@pytest.mark.requires_dtype(float32)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_true_division_of_ints_gives_float32(device, dtype):
    a, b = sample((2, 3), dtype, 0, 9), sample((2, 3), dtype, 1, 4, key=1)
    out = Tensor.from_numpy(a, device) / Tensor.from_numpy(b, device)
    assert_close(out, a / b, float32)
    assert_close(Tensor.from_numpy(a, device) / 2, a / 2, float32)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_division_by_zero_floats(device, dtype):
    x = Tensor.from_data([1.0, -1.0, 0.0], device, dtype)
    assert_equal(x / 0.0, np.array([np.inf, -np.inf, np.nan]), dtype)


def _divisors(dtype, shape, key=1):
    """Non-zero divisors of both signs (positive only for unsigned dtypes)."""
    d = sample(shape, dtype, 1, 5, key=key)
    if dtype.signed:
        d = np.where(sample(shape, bool_, key=key), d, -d).astype(dtype.numpy)
    return d


@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_floor_division_ints(device, dtype):
    a, b = sample((4, 5), dtype, -20, 20), _divisors(dtype, (4, 5))
    out = Tensor.from_numpy(a, device) // Tensor.from_numpy(b, device)
    assert_equal(out, np.floor_divide(a, b), dtype)
    assert_equal(Tensor.from_numpy(a, device) // 3, np.floor_divide(a, dtype.numpy.type(3)),
                 dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_floor_division_floats(device, dtype):
    a = np.round(sample((4, 5), dtype, -8, 8) * 4) / 4
    b = np.array([1.5, -2.5, 0.75, -0.5, 3.0])
    out = Tensor.from_data(a, device, dtype) // Tensor.from_data(b, device, dtype)
    assert_equal(out, np.floor_divide(a.astype(np.float64), b), dtype)


@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_remainder_ints_takes_divisor_sign(device, dtype):
    a, b = sample((4, 5), dtype, -20, 20), _divisors(dtype, (4, 5))
    out = Tensor.from_numpy(a, device) % Tensor.from_numpy(b, device)
    assert_equal(out, np.remainder(a, b), dtype)
    assert_equal(Tensor.from_numpy(a, device) % 3, np.remainder(a, dtype.numpy.type(3)), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_remainder_floats_takes_divisor_sign(device, dtype):
    # Multiples of 0.25 keep every quotient exact, so the reference is exact in any dtype.
    a = np.round(sample((4, 5), float32, -8, 8).astype(np.float64) * 4) / 4
    b = np.array([1.5, -2.5, 0.75, -0.5, 3.0])
    out = Tensor.from_data(a, device, dtype) % Tensor.from_data(b, device, dtype)
    assert_equal(out, np.remainder(a, b), dtype)
    assert_equal(Tensor.from_data(a, device, dtype) % -1.5, np.remainder(a, -1.5), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_pow_floats(device, dtype):
    a, b = sample((3, 4), dtype, 0.5, 3), sample((4,), dtype, -2, 2, key=1)
    x = Tensor.from_numpy(a, device)
    wide = a.astype(np.float64)
    assert_close(x ** Tensor.from_numpy(b, device), wide ** b.astype(np.float64), dtype)
    assert_close(x ** 2.0, wide ** 2.0, dtype)
    assert_close(x ** 0.5, np.sqrt(wide), dtype)
    assert_close(2.0 ** x, 2.0 ** wide, dtype)


@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_pow_ints(device, dtype):
    a, b = sample((3, 4), dtype, -3, 3), sample((3, 4), dtype, 0, 3, key=1)
    out = Tensor.from_numpy(a, device) ** Tensor.from_numpy(b, device)
    assert_equal(out, np.power(a.astype(np.int64), b.astype(np.int64)).astype(dtype.numpy), dtype)
    assert_equal(Tensor.from_numpy(a, device) ** 2, (a.astype(np.int64) ** 2).astype(dtype.numpy),
                 dtype)


@pytest.mark.requires_dtype(float32)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_powf_is_float(device, dtype):
    a = sample((5,), dtype, 0, 4)
    assert_close(Tensor.from_numpy(a, device).powf(0.5), np.sqrt(a.astype(np.float64)), float32)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_float_special_values(device, dtype):
    inf, nan = np.inf, np.nan
    a = np.array([inf, -inf, inf, nan, 1.0, 0.0, -0.0])
    b = np.array([-inf, -inf, 1.0, 1.0, nan, 0.0, 0.0])
    x, y = Tensor.from_data(a, device, dtype), Tensor.from_data(b, device, dtype)
    with np.errstate(all="ignore"):
        assert_equal(x + y, a + b, dtype)
        assert_equal(x - y, a - b, dtype)
        assert_equal(x * y, a * b, dtype)
        assert_equal(x / y, a / b, dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", SIGNED, ids=ids(SIGNED))
def test_neg_abs_sign(device, dtype, layout):
    a = sample((3, 4), dtype)
    a.flat[0] = 0
    x = laid_out(a, device, dtype, layout)
    assert_equal(-x, -a, dtype)
    assert_equal(x.neg(), -a, dtype)
    assert_equal(abs(x), np.abs(a), dtype)
    assert_equal(x.sign(), np.sign(a), dtype)


@pytest.mark.parametrize("dtype", [uint8], ids=["uint8"])
def test_abs_sign_unsigned(device, dtype):
    a = np.array([0, 1, 200], dtype=np.uint8)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.abs(), a, dtype)
    assert_equal(x.sign(), np.array([0, 1, 1], dtype=np.uint8), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_abs_sign_special_values(device, dtype):
    a = np.array([np.nan, np.inf, -np.inf, -0.0, -2.5])
    x = Tensor.from_data(a, device, dtype)
    assert_equal(x.abs(), np.abs(a), dtype)
    assert_equal(x.sign(), np.sign(a), dtype)
    assert_equal(-x, -a, dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_maximum_minimum(device, dtype):
    a, b = sample((3, 4), dtype), sample((4,), dtype, key=1)
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
    assert_equal(x.maximum(y), np.maximum(a, b), dtype)
    assert_equal(x.minimum(y), np.minimum(a, b), dtype)
    assert_equal(x.max_pair(y), np.maximum(a, b), dtype)
    assert_equal(x.min_pair(y), np.minimum(a, b), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_maximum_minimum_nan_wins(device, dtype):
    a = np.array([np.nan, 1.0, np.nan, -np.inf])
    b = np.array([1.0, np.nan, np.nan, np.inf])
    x, y = Tensor.from_data(a, device, dtype), Tensor.from_data(b, device, dtype)
    assert_equal(x.maximum(y), np.maximum(a, b), dtype)
    assert_equal(x.minimum(y), np.minimum(a, b), dtype)
    assert_equal(x.maximum(0.0), np.maximum(a, 0.0), dtype)


CLAMPS = [(-1, 2), (None, 1), (0, None), (2, 2)]
# uint8 only gets bounds it can hold.
CLAMP_CASES = [(dtype, low, high) for dtype in NUMERIC for low, high in CLAMPS
               if dtype.signed or low is None or low >= 0]


@pytest.mark.parametrize(("dtype", "low", "high"), CLAMP_CASES,
                         ids=[f"{d}-{lo}..{hi}" for d, lo, hi in CLAMP_CASES])
def test_clamp(device, dtype, low, high):
    a = sample((4, 5), dtype)
    x = Tensor.from_numpy(a, device)
    expected = np.clip(a.astype(np.float64), low, high).astype(dtype.numpy)
    if dtype.is_float:
        low, high = (None if v is None else float(v) for v in (low, high))
    assert_equal(x.clamp(low, high), expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_clamp_keeps_nan(device, dtype):
    a = np.array([np.nan, -np.inf, np.inf, 0.5])
    x = Tensor.from_data(a, device, dtype)
    assert_equal(x.clamp(-1.0, 1.0), np.array([np.nan, -1.0, 1.0, 0.5]), dtype)
    assert_equal(x.clamp_min(0.0), np.array([np.nan, 0.0, np.inf, 0.5]), dtype)
    assert_equal(x.clamp_max(0.0), np.array([np.nan, -np.inf, 0.0, 0.0]), dtype)


@pytest.mark.requires_dtype(float32)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_clamp_int_with_float_bound_becomes_float(device, dtype):
    a = sample((6,), dtype, 0, 5)
    out = Tensor.from_numpy(a, device).clamp(0.5, 3.5)
    assert_equal(out, np.clip(a.astype(np.float64), 0.5, 3.5), float32)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_zero_dim_operands(device, dtype):
    a, b = sample((), dtype, 1, 4), sample((), dtype, 1, 4, key=1)
    out = Tensor.from_numpy(a, device) * Tensor.from_numpy(b, device) + 1
    assert out.shape == ()
    check(out, reference(operator.mul, a, b, dtype) + 1, dtype)


@pytest.mark.requires_dtype(int8)
@pytest.mark.parametrize(("dtype", "scalar"), [(int8, 100), (float16, 1000.0)],
                         ids=["int8", "float16"])
def test_scalars_are_weak(device, dtype, scalar):
    x = Tensor.from_data([1], device, dtype)
    assert (x + scalar).dtype is dtype
    assert (scalar * x).dtype is dtype


@pytest.mark.requires_dtype(int64, float32)
def test_bool_with_int_scalar_gives_int64(device):
    x = Tensor.from_data([True, False], device)
    assert_equal(x + 1, np.array([2, 1]), int64)
    assert_equal(x * 0.5, np.array([0.5, 0.0]), float32)


MUL_ADD = [((2, 3), (2, 3), (2, 3)), ((2, 3, 4), (1, 3, 1), (1, 3, 1)), ((3, 1), (1, 4), (4,)),
           ((), (2, 3), ()), ((2, 0, 3), (1, 3), (3,))]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shapes", MUL_ADD, ids=["-".join(ids(s)) for s in MUL_ADD])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_mul_add(device, dtype, shapes, layout):
    # uint8 stays in range: small non-negative operands.
    low = 0 if not dtype.signed else -4
    x, a, b = (sample(shape, dtype, low, 4, key=k) for k, shape in enumerate(shapes))
    out = laid_out(x, device, dtype, layout).mul_add(laid_out(a, device, dtype, layout),
                                                     laid_out(b, device, dtype, layout))
    wide = np.float64 if dtype.is_float else np.int64
    check(out, x.astype(wide) * a.astype(wide) + b.astype(wide), dtype)


def test_mul_add_promotes_and_checks(device):
    x = Tensor.from_data(np.array([1, 2, 3], np.int64), device)
    a = Tensor.from_data(np.array([0.5, 0.5, 0.5], np.float32), device)
    out = x.mul_add(a, Tensor.from_data(np.array([1, 1, 1], np.int64), device))
    assert out.dtype is float32
    assert_close(out, [1.5, 2.0, 2.5], float32)
    with pytest.raises(ShapeError, match=r"\[3\].*\[2\]|\[2\].*\[3\]"):
        x.mul_add(x, Tensor.from_data(np.array([1, 2], np.int64), device))
    with pytest.raises(TypeError, match="mul_add: b must be a Tensor"):
        x.mul_add(x, 2)
    with pytest.raises(DTypeError, match="bool"):
        flags = Tensor.from_data(np.array([True, False, True]), device)
        flags.mul_add(flags, flags)
