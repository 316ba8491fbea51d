"""Making tensors: from data, filled, ranges, identity, and the ``*_like`` forms."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, bool_, float32, int64
from burnish.conformance.compare import assert_close, assert_equal, host
from burnish.conformance.samples import ALL, FLOATS, NUMERIC, ids, sample

SHAPES = [(), (0,), (5,), (2, 3), (2, 0, 3), (3, 1, 2, 2)]
FILL = {"float": 2.5, "int": 7, "bool": True}


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
@pytest.mark.parametrize("op", ["zeros", "ones"])
def test_zeros_and_ones(device, op, dtype, shape):
    out = getattr(Tensor, op)(shape, device, dtype)
    assert out.device == device
    assert_equal(out, getattr(np, op)(shape, dtype=dtype.numpy), dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
def test_full(device, dtype, shape):
    value = FILL[dtype.kind.value]
    if dtype.is_int and dtype.signed:
        value = -value
    out = Tensor.full(shape, value, device, dtype)
    assert_equal(out, np.full(shape, value, dtype=dtype.numpy), dtype)


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
def test_empty_has_shape_and_dtype(device, dtype):
    out = Tensor.empty((3, 4), device, dtype)
    assert out.shape == (3, 4) and out.dtype is dtype and out.device == device
    host(out, (3, 4), dtype)  # the values are unspecified; their shape and dtype are not


@pytest.mark.requires_dtype(bool_, int64, float32)
@pytest.mark.parametrize(("value", "dtype"), [(True, bool_), (3, int64), (1.5, float32)],
                         ids=["bool", "int", "float"])
def test_full_infers_dtype_from_value(device, value, dtype):
    assert_equal(Tensor.full((2,), value, device), np.full((2,), value, dtype=dtype.numpy), dtype)


@pytest.mark.requires_dtype(float32)
def test_default_dtype_is_float32(device):
    for out in (Tensor.zeros((2,), device), Tensor.ones(2, device), Tensor.empty([1], device)):
        assert out.dtype is float32


@pytest.mark.requires_dtype(int64)
@pytest.mark.parametrize("shape", [(1023, 257), (7, 11, 13)], ids=ids([(1023, 257), (7, 11, 13)]))
def test_large_and_prime_shapes(device, shape):
    assert_equal(Tensor.full(shape, 3, device, int64), np.full(shape, 3, dtype=np.int64))


ARANGES = [(5,), (2, 9), (9, 2, -2), (-3, 4, 3), (4, 4), (4, 2), (0, 10, 4)]
# Unsigned dtypes only get the ranges without negative values.
ARANGE_CASES = [(dtype, args) for dtype in NUMERIC for args in ARANGES
                if dtype.signed or min(np.arange(*args), default=0) >= 0]


@pytest.mark.parametrize(("dtype", "args"), ARANGE_CASES,
                         ids=[f"{d}-{a}" for d, a in ARANGE_CASES])
def test_arange(device, dtype, args):
    expected = np.arange(*args)
    out = Tensor.arange(*args, device=device, dtype=dtype)
    assert_equal(out, expected.astype(dtype.numpy), dtype)


@pytest.mark.requires_dtype(int64, float32)
def test_arange_dtype_follows_bounds(device):
    assert Tensor.arange(4, device=device).dtype is int64
    out = Tensor.arange(0.0, 1.0, 0.25, device=device)
    assert_equal(out, np.array([0.0, 0.25, 0.5, 0.75]), float32)


@pytest.mark.requires_dtype(int64)
def test_arange_rejects_zero_step(device):
    with pytest.raises(ValueError, match="step"):
        Tensor.arange(0, 3, 0, device=device)


@pytest.mark.parametrize("steps", [0, 1, 2, 7])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_linspace(device, dtype, steps):
    out = Tensor.linspace(-1.0, 2.0, steps, device, dtype)
    assert_close(out, np.linspace(-1.0, 2.0, steps), dtype)


@pytest.mark.parametrize(("n", "m"), [(1, None), (3, None), (2, 4), (4, 2), (0, 3)])
@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
@pytest.mark.requires_dtype(int64, bool_)
def test_eye(device, dtype, n, m):
    assert_equal(Tensor.eye(n, m, device, dtype), np.eye(n, m, dtype=dtype.numpy), dtype)


NESTED = [
    ([[1.0, 2.0], [3.0, 4.5]], float32),
    ([1, -2, 3], int64),
    ([[True, False]], bool_),
    (2.5, float32),
    (7, int64),
    ([], float32),
    ([[], []], float32),
]


@pytest.mark.parametrize(("values", "dtype"), NESTED, ids=[repr(v) for v, _ in NESTED])
def test_from_nested_lists(device, values, dtype):
    out = Tensor.from_data(values, device)
    assert_equal(out, np.asarray(values, dtype=dtype.numpy), dtype)


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
def test_from_numpy_keeps_dtype(device, dtype):
    values = sample((3, 4), dtype)
    out = Tensor.from_numpy(values, device)
    assert_equal(out, values, dtype)


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
def test_from_numpy_non_contiguous(device, dtype):
    values = sample((4, 6), dtype)[::2, ::-1].T
    assert_equal(Tensor.from_numpy(values, device), values, dtype)


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
def test_from_data_converts_to_dtype(device, dtype):
    values = [[0, 1], [2, 3]]
    assert_equal(Tensor.from_data(values, device, dtype), np.array(values, dtype=dtype.numpy),
                 dtype)


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
def test_tensors_from_numpy_are_values(device, dtype):
    values = sample((4,), dtype)
    out = Tensor.from_numpy(values, device)
    expected = values.copy()
    result = out.slice_assign([slice(0, 2)], out.slice([slice(2, 4)]))
    assert_equal(out, expected)
    assert_equal(result, np.concatenate([expected[2:], expected[2:]]))


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
@pytest.mark.parametrize("op", ["zeros_like", "ones_like", "empty_like"])
def test_like_keeps_shape_dtype_device(device, dtype, op):
    base = Tensor.from_numpy(sample((2, 3), dtype), device)
    out = getattr(base, op)()
    assert (out.shape, out.dtype, out.device) == (base.shape, dtype, device)
    if op != "empty_like":
        assert_equal(out, getattr(np, op)(sample((2, 3), dtype)), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.requires_dtype(int64)
def test_like_with_other_dtype(device, dtype):
    base = Tensor.zeros((2, 2), device, int64)
    assert_equal(base.full_like(0.5, dtype), np.full((2, 2), 0.5), dtype)
    assert base.ones_like(dtype).dtype is dtype


def test_tensor_constructor_points_to_constructors():
    with pytest.raises(TypeError, match="from_data"):
        Tensor([1, 2])
