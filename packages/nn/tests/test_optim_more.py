"""RmsProp, AdaGrad, Lion, Adan and Muon against hand-written NumPy updates, and resuming each
from its saved state exactly."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from burnish import Tensor, nn, optim

TARGET = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)
BIAS_TARGET = np.array([0.5, -0.5, 2.0], np.float32)


class Affine(nn.Module):
    """``sum((w - TARGET)^2) + sum((b - BIAS_TARGET)^2)``: a 2-d and a 1-d parameter."""

    w: nn.Param
    b: nn.Param


def make_model(device) -> Affine:
    return Affine(nn.Param(Tensor.from_data(np.full_like(TARGET, 0.3), device)),
                  nn.Param(Tensor.from_data(np.full_like(BIAS_TARGET, -0.2), device)))


def grads_of(model, device):
    dw = model.w.val() - Tensor.from_data(TARGET, device)
    db = model.b.val() - Tensor.from_data(BIAS_TARGET, device)
    return ((dw * dw).sum() + (db * db).sum()).backward()


def numpy_rmsprop(p, g, s, lr, alpha=0.99, eps=1e-5, momentum=0.0, centered=False, wd=0.0):
    g = g + wd * p
    v = s["v"] = alpha * s.get("v", 0) + (1 - alpha) * g * g
    if centered:
        a = s["a"] = alpha * s.get("a", 0) + (1 - alpha) * g
        v = v - a * a
    d = g / (np.sqrt(v) + eps)
    if momentum:
        d = s["buf"] = momentum * s.get("buf", 0) + d
    return p - lr * d


def numpy_adagrad(p, g, s, lr, lr_decay=0.0, eps=1e-5, wd=0.0):
    g = g + wd * p
    t = s["t"] = s.get("t", 0) + 1
    total = s["sum"] = s.get("sum", 0) + g * g
    return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(total) + eps)


def numpy_lion(p, g, s, lr, b1=0.9, b2=0.99, wd=0.0):
    m = s.get("m", np.zeros_like(g))
    c = np.sign(b1 * m + (1 - b1) * g)
    s["m"] = b2 * m + (1 - b2) * g
    return p * (1 - lr * wd) - lr * c


def numpy_adan(p, g, s, lr, b1=0.98, b2=0.92, b3=0.99, eps=1e-8, wd=0.0, no_prox=False):
    t = s["t"] = s.get("t", 0) + 1
    d = g - s.get("prev", g)
    s["prev"] = g
    m = s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    n = s["n"] = b2 * s.get("n", 0) + (1 - b2) * d
    v = s["v"] = b3 * s.get("v", 0) + (1 - b3) * (g + b2 * d) ** 2
    u = (m / (1 - b1**t) + b2 * n / (1 - b2**t)) / (np.sqrt(v / (1 - b3**t)) + eps)
    if no_prox:
        return p * (1 - lr * wd) - lr * u
    return (p - lr * u) / (1 + lr * wd)


def numpy_adamw(p, g, s, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.1):
    p = p * (1 - lr * wd)
    t = s["t"] = s.get("t", 0) + 1
    m = s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    v = s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
    return p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)


def numpy_newton_schulz(m, steps=5):
    a, b, c = 3.4445, -4.7750, 2.0315
    tall = m.shape[0] > m.shape[1]
    x = m.T if tall else m
    x = x / max(np.linalg.norm(x), 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def numpy_muon(p, g, s, lr, momentum=0.95, nesterov=True, wd=0.1, match_adamw=False):
    if p.ndim != 2:
        return numpy_adamw(p, g, s, lr, wd=wd)
    buf = s["buf"] = momentum * s.get("buf", 0) + (1 - momentum) * g
    u = (1 - momentum) * g + momentum * buf if nesterov else buf
    scale = np.sqrt(max(1.0, p.shape[1] / p.shape[0]))
    if match_adamw:
        scale = 0.2 * np.sqrt(max(p.shape))
    return p * (1 - lr * wd) - lr * scale * numpy_newton_schulz(u)


CASES = {
    "rmsprop": (optim.RmsProp(), numpy_rmsprop),
    "rmsprop-centered-momentum": (
        optim.RmsProp(alpha=0.9, momentum=0.5, centered=True, weight_decay=0.01),
        lambda p, g, s, lr: numpy_rmsprop(p, g, s, lr, 0.9, 1e-5, 0.5, True, 0.01)),
    "adagrad": (optim.AdaGrad(lr_decay=0.1, weight_decay=0.01),
                lambda p, g, s, lr: numpy_adagrad(p, g, s, lr, 0.1, 1e-5, 0.01)),
    "lion": (optim.Lion(weight_decay=0.1),
             lambda p, g, s, lr: numpy_lion(p, g, s, lr, wd=0.1)),
    "adan": (optim.Adan(weight_decay=0.02), lambda p, g, s, lr: numpy_adan(p, g, s, lr, wd=0.02)),
    "adan-no-prox": (optim.Adan(weight_decay=0.02, no_prox=True),
                     lambda p, g, s, lr: numpy_adan(p, g, s, lr, wd=0.02, no_prox=True)),
    "muon": (optim.Muon(), numpy_muon),
    "muon-match-rms-adamw": (optim.Muon(adjust_lr="match_rms_adamw"),
                             lambda p, g, s, lr: numpy_muon(p, g, s, lr, match_adamw=True)),
    "muon-plain-momentum": (optim.Muon(nesterov=False, weight_decay=0.0),
                            lambda p, g, s, lr: numpy_muon(p, g, s, lr, nesterov=False, wd=0)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_optimizer_matches_numpy(ad, name):
    template, reference = CASES[name]
    optimizer = copy.deepcopy(template)
    model = make_model(ad)
    w, b = np.full_like(TARGET, 0.3, np.float64), np.full_like(BIAS_TARGET, -0.2, np.float64)
    state_w, state_b = {}, {}
    for _ in range(4):
        model = optimizer.step(0.05, model, grads_of(model, ad))
        w, b = (reference(w, 2 * (w - TARGET), state_w, 0.05),
                reference(b, 2 * (b - BIAS_TARGET), state_b, 0.05))
    np.testing.assert_allclose(model.w.val().to_numpy(), w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(model.b.val().to_numpy(), b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_a_saved_state_resumes_exactly(ad, tmp_path, name):
    template = CASES[name][0]
    optimizer = copy.deepcopy(template)
    model = make_model(ad)
    for _ in range(3):
        model = optimizer.step(0.05, model, grads_of(model, ad))
    model.save(tmp_path / "model")
    optimizer.save(tmp_path / "optim")
    for _ in range(2):
        model = optimizer.step(0.05, model, grads_of(model, ad))

    resumed = make_model(ad).load(tmp_path / "model")
    resumed_optimizer = copy.deepcopy(template)
    resumed_optimizer.load(tmp_path / "optim")
    for _ in range(2):
        resumed = resumed_optimizer.step(0.05, resumed, grads_of(resumed, ad))
    np.testing.assert_array_equal(resumed.w.val().to_numpy(), model.w.val().to_numpy())
    np.testing.assert_array_equal(resumed.b.val().to_numpy(), model.b.val().to_numpy())


def test_newton_schulz_makes_singular_values_near_one():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(8, 5)).astype(np.float32)
    x = optim.newton_schulz(Tensor.from_data(m, "ndarray")).to_numpy()
    singular = np.linalg.svd(x, compute_uv=False)
    assert x.shape == (8, 5)
    assert np.all((singular > 0.6) & (singular < 1.25))
    np.testing.assert_allclose(x, numpy_newton_schulz(m.astype(np.float64)), atol=1e-4)


def test_new_optimizers_train_a_small_model(ad):
    x = Tensor.from_data([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]], ad)
    y = Tensor.from_data([1, 1, 0, 0], ad)
    for optimizer, lr in [(optim.RmsProp(), 0.01), (optim.AdaGrad(), 0.1), (optim.Lion(), 0.01),
                          (optim.Adan(), 0.05), (optim.Muon(), 0.05)]:
        model = nn.LinearConfig(2, 2).init(ad)
        losses = []
        for _ in range(15):
            loss = nn.CrossEntropyLoss()(model(x), y)
            losses.append(float(loss.item()))
            model = optimizer.step(lr, model, loss.backward())
        assert losses[-1] < losses[0], type(optimizer).__name__


SCHEDULES = [
    lambda: optim.CosineAnnealingLr(1.0, 10, min_lr=0.1, warmup_iters=3),
    lambda: optim.NoamLr(1.0, 4, 16),
    lambda: optim.SequentialLr([(optim.LinearLr(0.0, 1.0, 3), 3),
                                (optim.StepLr(1.0, 2, 0.5), 0)]),
    lambda: optim.ComposedLr([optim.ExponentialLr(1.0, 0.9), optim.ConstantLr(0.5)]),
]


@pytest.mark.parametrize("make", SCHEDULES, ids=["cosine", "noam", "sequential", "composed"])
def test_a_schedule_resumes_exactly(tmp_path, make):
    schedule = make()
    first = [schedule.step() for _ in range(5)]
    schedule.save(tmp_path / "schedule")
    rest = [schedule.step() for _ in range(6)]
    resumed = make()
    resumed.load(tmp_path / "schedule")
    assert resumed.iteration == 5
    assert [resumed.step() for _ in range(6)] == rest
    assert first != rest
    again = make()
    again.load_record(schedule.into_record())
    assert again.iteration == 11


def test_a_schedule_refuses_another_state(tmp_path):
    optim.ConstantLr(0.1).save(tmp_path / "constant")
    with pytest.raises(Exception, match="ConstantLr, not of NoamLr"):
        optim.NoamLr(1.0, 4, 16).load(tmp_path / "constant")
    with pytest.raises(Exception, match="iteration"):
        optim.ConstantLr(0.1).load_record({"iteration": np.array([-1])})
