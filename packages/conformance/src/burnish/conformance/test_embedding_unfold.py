"""Embedding lookups and unfold (sliding blocks as columns)."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float32, int32, int64
from burnish import functional as F
from burnish.conformance import reference
from burnish.conformance.compare import assert_equal
from burnish.conformance.samples import FLOATS, INTS, LAYOUTS, ids, laid_out, sample

INDEX_SHAPES = [(5,), (2, 3), (2, 0), (), (1, 2, 3)]


@pytest.mark.parametrize("index_shape", INDEX_SHAPES, ids=ids(INDEX_SHAPES))
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.requires_dtype(int64)
def test_embedding(device, dtype, index_shape):
    weights = sample((7, 4), dtype)
    indices = sample(index_shape, int64, 0, 6, key=1)
    out = F.embedding(Tensor.from_numpy(weights, device), Tensor.from_numpy(indices, device))
    assert_equal(out, weights[indices], dtype)


@pytest.mark.parametrize("index_dtype", INTS, ids=ids(INTS))
@pytest.mark.requires_dtype(float32, int64)
def test_embedding_accepts_any_int_indices(device, index_dtype):
    weights = sample((5, 3), float32)
    indices = np.array([[4, 0], [0, 2]], dtype=index_dtype.numpy)
    out = F.embedding(Tensor.from_numpy(weights, device), Tensor.from_numpy(indices, device))
    assert_equal(out, weights[indices.astype(np.int64)], float32)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.requires_dtype(float32, int64)
def test_embedding_non_contiguous(device, layout):
    weights, indices = sample((6, 5), float32), sample((3, 4), int64, 0, 5, key=1)
    out = F.embedding(laid_out(weights, device, float32, layout),
                      laid_out(indices, device, int64, layout))
    assert_equal(out, weights[indices], float32)


@pytest.mark.requires_dtype(float32, int32, int64)
def test_embedding_large_table(device):
    weights = sample((1031, 17), float32)
    indices = sample((3, 257), int32, 0, 1030, key=1)
    out = F.embedding(Tensor.from_numpy(weights, device), Tensor.from_numpy(indices, device))
    assert_equal(out, weights[indices], float32)


# (input height and width, kernel, stride, padding, dilation)
UNFOLDS = [
    ((4, 4), (2, 2), (1, 1), (0, 0), (1, 1)),
    ((5, 6), (3, 2), (2, 1), (1, 0), (1, 1)),
    ((7, 7), (3, 3), (2, 2), (1, 1), (2, 2)),
    ((3, 5), (1, 1), (1, 2), (0, 0), (1, 1)),
    ((6, 5), (2, 3), (3, 2), (2, 1), (1, 2)),
    ((4, 4), (4, 4), (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("case", UNFOLDS, ids=["-".join(ids(c)) for c in UNFOLDS])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_unfold(device, dtype, case):
    size, kernel, stride, padding, dilation = case
    x = sample((2, 3, *size), dtype)
    out = F.unfold(Tensor.from_numpy(x, device), kernel, stride, padding, dilation)
    assert_equal(out, reference.unfold(x, kernel, stride, padding, dilation), dtype)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_unfold_non_contiguous(device, dtype, layout):
    x = sample((2, 2, 5, 6), dtype)
    out = F.unfold(laid_out(x, device, dtype, layout), 3, 2, 1)
    assert_equal(out, reference.unfold(x, (3, 3), (2, 2), (1, 1), (1, 1)), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_unfold_keeps_nan_and_inf_in_place(device, dtype):
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    x[0, 0, 1, 2], x[0, 0, 3, 0] = np.nan, np.inf
    out = F.unfold(Tensor.from_data(x, device, dtype), 2, 2)
    assert_equal(out, reference.unfold(x, (2, 2), (2, 2), (0, 0), (1, 1)), dtype)
