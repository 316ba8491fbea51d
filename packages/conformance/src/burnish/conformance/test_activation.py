"""Activations: relu, gelu, sigmoid, log_sigmoid, silu, tanh, softmax and log_softmax, stable
at large magnitudes."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float32
from burnish import functional as F
from burnish.conformance import reference
from burnish.conformance.compare import assert_close
from burnish.conformance.samples import FLOATS, INTS, LAYOUTS, ids, laid_out, sample

ELEMENTWISE = {
    "relu": lambda v: np.maximum(v, 0.0),
    "gelu": reference.gelu,
    "sigmoid": reference.sigmoid,
    "log_sigmoid": reference.log_sigmoid,
    "silu": lambda v: v * reference.sigmoid(v),
    "tanh": np.tanh,
}
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -100.0, 100.0, -1.0, 1.0])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise(device, name, dtype, layout):
    x = sample((3, 4, 5), dtype, -6, 6)
    out = getattr(F, name)(laid_out(x, device, dtype, layout))
    assert_close(out, ELEMENTWISE[name](x.astype(np.float64)), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise_special_values(device, name, dtype):
    out = getattr(F, name)(Tensor.from_data(SPECIALS, device, dtype))
    with np.errstate(all="ignore"):
        expected = ELEMENTWISE[name](SPECIALS)
    if name == "silu":
        # inf * sigmoid(inf) is inf, but -inf * sigmoid(-inf) = -inf * 0 is NaN (PyTorch too).
        expected[2] = np.nan
    assert_close(out, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_sigmoid_family_stable_at_large_magnitudes(device, dtype):
    x = np.array([-80.0, -30.0, 30.0, 80.0])
    tensor = Tensor.from_data(x, device, dtype)
    assert_close(F.log_sigmoid(tensor), reference.log_sigmoid(x), dtype)
    assert_close(F.sigmoid(tensor), reference.sigmoid(x), dtype)


@pytest.mark.requires_dtype(float32)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
@pytest.mark.parametrize("name", ["relu", "gelu", "sigmoid", "log_sigmoid"])
def test_int_input_becomes_float32(device, name, dtype):
    x = sample((2, 5), dtype)
    out = getattr(F, name)(Tensor.from_numpy(x, device))
    assert_close(out, ELEMENTWISE[name](x.astype(np.float64)), float32)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax(device, name, dtype, dim):
    x = sample((3, 4, 5), dtype, -5, 5)
    out = getattr(F, name)(Tensor.from_numpy(x, device), dim)
    assert_close(out, getattr(reference, name)(x, dim), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_non_contiguous(device, name, layout):
    x = sample((4, 6), float32, -5, 5)
    out = getattr(F, name)(laid_out(x, device, float32, layout), 1)
    assert_close(out, getattr(reference, name)(x, 1), float32)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_shift_invariant_and_stable(device, name, dtype):
    # 1000 overflows exp in every dtype; subtracting the max is what keeps the result finite.
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -999.0]])
    out = getattr(F, name)(Tensor.from_data(x, device, dtype), 1)
    expected = getattr(reference, name)(x.astype(dtype.numpy).astype(np.float64), 1)
    assert_close(out, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_softmax_with_infinities(device, dtype):
    x = np.array([[-np.inf, 0.0, 0.0], [np.inf, 0.0, 1.0], [np.nan, 0.0, 1.0]])
    out = F.softmax(Tensor.from_data(x, device, dtype), 1)
    expected = np.array([[0.0, 0.5, 0.5], [np.nan, np.nan, np.nan], [np.nan, np.nan, np.nan]])
    assert_close(out, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_softmax_on_large_odd_shape(device, dtype):
    x = sample((257, 1023), dtype, -8, 8)
    out = F.softmax(Tensor.from_numpy(x, device), -1)
    assert_close(out, reference.softmax(x, -1), dtype)
