"""Float math: the transcendental functions, rounding, and the NaN/inf tests."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, bool_, float32
from burnish.conformance import reference
from burnish.conformance.compare import assert_close, assert_equal
from burnish.conformance.samples import FLOATS, INTS, LAYOUTS, ids, laid_out, sample

# name: (float64 reference, low, high) with the sample range inside the function's domain.
FUNCTIONS = {
    "exp": (np.exp, -4, 4),
    "log": (np.log, 0.05, 8),
    "log1p": (np.log1p, -0.9, 8),
    "sqrt": (np.sqrt, 0, 9),
    "rsqrt": (lambda v: 1 / np.sqrt(v), 0.1, 9),
    "recip": (lambda v: 1 / v, 0.25, 4),
    "sin": (np.sin, -6, 6),
    "cos": (np.cos, -6, 6),
    "tan": (np.tan, -1.2, 1.2),
    "tanh": (np.tanh, -4, 4),
    "erf": (reference.erf, -3, 3),
    "sigmoid": (reference.sigmoid, -8, 8),
}
ROUNDING = {"floor": np.floor, "ceil": np.ceil, "round": np.round}
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -1.0, 1.0, 2.0])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_function(device, name, dtype, layout):
    fn, low, high = FUNCTIONS[name]
    a = sample((3, 5, 4), dtype, low, high)
    out = getattr(laid_out(a, device, dtype, layout), name)()
    # Near-zero results (sin, tan...) are judged absolutely, at the input's precision.
    assert_close(out, fn(a.astype(np.float64)), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", list(FUNCTIONS) + list(ROUNDING))
def test_special_values(device, name, dtype):
    fn = ROUNDING[name] if name in ROUNDING else FUNCTIONS[name][0]
    x = Tensor.from_data(SPECIALS, device, dtype)
    with np.errstate(all="ignore"):
        expected = fn(SPECIALS)
    assert_close(getattr(x, name)(), expected, dtype)


@pytest.mark.parametrize("shape", [(), (0,), (2, 0)], ids=ids([(), (0,), (2, 0)]))
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "tanh", "erf", "floor"])
def test_zero_dim_and_empty(device, name, dtype, shape):
    fn = ROUNDING[name] if name in ROUNDING else FUNCTIONS[name][0]
    a = sample(shape, dtype, 0.5, 2)
    assert_close(getattr(Tensor.from_numpy(a, device), name)(), fn(a.astype(np.float64)), dtype)


@pytest.mark.requires_dtype(float32)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "erf", "sigmoid", "recip"])
def test_int_input_becomes_float32(device, name, dtype):
    a = sample((2, 3), dtype, 1, 5)
    out = getattr(Tensor.from_numpy(a, device), name)()
    assert_close(out, FUNCTIONS[name][0](a.astype(np.float64)), float32)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", list(ROUNDING))
def test_rounding(device, name, dtype, layout):
    a = sample((4, 6), dtype, -5, 5)
    out = getattr(laid_out(a, device, dtype, layout), name)()
    assert_equal(out, ROUNDING[name](a.astype(np.float64)), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_round_halves_to_even(device, dtype):
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.49])
    out = Tensor.from_data(a, device, dtype).round()
    assert_equal(out, np.array([0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 4.0, 0.0]), dtype)


@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
@pytest.mark.parametrize("name", list(ROUNDING))
def test_rounding_keeps_ints(device, name, dtype):
    a = sample((5,), dtype)
    assert_equal(getattr(Tensor.from_numpy(a, device), name)(), a, dtype)


@pytest.mark.requires_dtype(bool_)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_nan_and_inf_tests(device, dtype, layout):
    a = np.tile(SPECIALS, (3, 1))
    x = laid_out(a, device, dtype, layout)
    assert_equal(x.is_nan(), np.isnan(a), bool_)
    assert_equal(x.is_inf(), np.isinf(a), bool_)
    assert_equal(x.is_finite(), np.isfinite(a), bool_)


@pytest.mark.requires_dtype(bool_)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
def test_nan_tests_on_ints_are_false(device, dtype):
    x = Tensor.from_numpy(sample((2, 3), dtype), device)
    assert_equal(x.is_nan(), np.zeros((2, 3), bool), bool_)
    assert_equal(x.is_inf(), np.zeros((2, 3), bool), bool_)
    assert_equal(x.is_finite(), np.ones((2, 3), bool), bool_)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_exp_log_overflow_and_underflow(device, dtype):
    big = 1000.0
    x = Tensor.from_data([big, -big], device, dtype)
    assert_equal(x.exp(), np.array([np.inf, 0.0]), dtype)
    assert_equal(Tensor.from_data([0.0], device, dtype).log(), np.array([-np.inf]), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_math_on_large_odd_shape(device, dtype):
    a = sample((1023, 257), dtype, -3, 3)
    assert_close(Tensor.from_numpy(a, device).tanh(), np.tanh(a.astype(np.float64)), dtype)
