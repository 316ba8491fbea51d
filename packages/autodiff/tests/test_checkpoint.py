"""Balanced checkpointing: the same gradients as keeping everything, from fewer kept buffers."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish.autodiff import Autodiff
from burnish.autodiff.checkpoint import saved_buffers


@pytest.fixture
def balanced():
    return Autodiff(bn.backend("ndarray"), checkpointing="balanced")


def test_same_gradients_fewer_buffers(ad, balanced, mlp, batch):
    results = {}
    for backend in (ad, balanced):
        model = mlp(backend)
        loss = model.loss(batch)
        kept = saved_buffers(loss)
        grads = loss.backward()
        results[backend.checkpointing] = kept, [w.grad(grads).to_numpy() for w in model.params]
    (kept_all, plain), (kept_few, recomputed) = results["none"], results["balanced"]
    for a, b in zip(plain, recomputed):
        np.testing.assert_array_equal(a, b)
    assert kept_few < kept_all, (kept_few, kept_all)


def test_a_run_of_elementwise_ops_keeps_only_where_it_started(ad, balanced):
    counts = {}
    for backend in (ad, balanced):
        x = Tensor.from_data(np.linspace(0.1, 1, 6).reshape(2, 3), device=backend)
        w = Tensor.from_data(np.ones((3, 3)) * 0.5, device=backend).require_grad()
        h = x.matmul(w)
        y = ((h.exp() * 2.0).sin() * h).tanh().sigmoid()
        counts[backend.checkpointing] = saved_buffers(y)
    # Without checkpointing: x, the matmul's output and one buffer per op that needs its
    # input or output. Balanced: x and the matmul's output, from which the rest is recomputed.
    assert counts["balanced"] == 2 and counts["none"] > 4, counts


def test_recomputed_values_are_shared_within_one_backward(balanced):
    x = Tensor.from_data([0.5, 1.5], device=balanced, dtype="float64").require_grad()
    e = x.exp()
    y = (e * e * e).sum()  # three consumers of one recomputed output
    grads = y.backward()
    np.testing.assert_allclose(x.grad(grads).to_numpy(), 3 * np.exp(3 * np.array([0.5, 1.5])),
                               rtol=1e-12)


def test_a_long_recomputed_chain(balanced):
    # Every op of the chain is recomputed from the leaf, iteratively: no recursion limit.
    x = Tensor.from_data([0.5, 1.5], device=balanced, dtype="float64").require_grad()
    y = x
    for _ in range(3000):
        y = (y * 1.0001).exp().log()
    grads = (y * y).sum().backward()
    expected = 2 * np.array([0.5, 1.5]) * 1.0001 ** 6000
    np.testing.assert_allclose(x.grad(grads).to_numpy(), expected, rtol=1e-6)
