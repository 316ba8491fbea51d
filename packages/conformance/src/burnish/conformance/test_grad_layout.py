"""Gradients of reshapes, permutations, indexing, gather/scatter and joins (autodiff backends)."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Tensor, float64
from burnish.conformance.gradcheck import check_gradients, gradient
from burnish.conformance.samples import sample

# Gradients are float64 where the device has it, else float32 (WebGPU), checked against
# finite differences in float64 (see burnish.conformance.gradcheck).
pytestmark = pytest.mark.requires_autodiff

X = sample((2, 3, 4), float64)


def _set(x, index, value):
    x = x * 1.0  # a copy of the graph's value, so the leaf itself is not rebound
    x[index] = value
    return x


LAYOUT = {
    "reshape": lambda x: x.reshape([4, -1]),
    "flatten": lambda x: x.flatten(1),
    "squeeze_unsqueeze": lambda x: x.unsqueeze(1).unsqueeze(-1).squeeze(),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(),
    "swap_dims": lambda x: x.swap_dims(0, 2),
    "expand": lambda x: x.unsqueeze(0).expand([3, 2, 3, 4]),
    "expand_size_one": lambda x: x[:, :1].expand([2, 5, 4]),
    "flip": lambda x: x.flip([0, 2]),
    "repeat": lambda x: x.repeat([2, 1, 3]),
    "repeat_dim": lambda x: x.repeat_dim(1, 3),
    "slice": lambda x: x.slice([slice(0, 2), (1, 3)]),
    "slice_step": lambda x: x[:, ::2, 1::2],
    "narrow": lambda x: x.narrow(2, 1, 2),
    "index_int": lambda x: x[1, :, 2],
    "index_ellipsis_none": lambda x: x[..., None, 1:3],
    "index_tensor": lambda x: x[:, burnish.Tensor.from_data([2, 0, 2], x.device)],
    "setitem": lambda x: _set(x, (0, slice(1, 3)), 5.0),
    "chunk": lambda x: x.chunk(2, 2)[1] * x.chunk(2, 2)[0],
    "split": lambda x: burnish.cat(x.split([1, 2], 1)[::-1], 1),
    "split_some_pieces": lambda x: (lambda p: p[0] * p[2] + p[2])(x.split([1, 0, 1, 1], 1)),
    "unbind_like": lambda x: burnish.stack(list(x), 2),
    "cat": lambda x: burnish.cat([x, x * 2.0, x[:, :1]], 1),
    "stack": lambda x: burnish.stack([x, x.exp()], 1),
    "T": lambda x: x[0].T,
}


@pytest.mark.parametrize("name", list(LAYOUT))
def test_layout(name, device):
    check_gradients(LAYOUT[name], X, device=device, key=name)


def test_setitem_value(device):
    def fn(x, v):
        x = x * 1.0
        x[0, 1:3] = v
        return x

    check_gradients(fn, X, sample((2, 4), float64, key=1), device=device)


def test_slice_assign(device):
    check_gradients(lambda x, v: x.slice_assign([slice(0, 2), slice(1, 3, 1)], v), X,
                    sample((2, 2, 4), float64, key=1), device=device)
    check_gradients(lambda x, v: x.slice_assign([slice(None), slice(0, 3, 2)], v), X,
                    sample((2, 1, 4), float64, key=2), device=device)


def test_cat_of_tracked_and_constant(device):
    # Made on the input's device in its dtype: float32 gradient checks evaluate the function on
    # the reference backend too (see gradcheck).
    constant = sample((2, 2, 4), float64, key=3)
    check_gradients(lambda x: burnish.cat([Tensor.from_data(constant, x.device, x.dtype), x], 1),
                    X, device=device)


INDICES = np.array([[[0, 2, 1, 1], [2, 2, 0, 1]], [[1, 0, 0, 2], [0, 1, 2, 2]]])


def test_gather(device):
    check_gradients(lambda x, i: x.gather(1, i), X, INDICES, device=device)
    # Indices smaller than the input in the other dims, repeated indices.
    check_gradients(lambda x, i: x.gather(2, i), X, np.array([[[3, 3], [0, 1]]]), device=device)


def test_scatter_add(device):
    values = sample(INDICES.shape, float64, key=4)
    check_gradients(lambda x, i, v: x.scatter_add(1, i, v), X, INDICES, values, device=device)


def test_select(device):
    check_gradients(lambda x, i: x.select(2, i), X, np.array([3, 0, 3, 1, 1]), device=device)


def test_select_add(device):
    values = sample((2, 3, 3), float64, key=5)
    check_gradients(lambda x, i, v: x.select_add(2, i, v), X, np.array([1, 3, 1]), values,
                    device=device)


def test_gather_repeated_indices_by_hand(device, grad_dtype):
    x = Tensor.from_data([1.0, 2.0, 3.0], device, grad_dtype).require_grad()
    grads = x.gather(0, Tensor.from_data([2, 2, 0, 2], device)).backward()
    np.testing.assert_array_equal(gradient(x, grads), [1.0, 0.0, 3.0])
