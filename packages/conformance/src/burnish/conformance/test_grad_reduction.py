"""Gradients of reductions, scans and sorts (autodiff backends).

Ties follow PyTorch: ``max`` and ``min`` (whole tensor, along a dim or several) share the
gradient evenly among the tied extremes, as ``amax``/``amin`` and ``max()`` do;
``max_with_indices`` sends it all to the element its index names. Products are exact with zeros
in the input, where dividing the product by the element would give NaN.
"""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float64
from burnish.conformance.gradcheck import assert_gradient, check_gradients, gradient
from burnish.conformance.samples import rng, sample

# Gradients are float64 where the device has it, else float32 (WebGPU), checked against
# finite differences in float64 (see burnish.conformance.gradcheck).
pytestmark = pytest.mark.requires_autodiff

SHAPE = (2, 3, 4)


def distinct(shape, key=0):
    """Values at least 0.1 apart (a shuffled range): no ties within reach of the differences."""
    n = int(np.prod(shape))
    order = rng("distinct", tuple(shape), key).permutation(n)
    return (order * 0.1 - n * 0.05).reshape(shape).astype(np.float64)


REDUCTIONS = {
    "sum": lambda x, dim, keep: x.sum(dim, keep),
    "mean": lambda x, dim, keep: x.mean(dim, keep),
    "prod": lambda x, dim, keep: x.prod(dim, keep),
    "var": lambda x, dim, keep: x.var(dim, keepdim=keep),
    "var_population": lambda x, dim, keep: x.var(dim, 0, keep),
    "std": lambda x, dim, keep: x.std(dim, keepdim=keep),
    "max": lambda x, dim, keep: x.max(dim, keep),
    "min": lambda x, dim, keep: x.min(dim, keep),
}
DIMS = [None, 0, 1, -1, (0, 2)]


@pytest.mark.parametrize("keepdim", [False, True], ids=["drop", "keepdim"])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction(name, dim, keepdim, device):
    x = distinct(SHAPE) if name in ("max", "min") else sample(SHAPE, float64, 0.5, 1.5)
    check_gradients(lambda t: REDUCTIONS[name](t, dim, keepdim), x, device=device,
                    key=(name, dim, keepdim))


def test_keepdim_reductions_by_hand(device, grad_dtype):
    x = Tensor.from_data(sample((2, 3), float64), device, grad_dtype).require_grad()
    w = np.array([[1.0], [-2.0]])
    grads = (x.sum(1, keepdim=True) * Tensor.from_data(w, device, grad_dtype)).backward()
    np.testing.assert_array_equal(gradient(x, grads), np.repeat(w, 3, axis=1))
    grads = (x.mean(1, keepdim=True) * Tensor.from_data(w, device, grad_dtype)).backward()
    assert_gradient(x, grads, np.repeat(w, 3, axis=1) / 3)
    grads = (x.sum((0, 1), keepdim=True) * 5.0).backward()
    np.testing.assert_array_equal(gradient(x, grads), np.full((2, 3), 5.0))


def test_max_ties_share_the_gradient_evenly(device, grad_dtype):
    # PyTorch 2.14's amax/amin and max()/min(): each tied extreme gets an equal share.
    x = Tensor.from_data([[1.0, 3.0, 3.0, 2.0], [4.0, 4.0, 4.0, 0.0]], device,
                         grad_dtype).require_grad()
    third = 1.0 / 3.0
    grads = x.max().backward()
    assert_gradient(x, grads, [[0, 0, 0, 0], [third, third, third, 0]])
    grads = x.max(1).backward()
    assert_gradient(x, grads, [[0, 0.5, 0.5, 0], [third, third, third, 0]])
    grads = (x.max(1, keepdim=True) * Tensor.from_data([[2.0], [3.0]], device, grad_dtype)
             ).backward()
    assert_gradient(x, grads, [[0, 1, 1, 0], [1, 1, 1, 0]])
    y = Tensor.from_data([[2.0, 1.0, 1.0]], device, grad_dtype).require_grad()
    grads = y.min(1).backward()
    assert_gradient(y, grads, [[0, 0.5, 0.5]])
    grads = y.min().backward()
    assert_gradient(y, grads, [[0, 0.5, 0.5]])


def test_max_over_several_dims_shares_ties_across_them(device, grad_dtype):
    # One share per tied element of the whole reduced slice (PyTorch's amax((0, 2))), not a
    # split along one dim and then the next.
    x = Tensor.from_data([[[2.0, 2.0], [0.0, 2.0]], [[2.0, 0.0], [2.0, 1.0]]], device,
                         grad_dtype).require_grad()
    third = 1.0 / 3.0
    expected = [[[third, third], [0, 0.5]], [[third, 0], [0.5, 0]]]
    assert_gradient(x, x.max((0, 2)).backward(), expected)
    assert_gradient(x, x.max((2, 0), keepdim=True).backward(), expected)
    assert_gradient(x, (-x).min((0, 2)).backward(), -np.array(expected))


def test_max_with_indices_sends_ties_to_the_index(device, grad_dtype):
    x = Tensor.from_data([[1.0, 3.0, 3.0, 2.0], [4.0, 4.0, 4.0, 0.0]], device,
                         grad_dtype).require_grad()
    values, indices = x.max_with_indices(1)
    grads = values.backward()
    expected = np.zeros((2, 4))
    expected[np.arange(2), indices.to_numpy()] = 1.0
    np.testing.assert_array_equal(gradient(x, grads), expected)
    y = Tensor.from_data([[2.0, 1.0, 1.0]], device, grad_dtype).require_grad()
    values, indices = y.min_with_indices(1)
    expected = np.zeros((1, 3))
    expected[0, indices.to_numpy()] = 1.0
    np.testing.assert_array_equal(gradient(y, values.backward()), expected)


@pytest.mark.parametrize("op", ["max_with_indices", "min_with_indices"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_with_indices(op, dim, device):
    check_gradients(lambda t: getattr(t, op)(dim)[0], distinct(SHAPE), device=device)


def test_prod_with_zeros_by_hand(device, grad_dtype):
    x = Tensor.from_data([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]], device,
                         grad_dtype).require_grad()
    grads = x.prod(1).backward()
    np.testing.assert_array_equal(gradient(x, grads), [[0, 6, 0], [0, 0, 0], [8, 4, 2]])
    grads = x.prod().backward()
    np.testing.assert_array_equal(gradient(x, grads), np.zeros((3, 3)))
    check_gradients(lambda t: t.prod(1), [[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.5, -2.0, 4.0]],
                    device=device)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dim, device):
    check_gradients(lambda t: t.cumsum(dim), sample(SHAPE, float64), device=device, key=dim)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod(dim, device):
    check_gradients(lambda t: t.cumprod(dim), sample(SHAPE, float64, 0.5, 1.5), device=device,
                    key=dim)


def test_cumprod_with_zeros(device):
    # A polynomial in every element, so finite differences are exact enough at the zeros too.
    x = [[2.0, 0.0, 3.0, 0.5, 0.0, 2.0], [0.0, 1.5, -2.0, 0.7, 1.1, 3.0]]
    check_gradients(lambda t: t.cumprod(1), x, device=device)
    check_gradients(lambda t: t.cumprod(0), np.transpose(x), device=device)


@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
@pytest.mark.parametrize("dim", [0, -1])
def test_sort(dim, descending, device):
    x = distinct(SHAPE)
    check_gradients(lambda t: t.sort(dim, descending), x, device=device)
    check_gradients(lambda t: t.sort_with_indices(dim, descending)[0], x, device=device)


@pytest.mark.parametrize("k", [1, 3])
def test_topk(k, device):
    x = distinct(SHAPE)
    check_gradients(lambda t: t.topk(k, -1), x, device=device)
    check_gradients(lambda t: t.topk_with_indices(k, 1)[0], x, device=device)


def test_sort_ties_follow_the_indices(device, grad_dtype):
    x = Tensor.from_data([3.0, 1.0, 3.0, 2.0], device, grad_dtype).require_grad()
    values, indices = x.sort_with_indices(descending=True)
    weights = Tensor.from_data([10.0, 20.0, 30.0, 40.0], device, grad_dtype)
    grads = (values * weights).backward()
    expected = np.zeros(4)
    expected[indices.to_numpy()] = [10.0, 20.0, 30.0, 40.0]
    np.testing.assert_array_equal(gradient(x, grads), expected)
