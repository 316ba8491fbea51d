"""Smooth L1, KL divergence, Poisson NLL and the ranking losses against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from burnish import Tensor, nn
from burnish import functional as F
from burnish.errors import ShapeError

RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def close(tensor, expected, tol=1e-5):
    np.testing.assert_allclose(tensor.to_numpy(), expected, rtol=tol, atol=tol)


def t(array):
    return Tensor.from_data(array)


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_smooth_l1(beta):
    x, y = data(4, 5), data(4, 5)
    d = np.abs(x - y)
    expected = d if beta == 0 else np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    close(nn.SmoothL1Loss(beta, "none")(t(x), t(y)), expected)
    close(nn.SmoothL1Loss(beta)(t(x), t(y)), expected.mean())


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_kl_divergence():
    log_probs = np.log(softmax(data(3, 4)))
    targets = softmax(data(3, 4))
    targets[0, 1] = 0.0
    pointwise = np.where(targets > 0, targets * (np.log(np.maximum(targets, 1e-30)) - log_probs),
                         0.0)
    close(nn.KlDivLoss()(t(log_probs), t(targets)), pointwise.sum() / 3)
    close(nn.KlDivLoss(reduction="mean")(t(log_probs), t(targets)), pointwise.mean())
    close(nn.KlDivLoss(reduction="none")(t(log_probs), t(targets)), pointwise)
    log_targets = np.log(softmax(data(3, 4)))
    close(nn.KlDivLoss(log_target=True, reduction="sum")(t(log_probs), t(log_targets)),
          (np.exp(log_targets) * (log_targets - log_probs)).sum(), 1e-4)
    assert nn.KlDivLoss()(t(log_probs), t(np.exp(log_probs))).item() == pytest.approx(0, abs=1e-6)


def test_poisson_nll():
    x = data(3, 4)
    counts = RNG.poisson(2.0, size=(3, 4)).astype(np.float32)
    close(nn.PoissonNllLoss()(t(x), t(counts)), (np.exp(x) - counts * x).mean())
    rates = np.abs(x) + 0.1
    close(nn.PoissonNllLoss(log_input=False, reduction="sum")(t(rates), t(counts)),
          (rates - counts * np.log(rates + 1e-8)).sum(), 1e-4)
    safe = np.maximum(counts, 1)
    stirling = np.where(counts > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * math.pi * safe),
                        0)
    close(nn.PoissonNllLoss(full=True, reduction="none")(t(x), t(counts)),
          np.exp(x) - counts * x + stirling)


def test_margin_ranking():
    x1, x2 = data(6), data(6)
    y = np.array([1, -1, 1, 1, -1, -1], np.float32)
    close(nn.MarginRankingLoss(0.5)(t(x1), t(x2), t(y)),
          np.maximum(0, -y * (x1 - x2) + 0.5).mean())
    with pytest.raises(ShapeError, match="targets"):
        nn.MarginRankingLoss()(t(x1), t(x2), t(y[:3]))


def test_cosine_embedding():
    x1, x2 = data(5, 3), data(5, 3)
    y = np.array([1, -1, 1, -1, -1])
    cosine = (x1 * x2).sum(1) / np.sqrt(((x1 ** 2).sum(1) + 1e-12) * ((x2 ** 2).sum(1) + 1e-12))
    expected = np.where(y > 0, 1 - cosine, np.maximum(0, cosine - 0.1))
    close(nn.CosineEmbeddingLoss(0.1, reduction="none")(t(x1), t(x2), t(y)), expected)
    close(nn.CosineEmbeddingLoss(0.1)(t(x1), t(x2), t(y)), expected.mean())


@pytest.mark.parametrize("p, swap", [(2.0, False), (1.0, True), (3.0, False)])
def test_triplet_margin(p, swap):
    anchor, positive, negative = data(4, 3), data(4, 3), data(4, 3)

    def distance(x, y):
        return (np.abs(x - y + 1e-6) ** p).sum(-1) ** (1 / p)

    to_negative = distance(anchor, negative)
    if swap:
        to_negative = np.minimum(to_negative, distance(positive, negative))
    expected = np.maximum(distance(anchor, positive) - to_negative + 1.0, 0)
    close(nn.TripletMarginLoss(p=p, swap=swap, reduction="none")(t(anchor), t(positive),
                                                                 t(negative)), expected, 1e-4)


def test_gradients_flow_through_the_losses(ad):
    linear = nn.LinearConfig(3, 4).init(ad)
    x = Tensor.from_data(data(5, 3), ad)
    other = Tensor.from_data(data(5, 4), ad)
    signs = Tensor.from_data(np.array([1, -1, 1, -1, 1], np.float32), ad)
    losses = [
        lambda y: nn.SmoothL1Loss()(y, other),
        lambda y: nn.KlDivLoss()(F.log_softmax(y, 1), F.softmax(other, 1)),
        lambda y: nn.PoissonNllLoss(full=True)(y, other.abs().round()),
        lambda y: nn.MarginRankingLoss(0.1)(y[:, 0], y[:, 1], signs),
        lambda y: nn.CosineEmbeddingLoss()(y, other, signs),
        lambda y: nn.TripletMarginLoss()(y, other, y * 0.5),
    ]
    for loss in losses:
        grads = loss(linear(x)).backward()
        for name, param in linear.named_params():
            grad = param.val().grad(grads)
            assert grad is not None and np.all(np.isfinite(grad.to_numpy())), name
