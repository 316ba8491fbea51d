"""Optimizers against hand-written NumPy updates, resuming exactly, clipping, accumulation,
schedules, and a small MLP that learns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from burnish import Tensor, nn, optim

TARGET = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)


class Quadratic(nn.Module):
    """``sum((w - TARGET)^2)``: its gradient is ``2 (w - TARGET)``."""

    w: nn.Param


def grads_of(model, device):
    diff = model.w.val() - Tensor.from_data(TARGET, device)
    return (diff * diff).sum().backward()


def numpy_sgd(w, g, state, lr, momentum, dampening, nesterov, wd):
    g = g + wd * w
    if momentum:
        buf = state.get("buf")
        buf = g if buf is None else momentum * buf + (1 - dampening) * g
        state["buf"] = buf
        g = g + momentum * buf if nesterov else buf
    return w - lr * g


def numpy_adam(w, g, state, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, decoupled=False):
    if decoupled:
        w = w * (1 - lr * wd)
    else:
        g = g + wd * w
    t = state["t"] = state.get("t", 0) + 1
    m = state["m"] = b1 * state.get("m", 0) + (1 - b1) * g
    v = state["v"] = b2 * state.get("v", 0) + (1 - b2) * g * g
    return w - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)


CASES = [
    (optim.Sgd(), lambda w, g, s: numpy_sgd(w, g, s, 0.1, 0, 0, False, 0)),
    (optim.Sgd(momentum=0.9, dampening=0.1, weight_decay=0.01),
     lambda w, g, s: numpy_sgd(w, g, s, 0.1, 0.9, 0.1, False, 0.01)),
    (optim.Sgd(momentum=0.9, nesterov=True),
     lambda w, g, s: numpy_sgd(w, g, s, 0.1, 0.9, 0, True, 0)),
    (optim.Adam(), lambda w, g, s: numpy_adam(w, g, s, 0.1)),
    (optim.Adam(weight_decay=0.1), lambda w, g, s: numpy_adam(w, g, s, 0.1, wd=0.1)),
    (optim.AdamW(weight_decay=0.1),
     lambda w, g, s: numpy_adam(w, g, s, 0.1, wd=0.1, decoupled=True)),
]


@pytest.mark.parametrize("optimizer, reference", CASES,
                         ids=["sgd", "sgd-momentum", "nesterov", "adam", "adam-l2", "adamw"])
def test_optimizer_matches_numpy(ad, optimizer, reference):
    start = np.zeros_like(TARGET) + 0.3
    model = Quadratic(nn.Param(Tensor.from_data(start, ad)))
    w, state = start.astype(np.float64), {}
    for _ in range(4):
        model = optimizer.step(0.1, model, grads_of(model, ad))
        w = reference(w, 2 * (w - TARGET), state)
    np.testing.assert_allclose(model.w.val().to_numpy(), w, rtol=1e-5, atol=1e-6)
    assert model.w.val().is_require_grad()


def test_a_saved_run_resumes_exactly(ad, tmp_path):
    model = Quadratic(nn.Param(Tensor.zeros([2, 3], ad)))
    adam = optim.Adam()
    for _ in range(3):
        model = adam.step(0.05, model, grads_of(model, ad))
    model.save(tmp_path / "model")
    adam.save(tmp_path / "optim")
    for _ in range(2):
        model = adam.step(0.05, model, grads_of(model, ad))

    resumed = Quadratic(nn.Param(Tensor.zeros([2, 3], ad))).load(tmp_path / "model")
    resumed_adam = optim.Adam()
    resumed_adam.load(tmp_path / "optim")
    for _ in range(2):
        resumed = resumed_adam.step(0.05, resumed, grads_of(resumed, ad))
    np.testing.assert_array_equal(resumed.w.val().to_numpy(), model.w.val().to_numpy())
    with pytest.raises(Exception, match="Adam"):
        optim.Sgd().load(tmp_path / "optim")


def test_frozen_params_and_clipping(ad):
    model = Quadratic(nn.Param(Tensor.zeros([2, 3], ad)))
    frozen = model.no_grad()
    assert optim.Sgd().step(0.1, frozen, grads_of(model, ad)).w.val().tolist() == [[0.0] * 3] * 2
    clipped = optim.Sgd(gradient_clipping=optim.GradientClipping(value=0.5))
    w = clipped.step(1.0, model, grads_of(model, ad)).w.val().to_numpy()
    np.testing.assert_allclose(w, np.clip(2 * TARGET, -0.5, 0.5))
    by_norm = optim.Sgd(gradient_clipping=optim.GradientClipping(norm=1.0))
    w = by_norm.step(1.0, model, grads_of(model, ad)).w.val().to_numpy()
    assert np.linalg.norm(w) == pytest.approx(1.0, rel=1e-4)


def test_gradient_accumulation_sums_passes(ad):
    model = Quadratic(nn.Param(Tensor.zeros([2, 3], ad)))
    accumulator = optim.GradientsAccumulator()
    for _ in range(3):
        accumulator.accumulate(model, grads_of(model, ad))
    w = optim.Sgd().step(0.1, model, accumulator.grads()).w.val().to_numpy()
    np.testing.assert_allclose(w, 0.1 * 3 * 2 * TARGET, rtol=1e-6)
    assert len(accumulator.grads()) == 0


def take(schedule, n):
    return [schedule.step() for _ in range(n)]


def test_schedules():
    assert take(optim.ConstantLr(0.1), 2) == [0.1, 0.1]
    assert take(optim.LinearLr(1.0, 0.0, 4), 6) == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    cosine = take(optim.CosineAnnealingLr(1.0, 2, warmup_iters=2), 5)
    assert cosine == pytest.approx([0.5, 1.0, 1.0, 0.5, 0.0])
    assert take(optim.ExponentialLr(1.0, 0.5), 3) == [1.0, 0.5, 0.25]
    assert take(optim.StepLr(1.0, 2, 0.1), 5) == pytest.approx([1, 1, 0.1, 0.1, 0.01])
    noam = take(optim.NoamLr(1.0, 2, 4), 4)
    assert noam == pytest.approx([0.5 * n * 2**-1.5 if n <= 2 else 0.5 * n**-0.5
                                  for n in range(1, 5)])
    warm = optim.SequentialLr([(optim.LinearLr(0.0, 1.0, 2), 2), (optim.ConstantLr(1.0), 0)])
    assert take(warm, 4) == [0.0, 0.5, 1.0, 1.0]
    composed = optim.ComposedLr([optim.ConstantLr(0.5), optim.ExponentialLr(1.0, 0.5)])
    assert take(composed, 2) == [0.5, 0.25]
    assert math.isclose(optim.ComposedLr([optim.ConstantLr(1), optim.ConstantLr(3)], "avg")
                        .step(), 2.0)


class Mlp(nn.Module):
    layers: list

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def test_a_small_mlp_learns_xor_like_classes(ad):
    rng = np.random.default_rng(0)
    points = rng.uniform(-1, 1, size=(128, 2)).astype(np.float32)
    labels = ((points[:, 0] * points[:, 1]) > 0).astype(np.int64)
    x, y = Tensor.from_data(points, ad), Tensor.from_data(labels, ad)
    model = Mlp([nn.LinearConfig(2, 16).init(ad), nn.Relu(), nn.LinearConfig(16, 16).init(ad),
                 nn.Relu(), nn.LinearConfig(16, 2).init(ad)])
    adam, loss_fn = optim.AdamW(), nn.CrossEntropyLoss()
    schedule = optim.CosineAnnealingLr(0.05, 150, min_lr=0.005, warmup_iters=10)
    for _ in range(160):
        loss = loss_fn(model(x), y)
        model = adam.step(schedule.step(), model, loss.backward())
    assert loss.item() < 0.15
    accuracy = (model.valid()(x.inner()).argmax(1) == y.inner()).float().mean().item()
    assert accuracy > 0.95


def test_moments_update_in_their_own_memory_and_records_stay_snapshots(ad):
    import sys
    import weakref

    model = Quadratic(nn.Param(Tensor.from_data(np.zeros_like(TARGET) + 0.3, ad)))
    adam = optim.Adam()
    model = adam.step(0.1, model, grads_of(model, ad))
    (key, state), = adam.state.items()
    alive = weakref.ref(state["moment_1"]._prim)  # an ndarray: the moments live on the inner
    del state
    model = adam.step(0.1, model, grads_of(model, ad))
    if sys.version_info < (3, 14):
        assert adam.state[key]["moment_1"]._prim is alive()

    record = adam.into_record()
    kept = {name: t.to_numpy().copy() for name, t in record[key].items()}
    model = adam.step(0.1, model, grads_of(model, ad))
    for name, t in record[key].items():
        np.testing.assert_array_equal(t.to_numpy(), kept[name])
    assert not np.array_equal(adam.state[key]["moment_1"].to_numpy(), kept["moment_1"])


@pytest.mark.parametrize("make", [optim.Adam, optim.AdamW])
def test_steps_never_read_the_device(make, ad, monkeypatch):
    # A read waits for every queued launch on a GPU: the step count must come from the host.
    model = Quadratic(nn.Param(Tensor.from_data(np.zeros_like(TARGET) + 0.3, ad)))
    adam = make()
    model = adam.step(0.1, model, grads_of(model, ad))
    reads = []
    original = Tensor.into_data

    def counted(self, *args, **kwargs):
        reads.append(self.shape)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Tensor, "into_data", counted)
    for _ in range(3):
        model = adam.step(0.1, model, grads_of(model, ad))
    assert reads == []
    monkeypatch.undo()
    (state,) = adam.state.values()
    assert state["step"] == 4  # on the host
    (record,) = adam.into_record().values()
    assert record["step"].item() == 4
