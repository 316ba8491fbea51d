"""Mixed precision with burnish.nn: the layers' and losses' dtypes under autocast, a small
model that trains under it as in float32, and GradScaler's skip, back-off and growth."""

from __future__ import annotations

import math

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor, nn, optim


class Mlp(nn.Module):
    layers: list

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _data(device):
    rng = np.random.default_rng(0)
    points = rng.uniform(-1, 1, size=(128, 2)).astype(np.float32)
    labels = ((points[:, 0] * points[:, 1]) > 0).astype(np.int64)
    return Tensor.from_data(points, device), Tensor.from_data(labels, device)


def _mlp(device):
    bn.seed(0)
    return Mlp([nn.LinearConfig(2, 32).init(device), nn.LayerNormConfig(32).init(device),
                nn.Relu(), nn.LinearConfig(32, 32).init(device), nn.Relu(),
                nn.LinearConfig(32, 2).init(device)])


def _train(device, dtype=None, scaler=None, steps=120):
    x, y = _data(device)
    model, adam, loss_fn = _mlp(device), optim.Adam(), nn.CrossEntropyLoss()
    for _ in range(steps):
        with bn.autocast(dtype or bn.bfloat16, enabled=dtype is not None):
            loss = loss_fn(model(x), y)
        assert loss.dtype is bn.float32
        if scaler is None:
            model = adam.step(0.02, model, loss.backward())
        else:
            model = scaler.step(adam, 0.02, model, scaler.scale(loss).backward())
            scaler.update()
    for param in model.params():
        assert param.val().dtype is bn.float32  # master weights stay float32
    for state in adam.state.values():
        assert all(t.dtype is bn.float32 for t in state.values() if isinstance(t, Tensor))
    return loss.item()


@pytest.mark.parametrize("backend", ["ndarray", "autodiff+ndarray"])
def test_layers_and_losses_dtypes(backend):
    device = bn.backend(backend).default_device()
    bn.seed(0)
    x = Tensor.random([4, 6], bn.Distribution.normal(0, 1), device)
    image = Tensor.random([2, 3, 8, 8], bn.Distribution.normal(0, 1), device)
    linear, norm = nn.LinearConfig(6, 5).init(device), nn.LayerNormConfig(5).init(device)
    conv = nn.Conv2dConfig(3, 4, (3, 3)).init(device)
    batch_norm = nn.BatchNormConfig(4).init(device)
    targets = Tensor.from_data([0, 1, 4, 2], device)
    with bn.autocast():
        hidden = linear(x)
        features = conv(image)
        assert hidden.dtype is features.dtype is bn.bfloat16
        assert norm(hidden).dtype is bn.float32
        # BatchNorm: float32 statistics, the input's dtype out (as torch.autocast's).
        assert batch_norm(features).dtype is features.dtype
        assert nn.RmsNormConfig(5).init(device)(hidden).dtype is bn.float32
        assert nn.CrossEntropyLoss()(hidden, targets).dtype is bn.float32
        assert nn.MseLoss()(hidden, hidden.detach() * 0.5).dtype is bn.float32
    assert linear(x).dtype is bn.float32


def test_a_small_model_trains_under_autocast_as_in_float32(ad):
    full = _train(ad)
    for low in (bn.bfloat16, bn.float16):
        mixed = _train(ad, low, optim.GradScaler(enabled=low is bn.float16))
        assert mixed < 0.2 and abs(mixed - full) < 0.05, (low, mixed, full)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the inf loss's backward
def test_scaler_skips_an_inf_step_and_backs_off(ad):
    model = Mlp([nn.LinearConfig(2, 3).init(ad)])
    x = Tensor.from_data([[1.0, 2.0]], ad)
    scaler = optim.GradScaler(init_scale=2.0**10, growth_interval=2)
    adam = optim.Adam()
    before = model.layers[0].weight.val().to_numpy()
    # A loss whose gradient overflows: the step is skipped, the scale halves.
    loss = (model(x) * math.inf).sum()
    same = scaler.step(adam, 0.1, model, scaler.scale(loss).backward())
    assert same is model and scaler.found_inf() is True and scaler.skipped_steps == 1
    assert not adam.state  # the optimizer never saw the gradients
    scaler.update()
    assert scaler.get_scale() == 2.0**9
    np.testing.assert_array_equal(model.layers[0].weight.val().to_numpy(), before)
    # Finite gradients: steps are taken with the unscaled gradients; two in a row double it.
    for _ in range(2):
        loss = model(x).sum()
        model = scaler.step(adam, 0.1, model, scaler.scale(loss).backward())
        assert scaler.found_inf() is False
        scaler.update()
    assert scaler.get_scale() == 2.0**10
    # The optimizer gets the unscaled gradient: with SGD, w -= lr * x for each column.
    sgd, plain = optim.Sgd(), Mlp([nn.LinearConfig(2, 3).init(ad)])
    start = plain.layers[0].weight.val().to_numpy()
    plain = optim.GradScaler(init_scale=1024.0).step(sgd, 0.5, plain,
                                                      (plain(x).sum() * 1024.0).backward())
    np.testing.assert_allclose(plain.layers[0].weight.val().to_numpy(),
                               start - 0.5 * np.array([[1.0], [2.0]]), rtol=1e-6)


def test_scaler_state_round_trip_and_errors(ad):
    scaler = optim.GradScaler(init_scale=8.0, growth_interval=3)
    model = Mlp([nn.LinearConfig(2, 1).init(ad)])
    x = Tensor.from_data([[1.0, 2.0]], ad)
    with pytest.raises(bn.BurnishError, match="no gradients were checked"):
        scaler.update()
    model = scaler.step(optim.Sgd(), 0.1, model, scaler.scale(model(x).sum()).backward())
    scaler.update()
    state = scaler.state_dict()
    assert state["scale"] == 8.0 and state["growth_tracker"] == 1
    again = optim.GradScaler()
    again.load_state_dict(state)
    assert again.state_dict() == state
    with pytest.raises(bn.BurnishError, match="missing"):
        again.load_state_dict({"scale": 1.0})
    with pytest.raises(ValueError, match="backoff_factor"):
        optim.GradScaler(backoff_factor=2.0)


def test_a_disabled_scaler_passes_through(ad):
    scaler = optim.GradScaler(enabled=False)
    model = Mlp([nn.LinearConfig(2, 1).init(ad)])
    loss = model(Tensor.from_data([[1.0, 2.0]], ad)).sum()
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    stepped = scaler.step(optim.Sgd(), 0.1, model, loss.backward())
    assert stepped is not model
    scaler.update()


def test_a_captured_step_under_autocast_replays_and_keys_on_the_dtype(ad):
    x, y = _data(ad)
    model, adam, loss_fn = _mlp(ad), optim.Adam(capturable=True), nn.CrossEntropyLoss()

    @bn.capture
    def step(model, x, y):
        scores = model(x)
        loss = loss_fn(scores, y)
        return adam.step(0.02, model, loss.backward()), loss.detach(), scores.detach()

    for _ in range(6):
        with bn.autocast():
            model, loss, scores = step(model, x, y)
        assert scores.dtype is bn.bfloat16 and loss.dtype is bn.float32
    model, loss, scores = step(model, x, y)  # outside autocast: another signature
    assert scores.dtype is bn.float32
    stats = step.stats()
    assert sum(s["replays"] for s in stats) >= 1, stats
