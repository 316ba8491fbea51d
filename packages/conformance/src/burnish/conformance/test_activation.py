"""Activations: relu, gelu, sigmoid, log_sigmoid, silu, tanh, hard_sigmoid, hard_swish, softmax
and log_softmax, stable
at large magnitudes; softmax along any dim of any layout, long or empty, and on special rows."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float32
from burnish import functional as F
from burnish.conformance import reference
from burnish.conformance.compare import assert_close
from burnish.conformance.samples import FLOATS, INTS, LAYOUTS, ids, laid_out, sample
from burnish.tensor_data import tolerance

ELEMENTWISE = {
    "relu": lambda v: np.maximum(v, 0.0),
    "gelu": reference.gelu,
    "sigmoid": reference.sigmoid,
    "log_sigmoid": reference.log_sigmoid,
    "silu": lambda v: v * reference.sigmoid(v),
    "tanh": np.tanh,
    "hard_sigmoid": lambda v: np.clip(v * 0.2 + 0.5, 0.0, 1.0),
    "hard_swish": lambda v: v * np.clip(v + 3.0, 0.0, 6.0) / 6.0,
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


@pytest.mark.parametrize("alpha_beta", [(1.0 / 6.0, 0.5), (-0.5, 0.25), (2.0, 0.0)],
                         ids=["pytorch", "decreasing", "steep"])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_hard_sigmoid_slope_and_offset(device, dtype, alpha_beta):
    # The slope and offset are the op's arguments (ONNX's HardSigmoid and the LSTM/GRU
    # activations pass theirs), not constants of its kernel; a negative slope flips the ramp.
    alpha, beta = alpha_beta
    x = np.concatenate([sample((3, 5), dtype, -6, 6).ravel(), SPECIALS])
    out = F.hard_sigmoid(Tensor.from_data(x, device, dtype), alpha, beta)
    with np.errstate(all="ignore"):
        expected = np.clip(x.astype(dtype.numpy).astype(np.float64) * alpha + beta, 0.0, 1.0)
    assert_close(out, expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_sigmoid_family_stable_at_large_magnitudes(device, dtype):
    x = np.array([-80.0, -30.0, 30.0, 80.0])
    tensor = Tensor.from_data(x, device, dtype)
    assert_close(F.log_sigmoid(tensor), reference.log_sigmoid(x), dtype)
    assert_close(F.sigmoid(tensor), reference.sigmoid(x), dtype)


@pytest.mark.requires_dtype(float32)
@pytest.mark.parametrize("dtype", INTS, ids=ids(INTS))
@pytest.mark.parametrize("name", ["relu", "gelu", "sigmoid", "log_sigmoid", "hard_sigmoid",
                                  "hard_swish"])
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


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_every_layout_and_dim(device, name, dtype, layout, dim):
    # First, middle and last dims of views: backends that read rows through strides (one kernel
    # per row on burnish.jit) walk each of them differently.
    x = sample((3, 4, 5), dtype, -5, 5, key=dim)
    out = getattr(F, name)(laid_out(x, device, dtype, layout), dim)
    assert_close(out, getattr(reference, name)(x, dim), dtype)


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_of_broadcast_input(device, name, dim):
    # Stride 0 along the softmax dim, and along the other dim.
    row = sample((1, 5), float32, -5, 5)
    expanded = Tensor.from_data(row, device, float32).expand((4, 5))
    out = getattr(F, name)(expanded, dim)
    assert_close(out, getattr(reference, name)(np.broadcast_to(row, (4, 5)), dim), float32)


@pytest.mark.parametrize("shape_and_dim", [((3, 1500), 1), ((1100, 2), 0), ((2, 1024), 1),
                                           ((1025, 3), 0)], ids=lambda v: f"{v[0]}-dim{v[1]}")
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_long_dim(device, name, dtype, shape_and_dim):
    # Around burnish.jit's bound on a row for its one-kernel form (1024 elements): longer rows
    # take the protocol's composition through reductions, and both must agree with NumPy.
    shape, dim = shape_and_dim
    x = sample(shape, dtype, -8, 8)
    x[(0,) * len(shape)] = 40.0  # one dominant element: the max shift matters
    x = x.astype(dtype.numpy)
    out = getattr(F, name)(laid_out(x, device, dtype, "permuted"), dim)
    expected = getattr(reference, name)(x, dim)
    rtol, atol = tolerance(dtype)
    # Sums of many terms round more than one element: a looser absolute tolerance for softmax's
    # many small values would hide nothing, log_softmax's are all of order 10.
    assert_close(out, expected, dtype, atol=atol, rtol=rtol * 4)


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


#: Rows of special values, and what softmax and log_softmax give for each (PyTorch's answers):
#: -inf is an element of weight 0; +inf, NaN, and rows of -inf only (inf - inf) give NaN rows.
SPECIAL_ROWS = np.array([
    [-np.inf, 0.0, 0.0, -np.inf],
    [-np.inf, -np.inf, 5.0, -np.inf],
    [np.inf, 0.0, 1.0, 2.0],
    [1.0, np.nan, 0.0, 2.0],
    [-np.inf, -np.inf, -np.inf, -np.inf],
    [np.inf, np.inf, 0.0, 0.0],
    [2.0, 2.0, 2.0, 2.0],
])
_NAN_ROW = [np.nan] * 4
SPECIAL_EXPECTED = {
    "softmax": [[0.0, 0.5, 0.5, 0.0], [0.0, 0.0, 1.0, 0.0], _NAN_ROW, _NAN_ROW, _NAN_ROW,
                _NAN_ROW, [0.25] * 4],
    "log_softmax": [[-np.inf, -np.log(2), -np.log(2), -np.inf], [-np.inf, -np.inf, 0.0, -np.inf],
                    _NAN_ROW, _NAN_ROW, _NAN_ROW, _NAN_ROW, [-np.log(4)] * 4],
}


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_special_rows(device, name, dtype, dim):
    # Each row alone decides its result (one row's NaN must not leak into the others); dim 0
    # reads the same rows as columns of the transpose.
    x, expected = SPECIAL_ROWS, np.array(SPECIAL_EXPECTED[name])
    if dim == 0:
        x, expected = x.T, expected.T
    out = getattr(F, name)(Tensor.from_data(np.ascontiguousarray(x), device, dtype), dim)
    assert_close(out, expected, dtype)


#: The largest finite value of each float dtype (NumPy's finfo does not know bfloat16).
LARGEST = {"float64": 1.7976931348623157e308, "float32": 3.4028234663852886e38,
           "float16": 65504.0, "bfloat16": 3.3895313892515355e38}


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_near_the_dtypes_largest_value(device, name, dtype):
    # exp of any of these overflows, and so would x + max: only x - max is ever representable.
    big = LARGEST[dtype.name] * 0.4
    x = np.array([[big, -big, 0.0, big], [-big, -big, -big * 0.5, -big]])
    x = x.astype(dtype.numpy).astype(np.float64)
    out = getattr(F, name)(Tensor.from_data(x, device, dtype), 1)
    assert_close(out, getattr(reference, name)(x, 1), dtype)


@pytest.mark.parametrize("shape_and_dim", [((3, 0, 4), 1), ((0, 5), 1), ((2, 3, 0), 0)],
                         ids=lambda v: f"{v[0]}-dim{v[1]}")
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_of_empty_tensor(device, name, dtype, shape_and_dim):
    shape, dim = shape_and_dim
    out = getattr(F, name)(Tensor.from_data(np.zeros(shape), device, dtype), dim)
    assert_close(out, np.zeros(shape), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_softmax_on_large_odd_shape(device, dtype):
    x = sample((257, 1023), dtype, -8, 8)
    out = F.softmax(Tensor.from_numpy(x, device), -1)
    assert_close(out, reference.softmax(x, -1), dtype)
