"""Fixtures of the autodiff tests: the decorated ndarray backend and a small MLP on it."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish.autodiff import Autodiff


@pytest.fixture(scope="session")
def ad():
    """``Autodiff(ndarray)``."""
    return Autodiff(bn.backend("ndarray"))


class MLP:
    """A two-layer perceptron whose parameters are leaves of an autodiff backend."""

    def __init__(self, backend, sizes=(8, 16, 4), seed=0):
        rng = np.random.default_rng(seed)
        device = backend.default_device()
        self.params = [
            Tensor.from_data(rng.normal(0, 0.5 / np.sqrt(a), (a, b)), device,
                             "float32").require_grad()
            for a, b in zip(sizes[:-1], sizes[1:])
        ]
        self.device = device

    def loss(self, x: np.ndarray) -> Tensor:
        h = Tensor.from_data(x, self.device, "float32")
        for i, w in enumerate(self.params):
            h = h.matmul(w)
            if i < len(self.params) - 1:
                h = (h.tanh() * 2.0 + h.sigmoid()).exp() - 1.0
        return (h * h).mean()

    def step(self, grads, lr=1e-3) -> None:
        """Plain SGD: new leaves from the updated values (Tensor.from_inner), as an optimizer
        would make them."""
        self.params = [Tensor.from_inner(w.inner() - w.grad(grads) * lr).require_grad()
                       for w in self.params]


@pytest.fixture
def mlp():
    return MLP


@pytest.fixture
def batch():
    return np.random.default_rng(1).normal(0, 1, (32, 8))
