"""What gradients mean through the Tensor API (autodiff backends): leaves, detach, graphs that
backward frees, ops without a gradient, and ``Gradients`` objects."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import AutodiffError, DTypeError, Tensor, float64
from burnish.conformance.gradcheck import assert_gradient, grad_dtype, gradient
from burnish.conformance.samples import sample

# Gradients are float64 where the device has it, else float32 (WebGPU), checked against
# finite differences in float64 (see burnish.conformance.gradcheck).
pytestmark = pytest.mark.requires_autodiff


def leaf(device, shape=(2, 3), key=0):
    """A leaf of the gradient dtype (float64, else float32: see gradcheck)."""
    return Tensor.from_data(sample(shape, float64, key=key), device,
                            grad_dtype(device)).require_grad()


def test_grad_is_a_tensor_of_the_inner_backend(device, backend, grad_dtype):
    x = leaf(device)
    assert x.dtype is grad_dtype
    grads = (x * 2.0).backward()
    grad = x.grad(grads)
    assert grad.backend is backend.inner_backend
    assert grad.dtype is grad_dtype and list(grad.shape) == [2, 3]
    np.testing.assert_array_equal(grad.to_numpy(), np.full((2, 3), 2.0))
    assert not grad.is_require_grad()


def test_require_grad_marks_leaves(device, grad_dtype):
    x = Tensor.from_data(sample((2, 3), float64), device, grad_dtype)
    assert not x.is_require_grad()
    y = x.require_grad()
    assert y.is_require_grad() and y.require_grad() is y
    assert (y * 2.0).is_require_grad()
    assert not x.is_require_grad()  # tensors are values: x itself is unchanged
    assert y.set_require_grad(False).is_require_grad() is False
    with pytest.raises(AutodiffError, match="detach"):
        (y * 2.0).require_grad()
    with pytest.raises(DTypeError, match="float"):
        Tensor.from_data([1, 2], device).require_grad()


def test_detach_stops_the_gradient(device):
    x = leaf(device)
    grads = (x.detach() * x).backward()
    assert_gradient(x, grads, x.to_numpy())
    assert not x.detach().is_require_grad()


def test_a_leaf_that_nothing_reaches_has_no_gradient(device):
    x, y = leaf(device), leaf(device, key=1)
    grads = (x * 3.0).backward()
    assert y.grad(grads) is None
    assert (x * 3.0).grad(grads) is None  # not a leaf


def test_backward_of_an_untracked_tensor_gives_no_gradients(device, grad_dtype):
    x = Tensor.from_data(sample((2, 3), float64), device, grad_dtype)
    grads = (x * 2.0).backward()
    assert len(grads) == 0


def test_backward_of_int_and_bool_tensors_is_an_error(device):
    x = leaf(device)
    with pytest.raises(DTypeError, match="float"):
        x.argmax(1).backward()
    with pytest.raises(DTypeError, match="float"):
        (x > 0).backward()


def test_no_gradient_through_comparisons_indices_and_rounding(device):
    x = leaf(device)
    mask = (x > 0).float().cast(x.dtype)
    grads = (mask * x + x.argmax(1, keepdim=True).cast(x.dtype) + x.round()).backward()
    np.testing.assert_array_equal(gradient(x, grads), mask.to_numpy())
    grads = (x.int().cast(x.dtype) + x.sign() + x.floor() + x.ceil()).backward()
    assert len(grads) == 0


def test_backward_frees_the_graph(device):
    x = leaf(device)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(AutodiffError, match="backward"):
        y.backward()
    shared = x.exp()
    (shared * 2.0).sum().backward()
    with pytest.raises(AutodiffError, match="backward"):
        (shared * 3.0).sum().backward()


def test_leaves_outlive_backward(device):
    x = leaf(device)
    for scale in (1.0, 2.0, 3.0):
        grads = (x * scale).sum().backward()
        np.testing.assert_array_equal(gradient(x, grads), np.full((2, 3), scale))


def test_grad_remove(device):
    x = leaf(device)
    grads = (x * 2.0).backward()
    assert x.grad_remove(grads) is not None
    assert x.grad(grads) is None
    assert x.grad_remove(grads) is None


def test_merged_gradients_add_up(device):
    x, y = leaf(device), leaf(device, key=1)
    first = (x * 2.0).backward()
    second = (x * 3.0 + y).backward()
    merged = first.merge(second)
    np.testing.assert_array_equal(gradient(x, merged), np.full((2, 3), 5.0))
    np.testing.assert_array_equal(gradient(y, merged), np.ones((2, 3)))
    np.testing.assert_array_equal(gradient(x, first + second), np.full((2, 3), 5.0))
    np.testing.assert_array_equal(gradient(x, first), np.full((2, 3), 2.0))


def test_inner_and_from_inner(device, backend):
    x = leaf(device)
    inner = x.inner()
    assert inner.backend is backend.inner_backend
    np.testing.assert_array_equal(inner.to_numpy(), x.to_numpy())
    back = Tensor.from_inner(inner, backend)
    assert back.backend is backend and not back.is_require_grad()
    np.testing.assert_array_equal(back.to_numpy(), x.to_numpy())
