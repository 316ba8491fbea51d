"""Layer normalisation over the last dim (``functional.layer_norm``, ``nn.LayerNorm``'s op):
values against NumPy over 1 to 4 dims and every input layout, its gradients on autodiff
backends, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float32
from burnish import functional as F
from burnish.conformance.compare import assert_close
from burnish.conformance.gradcheck import check_gradients
from burnish.conformance.samples import FLOATS, ids, laid_out, sample
from burnish.errors import DTypeError, ShapeError

SHAPES = [(7,), (6, 3), (2, 3, 33), (2, 2, 3, 130)]
LAYOUTS = ["contiguous", "permuted", "strided"]


def reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, epsilon: float):
    mean = x.mean(-1, keepdims=True)
    invstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + epsilon)
    return (x - mean) * invstd * weight + bias


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_layer_norm(device, dtype, shape, layout):
    x = sample(shape, dtype, -3, 5)
    weight = sample(shape[-1:], dtype, 0.5, 2, key=1)
    bias = sample(shape[-1:], dtype, -1, 1, key=2)
    y = F.layer_norm(laid_out(x, device, dtype, layout), Tensor.from_data(weight, device, dtype),
                     Tensor.from_data(bias, device, dtype), 1e-5)
    assert y.dtype is dtype and tuple(y.shape) == shape
    assert_close(y, reference(*(v.astype(np.float64) for v in (x, weight, bias)), 1e-5), dtype)


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("shape", SHAPES[1:3], ids=ids(SHAPES[1:3]))
def test_layer_norm_gradients(device, shape):
    def fn(x, weight, bias):
        y = F.layer_norm(x, weight, bias, 1e-3)
        return y * y  # a loss that is not a plain sum (whose gradient through x is zero)

    check_gradients(fn, sample(shape, float32, -2, 2), sample(shape[-1:], float32, 0.5, 2,
                    key=1), sample(shape[-1:], float32, -1, 1, key=2), device=device)


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_layer_norm_gradients_in_every_float_dtype(device, dtype):
    """The gradients of x, weight and bias against the float64 reference's, each in its
    tensor's dtype (16-bit floats computed in float32, as the values)."""
    shape = (3, 2, 40)
    x = sample(shape, dtype, -3, 5)
    weight, bias = sample((40,), dtype, 0.5, 2, key=1), sample((40,), dtype, -1, 1, key=2)
    cotangent = sample(shape, dtype, -1, 1, key=3)
    tensors = [Tensor.from_data(v, device, dtype).require_grad() for v in (x, weight, bias)]
    y = F.layer_norm(*tensors, 1e-5)
    grads = (y * Tensor.from_data(cotangent, device, dtype)).sum().backward()
    x64, weight64, g64 = (v.astype(np.float64) for v in (x, weight, cotangent))
    mean = x64.mean(-1, keepdims=True)
    invstd = 1.0 / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    xhat = (x64 - mean) * invstd
    g = g64 * weight64
    want = (invstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True)),
            (g64 * xhat).sum((0, 1)), g64.sum((0, 1)))
    for tensor, expected in zip(tensors, want):
        got = tensor.grad(grads)
        assert got.dtype is dtype
        scale = float(np.abs(expected).max())
        rtol = 2e-2 if dtype.bits < 32 else 1e-4
        assert_close(got, expected, rtol=rtol, atol=rtol * scale)


@pytest.mark.requires_dtype(float32)
def test_layer_norm_names_bad_operands(device):
    x = Tensor.zeros([2, 3, 4], device)
    with pytest.raises(ShapeError, match=r"weight must be \[4\]"):
        F.layer_norm(x, Tensor.ones([3], device), Tensor.zeros([4], device))
    with pytest.raises(ShapeError, match=r"bias must be \[4\]"):
        F.layer_norm(x, Tensor.ones([4], device), Tensor.zeros([2, 4], device))
    with pytest.raises(DTypeError, match="layer_norm needs a float tensor"):
        F.layer_norm(Tensor.zeros([2, 4], device, "int32"), Tensor.ones([4], device),
                     Tensor.zeros([4], device))
