"""Gradients of the activations (autodiff backends); softmax's and log_softmax's also by hand,
for upstream gradients of any layout, long dims, empty dims and half floats."""

from __future__ import annotations

import numpy as np
import pytest

import burnish.functional as F
from burnish import Tensor, float64
from burnish.conformance import reference
from burnish.conformance.gradcheck import (
    FLOAT32_RTOL,
    assert_gradient,
    check_gradients,
    gradient,
    rounded,
)
from burnish.conformance.samples import FLOATS, ids, sample
from burnish.tensor_data import tolerance

# Gradients are float64 where the device has it, else float32 (WebGPU), checked against
# finite differences in float64 (see burnish.conformance.gradcheck).
pytestmark = pytest.mark.requires_autodiff

X = sample((3, 4), float64, -3.0, 3.0)
#: Inputs of relu kept away from its kink at 0.
X_AWAY = np.where(np.abs(X) < 0.1, X + 0.2, X)
#: Every piece of hard_sigmoid (kinks at +-2.5 for its default slope, +-3 for PyTorch's) and
#: hard_swish (kinks at +-3, decreasing on [-3, -1.5]), each input at least 0.2 from a kink.
X_HARD = np.array([[-5.0, -3.4, -2.8, -2.2], [-1.1, -0.3, 0.4, 1.7], [2.3, 2.7, 3.3, 5.5]])

ACTIVATIONS = {
    "relu": (F.relu, X_AWAY),
    "gelu": (F.gelu, X),
    "sigmoid": (F.sigmoid, X),
    "log_sigmoid": (F.log_sigmoid, X),
    "log_sigmoid_large": (F.log_sigmoid, X * 12.0),
    "silu": (F.silu, X),
    "tanh": (F.tanh, X),
    "hard_sigmoid": (F.hard_sigmoid, X_HARD),
    "hard_sigmoid_pytorch": (lambda x: F.hard_sigmoid(x, 1.0 / 6.0, 0.5), X_HARD),
    "hard_sigmoid_decreasing": (lambda x: F.hard_sigmoid(x, -0.5, 0.1), X_HARD),
    "hard_swish": (F.hard_swish, X_HARD),
    "softmax_last": (lambda x: F.softmax(x, -1), X),
    "softmax_first": (lambda x: F.softmax(x, 0), X),
    "log_softmax_last": (lambda x: F.log_softmax(x, -1), X),
    "log_softmax_first": (lambda x: F.log_softmax(x, 0), X),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation(name, device):
    fn, x = ACTIVATIONS[name]
    check_gradients(fn, x, device=device, key=name)


def test_softmax_of_3d_input(device):
    check_gradients(lambda x: F.softmax(x, 1), sample((2, 3, 4), float64), device=device)
    check_gradients(lambda x: F.log_softmax(x, 1) * 2.0, sample((2, 3, 4), float64),
                    device=device)


def _by_hand(name: str, x: np.ndarray, upstream: np.ndarray, dim: int
             ) -> tuple[np.ndarray, float]:
    """The gradient of ``sum(name(x, dim) * upstream)`` with respect to ``x``, in float64, and
    the largest magnitude of the terms it adds up (what its rounding error scales with: the
    result itself may cancel to 0, as softmax's does under an upstream gradient of ones)."""
    probs = reference.softmax(x, dim)
    mag = np.abs(upstream)
    if name == "softmax":
        expected = probs * (upstream - np.sum(upstream * probs, axis=dim, keepdims=True))
        terms = probs * (mag + np.sum(mag * probs, axis=dim, keepdims=True))
    else:
        expected = upstream - probs * np.sum(upstream, axis=dim, keepdims=True)
        terms = mag + probs * np.sum(mag, axis=dim, keepdims=True)
    return expected, float(np.max(terms, initial=0.0))


def _upstream_and_loss(out: Tensor, upstream: str, key: object) -> tuple[np.ndarray, Tensor]:
    """A loss whose gradient reaching ``out`` is an array of ``upstream``'s kind: ``weighted``
    (plain), ``transposed`` (a permuted view where the backend keeps views) or ``ones`` (the
    gradient of a sum: a broadcast where the backend keeps it)."""
    shape = tuple(out.shape)
    if upstream == "ones":
        return np.ones(shape), out.sum()
    weights = rounded(sample(shape, float64, -1.0, 1.0, key=key), out.dtype)
    if upstream == "weighted":
        return weights, (out * Tensor.from_data(weights, out.device, out.dtype)).sum()
    transposed = Tensor.from_data(np.ascontiguousarray(weights.T), out.device, out.dtype)
    return weights, (out.transpose() * transposed).sum()


@pytest.mark.parametrize("length", [7, 1500])  # 1500: past burnish.jit's one-kernel rows
@pytest.mark.parametrize("upstream", ["weighted", "transposed", "ones"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_gradient_by_hand(device, grad_dtype, name, dim, upstream, length):
    shape = (length, 3) if dim == 0 else (3, length)
    values = rounded(sample(shape, float64, -4.0, 4.0, key=(name, dim)), grad_dtype)
    x = Tensor.from_data(values, device, grad_dtype).require_grad()
    weights, loss = _upstream_and_loss(getattr(F, name)(x, dim), upstream, (name, dim))
    expected, magnitude = _by_hand(name, values, weights, dim)
    scale = 1e-12 if grad_dtype is float64 else FLOAT32_RTOL
    assert_gradient(x, loss.backward(), expected, rtol=1e-9, atol=scale * magnitude)


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_gradient_in_every_float_dtype(device, name, dtype, dim):
    # Half floats differentiate in float32 inside the kernel and round the gradient once.
    values = sample((5, 6), dtype, -3.0, 3.0).astype(np.float64)
    x = Tensor.from_data(values, device, dtype).require_grad()
    out = getattr(F, name)(x, dim)
    weights, loss = _upstream_and_loss(out, "weighted", dtype.name)
    got = gradient(x, loss.backward())
    expected, magnitude = _by_hand(name, values, weights, dim)
    rtol, atol = tolerance(dtype)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol + rtol * magnitude)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_gradient_of_empty_dim(device, grad_dtype, name):
    x = Tensor.from_data(np.zeros((2, 0)), device, grad_dtype).require_grad()
    grads = getattr(F, name)(x, 1).sum().backward()
    assert_gradient(x, grads, np.zeros((2, 0)))
