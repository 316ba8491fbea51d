"""The affine map of the last dim (``functional.linear``, ``nn.Linear``'s op): values against
NumPy over 2 to 4 dims and every input layout, with and without a bias, its gradients on
autodiff backends, and mixed dtypes (which take the product and an addition)."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float32, float64
from burnish import functional as F
from burnish.conformance.compare import assert_close
from burnish.conformance.gradcheck import check_gradients
from burnish.conformance.samples import FLOATS, ids, laid_out, sample

SHAPES = [(5, 3), (2, 3, 7), (2, 2, 3, 33)]
LAYOUTS = ["contiguous", "permuted", "strided"]


@pytest.mark.parametrize("biased", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_linear(device, dtype, shape, layout, biased):
    outputs = 6
    x = sample(shape, dtype, -2, 2)
    weight = sample((shape[-1], outputs), dtype, -1, 1, key=1)
    bias = sample((outputs,), dtype, -1, 1, key=2)
    y = F.linear(laid_out(x, device, dtype, layout), laid_out(weight, device, dtype, layout),
                 Tensor.from_data(bias, device, dtype) if biased else None)
    expected = x.astype(np.float64) @ weight.astype(np.float64)
    if biased:
        expected = expected + bias.astype(np.float64)
    assert y.dtype is dtype and tuple(y.shape) == (*shape[:-1], outputs)
    assert_close(y, expected, dtype)


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("shape", SHAPES[:2], ids=ids(SHAPES[:2]))
def test_linear_gradients(device, shape):
    def fn(x, weight, bias):
        y = F.linear(x, weight, bias)
        return y * y

    check_gradients(fn, sample(shape, float32, -1, 1), sample((shape[-1], 4), float32, -1, 1,
                    key=1), sample((4,), float32, -1, 1, key=2), device=device)


@pytest.mark.requires_dtype(float32)
@pytest.mark.requires_dtype(float64)
def test_linear_of_mixed_dtypes_promotes(device):
    x = sample((3, 4), float32, -1, 1)
    weight = sample((4, 2), float32, -1, 1, key=1)
    bias = sample((2,), float64, -1, 1, key=2)
    y = F.linear(Tensor.from_data(x, device, float32), Tensor.from_data(weight, device, float32),
                 Tensor.from_data(bias, device, float64))
    # The product in float32, its sum with the bias in float64.
    assert_close(y, x.astype(np.float64) @ weight.astype(np.float64) + bias, float64,
                 rtol=1e-5, atol=1e-6)
