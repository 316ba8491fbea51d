"""Initializers' statistics and the losses against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, nn

RNG = np.random.default_rng(1)


@pytest.mark.parametrize("initializer, std", [
    (nn.Uniform(-1.0, 1.0), 1 / np.sqrt(3)),
    (nn.Normal(1.0, 2.0), 2.0),
    (nn.KaimingUniform(), np.sqrt(2 / 100)),
    (nn.KaimingNormal(fan_out_only=True), np.sqrt(2 / 200)),
    (nn.XavierUniform(), np.sqrt(2 / 300)),
    (nn.XavierNormal(), np.sqrt(2 / 300)),
])
def test_random_initializers_have_their_spread(initializer, std):
    values = initializer.tensor([100, 200], fan_in=100, fan_out=200).to_numpy()
    assert abs(values.std() - std) < 0.05 * std


def test_constant_initializers_and_orthogonal():
    assert nn.Constant(3.0).tensor([2]).tolist() == [3.0, 3.0]
    assert nn.Zeros().tensor([2]).tolist() == [0.0, 0.0]
    assert nn.Ones().init([2]).val().tolist() == [1.0, 1.0]
    for shape in ([4, 6], [6, 4]):
        q = nn.Orthogonal(gain=2.0).tensor(shape).to_numpy().astype(np.float64)
        small = min(shape)
        gram = q @ q.T if shape[0] < shape[1] else q.T @ q
        np.testing.assert_allclose(gram, 4 * np.eye(small), atol=1e-5)
    with pytest.raises(ValueError, match="fan_in"):
        nn.KaimingUniform().tensor([2, 2])
    assert nn.Initializer.from_dict(nn.Orthogonal(2.0).to_dict()) == nn.Orthogonal(2.0)
    assert nn.Initializer.KaimingUniform is nn.KaimingUniform


def log_softmax(x):
    x = x - x.max(1, keepdims=True)
    return x - np.log(np.exp(x).sum(1, keepdims=True))


def cross_entropy(logits, targets, weights=None, smoothing=0.0):
    """PyTorch's definition, written out."""
    n, c = logits.shape
    logp = log_softmax(logits)
    w = np.ones(c) if weights is None else np.asarray(weights)
    nll = -logp[np.arange(n), targets] * w[targets]
    smooth = -(logp * w).sum(1) / c
    return ((1 - smoothing) * nll + smoothing * smooth).sum() / w[targets].sum()


@pytest.mark.parametrize("weights", [None, [1.0, 2.0, 0.5, 1.5]])
@pytest.mark.parametrize("smoothing", [None, 0.1])
def test_cross_entropy(weights, smoothing):
    logits = RNG.normal(size=(5, 4))
    targets = np.array([0, 3, 1, 1, 2])
    loss = nn.CrossEntropyLoss(weights=weights, smoothing=smoothing)
    got = loss(Tensor.from_data(logits, dtype="float32"), Tensor.from_data(targets)).item()
    assert got == pytest.approx(cross_entropy(logits, targets, weights, smoothing or 0.0),
                                rel=1e-5)


def test_cross_entropy_on_probabilities_and_with_padding():
    logits = RNG.normal(size=(4, 3))
    probs = np.exp(log_softmax(logits))
    targets = np.array([0, 2, 1, 2])
    loss = nn.CrossEntropyLoss(logits=False)
    got = loss(Tensor.from_data(probs, dtype="float32"), Tensor.from_data(targets)).item()
    assert got == pytest.approx(cross_entropy(logits, targets), rel=1e-5)
    padded = nn.CrossEntropyLoss(pad_tokens=[2])
    got = padded(Tensor.from_data(logits, dtype="float32"), Tensor.from_data(targets)).item()
    kept = [0, 2]  # the targets that are not the pad token
    assert got == pytest.approx(cross_entropy(logits[kept], targets[kept]), rel=1e-5)


def test_regression_and_binary_losses():
    a, b = RNG.normal(size=(3, 4)) * 2, RNG.normal(size=(3, 4))
    ta, tb = Tensor.from_data(a, dtype="float32"), Tensor.from_data(b, dtype="float32")
    assert nn.MseLoss()(ta, tb).item() == pytest.approx(((a - b) ** 2).mean(), rel=1e-5)
    assert nn.MseLoss("sum")(ta, tb).item() == pytest.approx(((a - b) ** 2).sum(), rel=1e-5)
    d = np.abs(a - b)
    huber = np.where(d <= 1.5, 0.5 * d**2, 1.5 * (d - 0.75)).mean()
    assert nn.HuberLoss(1.5)(ta, tb).item() == pytest.approx(huber, rel=1e-5)
    t = (b > 0).astype(np.float64)
    p = 1 / (1 + np.exp(-a))
    bce = -(t * np.log(p) + (1 - t) * np.log(1 - p)).mean()
    tt = Tensor.from_data(t, dtype="float32")
    assert nn.BinaryCrossEntropyLoss(logits=True)(ta, tt).item() == pytest.approx(bce, rel=1e-5)
    probs = Tensor.from_data(p, dtype="float32")
    assert nn.BinaryCrossEntropyLoss()(probs, tt).item() == pytest.approx(bce, rel=1e-4)
    with pytest.raises(Exception, match="differ"):
        nn.MseLoss()(ta, Tensor.zeros([4, 3]))
