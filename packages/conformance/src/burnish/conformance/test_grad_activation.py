"""Gradients of the activations (autodiff backends)."""

from __future__ import annotations

import numpy as np
import pytest

import burnish.functional as F
from burnish import float64
from burnish.conformance.gradcheck import check_gradients
from burnish.conformance.samples import sample

# Gradients are float64 where the device has it, else float32 (WebGPU), checked against
# finite differences in float64 (see burnish.conformance.gradcheck).
pytestmark = pytest.mark.requires_autodiff

X = sample((3, 4), float64, -3.0, 3.0)
#: Inputs of relu kept away from its kink at 0.
X_AWAY = np.where(np.abs(X) < 0.1, X + 0.2, X)

ACTIVATIONS = {
    "relu": (F.relu, X_AWAY),
    "gelu": (F.gelu, X),
    "sigmoid": (F.sigmoid, X),
    "log_sigmoid": (F.log_sigmoid, X),
    "log_sigmoid_large": (F.log_sigmoid, X * 12.0),
    "silu": (F.silu, X),
    "tanh": (F.tanh, X),
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
