"""Metrics against hand computation: loss, accuracy, top-k, macro precision/recall/F1, system."""

import math

import numpy as np
import pytest

from burnish import Tensor
from burnish.train import (
    AccuracyMetric,
    ClassificationOutput,
    CpuUseMetric,
    FScoreMetric,
    IterationSpeedMetric,
    LearningRateMetric,
    LossMetric,
    MemoryUseMetric,
    PrecisionMetric,
    RecallMetric,
    StepInfo,
    TopKAccuracyMetric,
)

LOGITS = [[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 2.0], [0.0, 2.0, 1.0]]
TARGETS = [0, 1, 1, 2]  # predictions: 0, 1, 2, 1


def output(logits=LOGITS, targets=TARGETS, loss=0.5) -> ClassificationOutput:
    return ClassificationOutput(Tensor.from_data([loss], "ndarray"),
                                Tensor.from_data(logits, "ndarray"),
                                Tensor.from_data(targets, "ndarray"))


def test_loss_is_averaged_by_batch_size():
    metric = LossMetric()
    assert metric.update(output(loss=1.0)) == 1.0
    metric.update(output(LOGITS[:2], TARGETS[:2], loss=4.0))
    assert metric.value() == pytest.approx((1.0 * 4 + 4.0 * 2) / 6)
    metric.clear()
    assert math.isnan(metric.value())


def test_accuracy_and_padding():
    metric = AccuracyMetric()
    assert metric.update(output()) == 50.0
    padded = AccuracyMetric(pad_token=2)
    assert padded.update(output()) == pytest.approx(200 / 3)


def test_top_k_accuracy():
    assert TopKAccuracyMetric(1).update(output()) == 50.0
    # top 2: {0,1}, {1,2}, {2,0}, {1,2}: targets 0, 1 in; 1 not in {2,0}; 2 in.
    assert TopKAccuracyMetric(2).update(output()) == 75.0
    assert TopKAccuracyMetric(2).name == "top2_accuracy"


def test_macro_precision_recall_f1_by_hand():
    # classes 0, 1, 2: tp 1, 1, 0; predicted 1, 2, 1; actual 1, 2, 1.
    precision = (1 / 1 + 1 / 2 + 0) / 3
    recall = (1 / 1 + 1 / 2 + 0) / 3
    f1 = (1.0 + 2 * 0.5 * 0.5 / 1.0 + 0) / 3
    assert PrecisionMetric().update(output()) == pytest.approx(100 * precision)
    assert RecallMetric().update(output()) == pytest.approx(100 * recall)
    assert FScoreMetric().update(output()) == pytest.approx(100 * f1)


def test_macro_scores_count_the_whole_epoch():
    metric = RecallMetric()
    metric.update(output(LOGITS[:2], TARGETS[:2]))
    metric.update(output(LOGITS[2:], TARGETS[2:]))
    assert metric.value() == pytest.approx(RecallMetric().update(output()))


def test_f_score_matches_its_formula_for_another_beta():
    rng = np.random.default_rng(0)
    logits, targets = rng.normal(size=(50, 4)), rng.integers(0, 4, 50)
    predictions = logits.argmax(1)
    scores = []
    for c in range(4):
        tp = np.sum((predictions == c) & (targets == c))
        p = tp / max(np.sum(predictions == c), 1)
        r = tp / max(np.sum(targets == c), 1)
        scores.append(0.0 if p + r == 0 else 5 * p * r / (4 * p + r))
    metric = FScoreMetric(beta=2.0)
    assert metric.name == "f2_score"
    assert metric.update(output(logits.tolist(), targets.tolist())) == pytest.approx(
        100 * np.mean(scores))


def test_system_metrics():
    lr = LearningRateMetric()
    lr.update(output(), None, StepInfo(lr=0.1))
    lr.update(output(), None, StepInfo(lr=0.3))
    assert lr.value() == pytest.approx(0.2)
    speed = IterationSpeedMetric()
    assert speed.update(output()) > 0 and speed.value() > 0
    assert CpuUseMetric().update(output()) >= 0
    assert 1 < MemoryUseMetric().update(output()) < 1e6


def test_a_metric_continues_from_its_state():
    whole = FScoreMetric()
    whole.update(output(LOGITS[:2], TARGETS[:2]))
    resumed = FScoreMetric()
    resumed.load_state(whole.state())
    for metric in (whole, resumed):
        metric.update(output(LOGITS[2:], TARGETS[2:]))
    assert resumed.value() == whole.value() == FScoreMetric().update(output())
