"""Batch normalisation with the batch's statistics (``functional.batch_norm``, the op
``nn.BatchNorm`` trains with): values and statistics against NumPy over 2 to 5 dims, its
gradients on autodiff backends, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, bfloat16, float16, float32
from burnish import functional as F
from burnish.conformance.compare import assert_close
from burnish.conformance.gradcheck import check_gradients
from burnish.conformance.samples import FLOATS, ids, laid_out, sample
from burnish.errors import ShapeError
from burnish.tensor_data import tolerance

SHAPES = [(6, 3), (2, 3, 5), (2, 4, 3, 3), (2, 2, 2, 3, 2)]
NARROW = (float16, bfloat16)


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
    # 16-bit inputs are normalised in float32: the statistics come out float32.
    stats = float32 if dtype in NARROW else dtype
    rtol, atol = tolerance(dtype)  # the input's rounding bounds the statistics' error
    for got, want, kind in zip((y, mean, invstd), expected, (dtype, stats, stats)):
        assert_close(got, want, kind, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", NARROW, ids=ids(NARROW))
def test_batch_norm_of_16_bit_input_with_float32_parameters(device, dtype):
    """Mixed precision's form: 16-bit activations, float32 parameters; y of the input's dtype,
    the statistics float32."""
    x, weight, bias = _mixed(dtype)
    y, mean, invstd = F.batch_norm(Tensor.from_data(x, device, dtype),
                                   Tensor.from_data(weight, device, float32),
                                   Tensor.from_data(bias, device, float32), 1e-5,
                                   return_stats=True)
    assert (y.dtype, mean.dtype, invstd.dtype) == (dtype, float32, float32)
    expected = reference(*(v.astype(np.float64) for v in (x, weight, bias)), 1e-5)
    rtol, atol = tolerance(dtype)
    for got, want in zip((y, mean, invstd), expected):
        assert_close(got, want, rtol=rtol, atol=atol)


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("dtype", NARROW, ids=ids(NARROW))
def test_batch_norm_gradients_of_16_bit_input_with_float32_parameters(device, dtype):
    """The gradients of the mixed form, each in its tensor's dtype, against float64's."""
    x, weight, bias = _mixed(dtype)
    cotangent = sample(x.shape, dtype, -1, 1, key=3)
    xt = Tensor.from_data(x, device, dtype).require_grad()
    wt, bt = (Tensor.from_data(v, device, float32).require_grad() for v in (weight, bias))
    y = F.batch_norm(xt, wt, bt, 1e-5)
    grads = (y * Tensor.from_data(cotangent, device, dtype)).sum().backward()
    want = _reference_gradients(*(v.astype(np.float64) for v in (x, weight, cotangent)), 1e-5)
    for tensor, kind, expected in zip((xt, wt, bt), (dtype, float32, float32), want):
        got = tensor.grad(grads)
        assert got.dtype is kind
        scale = float(np.abs(expected).max())
        assert_close(got, expected, rtol=2e-2, atol=2e-2 * scale)


def _mixed(dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An input of ``dtype`` and float32 parameters for it."""
    return (sample((4, 3, 5, 5), dtype, -3, 5), sample((3,), float32, 0.5, 2, key=1),
            sample((3,), float32, -1, 1, key=2))


def _reference_gradients(x: np.ndarray, weight: np.ndarray, grad: np.ndarray, epsilon: float):
    """``(dx, dweight, dbias)`` of ``reference``'s ``y`` contracted with ``grad``."""
    dims = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    count = x.size // x.shape[1]
    mean = x.mean(dims, keepdims=True)
    invstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(dims, keepdims=True) + epsilon)
    xhat = (x - mean) * invstd
    dbias, dweight = grad.sum(dims), (grad * xhat).sum(dims)
    dx = weight.reshape(shape) * invstd * (grad - dbias.reshape(shape) / count
                                           - xhat * dweight.reshape(shape) / count)
    return dx, dweight, dbias


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
