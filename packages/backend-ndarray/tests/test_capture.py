"""``burnish.capture`` on ndarray: replays of the recorded protocol calls give the eager results
bitwise, keep checking values, and draw fresh random numbers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import burnish as bn
import burnish.functional as F
from burnish import DivisionByZeroError, ShapeError, Tensor
from burnish.nn import CrossEntropyLoss, Linear, LinearConfig, Module
from burnish.optim import Adam, Sgd


class Mlp(Module):
    a: Linear
    b: Linear

    def forward(self, x):
        return self.b(F.relu(self.a(x)))


def mlp(device):
    bn.seed(0)
    return Mlp(LinearConfig(16, 32).init(device), LinearConfig(32, 4).init(device))


@pytest.mark.parametrize("optimizer", [lambda: Sgd(momentum=0.9), lambda: Adam(capturable=True)],
                         ids=["sgd", "adam"])
def test_a_training_step_replays_bitwise(optimizer):
    device = bn.backend("autodiff+ndarray").default_device()
    loss_fn = CrossEntropyLoss()

    def trainer():
        optim = optimizer()

        def step(model, x, y):
            loss = loss_fn(model(x), y)
            return optim.step(0.01, model, loss.backward()), loss.detach()

        return step

    eager_step, captured_step = trainer(), bn.capture(trainer(), strict=True)
    eager, captured = mlp(device), mlp(device)
    rng = np.random.default_rng(0)
    for _ in range(10):
        x = Tensor.from_data(rng.standard_normal((8, 16)).astype(np.float32), device=device)
        y = Tensor.from_data(rng.integers(0, 4, 8), device=device)
        eager, loss = eager_step(eager, x, y)
        captured, loss_captured = captured_step(captured, x, y)
        assert loss_captured.item() == loss.item()
    for p, q in zip(eager.params(), captured.params()):
        np.testing.assert_array_equal(q.val().to_numpy(), p.val().to_numpy())
    assert sum(s["replays"] for s in captured_step.stats()) >= 6


def test_value_checks_run_on_every_replay():
    device = bn.backend("ndarray").default_device()
    loss_fn = CrossEntropyLoss()
    captured = bn.capture(lambda scores, targets: loss_fn(scores, targets), strict=True)
    scores = Tensor.from_data(np.zeros((2, 3), np.float32), device=device)
    good = Tensor.from_data(np.array([0, 2]), device=device)
    for _ in range(4):
        captured(scores, good)
    assert captured.stats()[0]["replays"] == 1
    with pytest.raises(ShapeError, match="target 3 at index 1 is outside the classes"):
        captured(scores, Tensor.from_data(np.array([0, 3]), device=device))

    divide = bn.capture(lambda a, b: a // b, strict=True)
    a = Tensor.from_data(np.array([6, 4]), device=device)
    for _ in range(4):
        assert divide(a, Tensor.from_data(np.array([3, 2]), device=device)).tolist() == [2, 2]
    with pytest.raises(DivisionByZeroError, match="at index \\[1\\]"):
        divide(a, Tensor.from_data(np.array([3, 0]), device=device))


def test_random_draws_are_fresh_on_every_replay():
    device = bn.backend("ndarray").default_device()
    captured = bn.capture(lambda x: x + Tensor.random(x.shape, bn.Distribution.normal(),
                                                      device=device), strict=True)
    x = Tensor.zeros([64], device=device)
    draws = [captured(x).tolist() for _ in range(6)]
    assert captured.stats()[0]["replays"] == 3
    assert len({tuple(d) for d in draws}) == 6


def test_a_seed_computed_per_call_runs_eagerly():
    device = bn.backend("ndarray").default_device()
    count = iter(range(100))

    def step(x):
        bn.seed(next(count))
        return x + Tensor.random(x.shape, bn.Distribution.uniform(0, 1), device=device)

    captured = bn.capture(step)
    x = Tensor.zeros([4], device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [captured(x).tolist() for _ in range(5)]
    expected = []
    for seed in range(5):
        bn.seed(seed)
        expected.append((x + Tensor.random(x.shape, bn.Distribution.uniform(0, 1),
                                           device=device)).tolist())
    assert results == expected
    assert any("other values on each call" in str(w.message) for w in caught)


def test_ops_with_several_results_constants_and_data_made_inside_replay():
    """A pool's values and indices used at different points, an array held outside the
    function (reshaped: a tuple of ints beside an array), and data made inside."""
    device = bn.backend("autodiff+ndarray").default_device()
    held = Tensor.from_data(np.arange(16, dtype=np.float32), device=device)

    def step(x, constant=held):  # a default argument: state capture does not walk
        values, indices = F.max_pool2d_with_indices(x, 2)
        shift = Tensor.from_data(np.full((1, 1, 2, 2), 0.5, np.float32), device=device)
        total = values + shift + constant.reshape([1, 1, 4, 4])[:, :, :2, :2]
        return total * 2.0, indices

    captured = bn.capture(step, strict=True)
    rng = np.random.default_rng(3)
    for _ in range(6):
        x = Tensor.from_data(rng.standard_normal((1, 1, 4, 4)).astype(np.float32),
                             device=device)
        out, indices = captured(x)
        want, want_indices = step(x)
        np.testing.assert_array_equal(out.to_numpy(), want.to_numpy())
        np.testing.assert_array_equal(indices.to_numpy(), want_indices.to_numpy())
    assert captured.stats()[0]["replays"] == 3
