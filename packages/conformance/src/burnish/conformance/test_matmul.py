"""Matrix products: 2-d, vectors, broadcast batches, empty inner and outer dims, odd sizes."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float32, int64
from burnish.conformance.compare import accumulated_atol, assert_close, assert_equal
from burnish.conformance.samples import FLOATS, LAYOUTS, NUMERIC, ids, laid_out, sample

SHAPES = [
    ((2, 3), (3, 4)),
    ((1, 1), (1, 1)),
    ((5,), (5, 3)),
    ((4, 5), (5,)),
    ((6,), (6,)),
    ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((0, 3), (3, 4)),
    ((2, 0), (0, 3)),
    ((3, 7), (7, 0)),
    ((2, 0, 3), (3, 2)),
]


def check(out: Tensor, a: np.ndarray, b: np.ndarray, dtype) -> None:
    if dtype.is_float:
        wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
        magnitude = np.abs(wide_a) @ np.abs(wide_b)
        assert_close(out, wide_a @ wide_b, dtype, atol=accumulated_atol(dtype, magnitude))
    else:
        assert_equal(out, (a.astype(np.int64) @ b.astype(np.int64)).astype(dtype.numpy), dtype)


def _operand(shape, dtype, key):
    # Small ints keep every dot product inside int8.
    return sample(shape, dtype, -3, 3, key=key) if dtype.is_int else sample(shape, dtype, key=key)


@pytest.mark.parametrize(("lhs", "rhs"), SHAPES, ids=[f"{ids(p)[0]}@{ids(p)[1]}" for p in SHAPES])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_matmul(device, dtype, lhs, rhs):
    a, b = _operand(lhs, dtype, 0), _operand(rhs, dtype, 1)
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
    check(x @ y, a, b, dtype)
    check(x.matmul(y), a, b, dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_matmul_non_contiguous(device, dtype, layout):
    a, b = _operand((2, 3, 5), dtype, 0), _operand((2, 5, 4), dtype, 1)
    out = laid_out(a, device, dtype, layout) @ laid_out(b, device, dtype, layout)
    check(out, a, b, dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=ids(NUMERIC))
def test_matmul_transposed_and_expanded(device, dtype):
    a, b = _operand((5, 3), dtype, 0), _operand((4, 5), dtype, 1)
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
    check(x.T @ y.T, a.T, b.T, dtype)
    batch = y.T.unsqueeze(0).expand((3, 5, 4))
    check(x.T @ batch, a.T, np.broadcast_to(b.T, (3, 5, 4)), dtype)


@pytest.mark.parametrize(("m", "k", "n"), [(257, 129, 263), (1, 1023, 1), (31, 1, 37)])
@pytest.mark.parametrize("dtype", [*FLOATS, int64], ids=ids([*FLOATS, int64]))
def test_matmul_odd_sizes(device, dtype, m, k, n):
    a, b = _operand((m, k), dtype, 0), _operand((k, n), dtype, 1)
    check(Tensor.from_numpy(a, device) @ Tensor.from_numpy(b, device), a, b, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_matmul_propagates_nan_and_inf(device, dtype):
    a = np.array([[1.0, np.nan], [1.0, 2.0], [np.inf, 1.0]])
    b = np.array([[1.0, 0.5], [2.0, -1.0]])
    out = Tensor.from_data(a, device, dtype) @ Tensor.from_data(b, device, dtype)
    assert_equal(out, a @ b, dtype)


@pytest.mark.requires_dtype(int64, float32)
def test_matmul_promotes_int_with_float(device):
    a, b = sample((2, 3), int64, key=0), sample((3, 2), float32, key=1)
    out = Tensor.from_numpy(a, device) @ Tensor.from_numpy(b, device)
    check(out, a.astype(np.float32), b, float32)
