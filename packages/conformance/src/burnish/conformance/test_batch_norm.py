"""Batch normalisation with the batch's statistics (``functional.batch_norm``, the op
``nn.BatchNorm`` trains with): values and statistics against NumPy over 2 to 5 dims, its
gradients on autodiff backends, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float32
from burnish import functional as F
from burnish.conformance.compare import assert_close
from burnish.conformance.gradcheck import check_gradients
from burnish.conformance.samples import FLOATS, ids, laid_out, sample
from burnish.errors import ShapeError

SHAPES = [(6, 3), (2, 3, 5), (2, 4, 3, 3), (2, 2, 2, 3, 2)]


def reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, epsilon: float):
    dims = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(dims, keepdims=True)
    invstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(dims, keepdims=True) + epsilon)
    y = (x - mean) * invstd * weight.reshape(shape) + bias.reshape(shape)
    return y, mean.reshape(-1), invstd.reshape(-1)


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_batch_norm(device, dtype, shape):
    x = sample(shape, dtype, -3, 5)
    weight = sample((shape[1],), dtype, 0.5, 2, key=1)
    bias = sample((shape[1],), dtype, -1, 1, key=2)
    y, mean, invstd = F.batch_norm(laid_out(x, device, dtype, "permuted"),
                                   Tensor.from_data(weight, device, dtype),
                                   Tensor.from_data(bias, device, dtype), 1e-5,
                                   return_stats=True)
    expected = reference(*(v.astype(np.float64) for v in (x, weight, bias)), 1e-5)
    for got, want in zip((y, mean, invstd), expected):
        assert got.dtype is dtype
        assert_close(got, want, dtype)


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("shape", SHAPES[1:3], ids=ids(SHAPES[1:3]))
def test_batch_norm_gradients(device, shape):
    def fn(x, weight, bias):
        y = F.batch_norm(x, weight, bias, 1e-3)
        return y * y  # a loss that is not a plain sum (whose gradient through y is zero)

    check_gradients(fn, sample(shape, float32, -2, 2), sample((shape[1],), float32, 0.5, 2,
                    key=1), sample((shape[1],), float32, -1, 1, key=2), device=device)


@pytest.mark.requires_dtype(float32)
def test_batch_norm_names_bad_operands(device):
    x = Tensor.zeros([2, 3, 4], device)
    with pytest.raises(ShapeError, match=r"weight must be \[3\]"):
        F.batch_norm(x, Tensor.ones([4], device), Tensor.zeros([3], device))
    with pytest.raises(ShapeError, match="needs a tensor of shape"):
        F.batch_norm(Tensor.zeros([3], device), Tensor.ones([3], device),
                     Tensor.zeros([3], device))
    with pytest.raises(ValueError, match="epsilon must be positive"):
        F.batch_norm(x, Tensor.ones([3], device), Tensor.zeros([3], device), 0.0)
