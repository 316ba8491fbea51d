"""CtcLoss against a brute-force sum over every alignment, and its gradients."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from burnish import Tensor, nn
from burnish import functional as F
from burnish.errors import ShapeError

RNG = np.random.default_rng(0)


def log_softmax(x):
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def collapse(path, blank):
    merged = [label for i, label in enumerate(path) if i == 0 or label != path[i - 1]]
    return [label for label in merged if label != blank]


def brute_force(log_probs, target, blank):
    """-log of the summed probability of every path over the classes that collapses to
    ``target``: the definition of CTC, without dynamic programming."""
    time, classes = log_probs.shape
    total = 0.0
    for path in itertools.product(range(classes), repeat=time):
        if collapse(path, blank) == list(target):
            total += np.exp(sum(log_probs[t, c] for t, c in enumerate(path)))
    return -np.log(total) if total > 0 else np.inf


def test_ctc_matches_the_sum_over_alignments():
    log_probs = log_softmax(RNG.normal(size=(4, 5, 3)))
    targets = np.array([[1, 1], [1, 2], [2, 0], [0, 0]])
    input_lengths = np.array([5, 4, 3, 5])
    target_lengths = np.array([2, 2, 1, 0])
    expected = np.array([brute_force(log_probs[n, :input_lengths[n]],
                                     targets[n, :target_lengths[n]], 0) for n in range(4)])
    args = [Tensor.from_data(a) for a in (log_probs.astype(np.float32), targets, input_lengths,
                                          target_lengths)]
    loss = nn.CtcLoss(reduction="none")(*args)
    np.testing.assert_allclose(loss.to_numpy(), expected, rtol=1e-5)
    assert nn.CtcLoss(reduction="sum")(*args).item() == pytest.approx(expected.sum(), rel=1e-5)
    mean = (expected / np.maximum(target_lengths, 1)).mean()
    assert nn.CtcLoss()(*args).item() == pytest.approx(mean, rel=1e-5)


def test_ctc_with_another_blank_and_impossible_targets():
    log_probs = log_softmax(RNG.normal(size=(1, 4, 3)))
    target = np.array([[0, 1]])
    loss = nn.CtcLoss(blank=2, reduction="none")(
        Tensor.from_data(log_probs.astype(np.float32)), Tensor.from_data(target),
        Tensor.from_data([4]), Tensor.from_data([2]))
    assert loss.item() == pytest.approx(brute_force(log_probs[0], [0, 1], 2), rel=1e-5)
    # Three repeated labels need five steps; three are too few.
    args = [Tensor.from_data(log_probs[:, :3].astype(np.float32)), Tensor.from_data([[1, 1, 1]]),
            Tensor.from_data([3]), Tensor.from_data([3])]
    assert nn.CtcLoss(reduction="none")(*args).item() == np.inf
    assert nn.CtcLoss(reduction="none", zero_infinity=True)(*args).item() == 0.0
    with pytest.raises(ShapeError, match="input_lengths"):
        nn.CtcLoss()(args[0], args[1], Tensor.from_data([4]), args[3])


def test_ctc_gradients_are_finite(ad):
    linear = nn.LinearConfig(4, 5).init(ad)
    x = Tensor.from_data(RNG.normal(size=(3, 6, 4)).astype(np.float32), ad)
    log_probs = F.log_softmax(linear(x), 2)
    targets = Tensor.from_data([[1, 2, 2], [4, 4, 4], [3, 0, 0]], ad)
    # The second target cannot fit in 4 steps: zero_infinity keeps its gradient out.
    loss = nn.CtcLoss(zero_infinity=True)(log_probs, targets, Tensor.from_data([6, 4, 2], ad),
                                          Tensor.from_data([3, 3, 1], ad))
    grads = loss.backward()
    for name, param in linear.named_params():
        grad = param.val().grad(grads)
        assert grad is not None and np.all(np.isfinite(grad.to_numpy())), name
        assert np.abs(grad.to_numpy()).max() > 0
