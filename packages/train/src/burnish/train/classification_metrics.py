"""Metrics of a classifier's outputs: loss, accuracy, top-k accuracy, macro precision/recall/F."""

from __future__ import annotations

from typing import Any

import numpy as np

from burnish.train.metric import Metric, StepInfo


def _numpy(tensor: Any) -> np.ndarray:
    return np.asarray(tensor.to_numpy() if hasattr(tensor, "to_numpy") else tensor)


def _batch_size(output: Any) -> int:
    return int(_numpy(output.targets).shape[0])


class LossMetric(Metric):
    """The mean of ``output.loss`` over the epoch, weighted by batch size."""

    name = "loss"

    def measure(self, output: Any, batch: Any, info: StepInfo) -> tuple[float, float]:
        return float(_numpy(output.loss).reshape(-1)[0]), _batch_size(output)


class AccuracyMetric(Metric):
    """The fraction of samples whose arg-max logit is the target, in percent (as Burn).

    ``pad_token``: targets equal to it are left out.
    """

    name = "accuracy"
    higher_is_better = True

    def __init__(self, pad_token: int | None = None):
        self.pad_token = pad_token
        super().__init__()

    def measure(self, output: Any, batch: Any, info: StepInfo) -> tuple[float, float]:
        predictions = _numpy(output.output).argmax(axis=-1).reshape(-1)
        targets = _numpy(output.targets).reshape(-1)
        if self.pad_token is not None:
            keep = targets != self.pad_token
            predictions, targets = predictions[keep], targets[keep]
        if targets.size == 0:
            return 0.0, 0.0
        return 100.0 * float(np.mean(predictions == targets)), targets.size


class TopKAccuracyMetric(Metric):
    """The fraction of samples whose target is among the ``k`` largest logits, in percent."""

    higher_is_better = True

    def __init__(self, k: int):
        if k < 1:
            raise ValueError(f"top-k accuracy needs k >= 1, got {k}")
        self.k = k
        self.name = f"top{k}_accuracy"
        super().__init__()

    def measure(self, output: Any, batch: Any, info: StepInfo) -> tuple[float, float]:
        logits = _numpy(output.output)
        targets = _numpy(output.targets).reshape(-1)
        top = np.argsort(-logits, axis=-1, kind="stable")[:, : self.k]
        hits = (top == targets[:, None]).any(axis=1)
        return 100.0 * float(np.mean(hits)), targets.size


class _ConfusionMetric(Metric):
    """Counts true positives, predicted and actual positives per class over the epoch, so the
    epoch's value is computed from all its samples rather than averaged over batches."""

    higher_is_better = True

    def clear(self) -> None:
        super().clear()
        self.counts = np.zeros((3, 0), np.int64)  # true positives, predicted, actual

    def state(self) -> dict[str, Any]:
        return {**super().state(), "counts": self.counts.tolist()}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.counts = np.array(state["counts"], np.int64).reshape(3, -1)

    def _add(self, counts: np.ndarray, new: np.ndarray) -> np.ndarray:
        size = max(counts.shape[1], new.shape[1])
        grown = np.zeros((3, size), np.int64)
        grown[:, : counts.shape[1]] += counts
        grown[:, : new.shape[1]] += new
        return grown

    def measure(self, output: Any, batch: Any, info: StepInfo) -> tuple[float, float]:
        logits = _numpy(output.output)
        predictions = logits.argmax(axis=-1).reshape(-1)
        targets = _numpy(output.targets).reshape(-1).astype(np.int64)
        classes = max(logits.shape[-1], int(targets.max(initial=-1)) + 1)
        counts = np.stack(
            [
                np.bincount(targets[predictions == targets], minlength=classes),
                np.bincount(predictions, minlength=classes),
                np.bincount(targets, minlength=classes),
            ]
        )
        self.counts = self._add(self.counts, counts)
        return self.score(counts), targets.size

    def value(self) -> float:
        return self.score(self.counts) if self.weight else float("nan")

    def score(self, counts: np.ndarray) -> float:
        """The macro average, in percent, over the classes that were predicted or present."""
        true_positive, predicted, actual = counts.astype(np.float64)
        seen = (predicted > 0) | (actual > 0)
        if not seen.any():
            return 0.0
        scores = self.per_class(true_positive[seen], predicted[seen], actual[seen])
        return 100.0 * float(np.mean(scores))

    def per_class(self, tp: np.ndarray, predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    # A class never predicted has precision 0 (scikit-learn's zero_division=0).
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


class PrecisionMetric(_ConfusionMetric):
    """Macro precision: per class, true positives over predicted positives, then their mean."""

    name = "precision"

    def per_class(self, tp: np.ndarray, predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
        return _ratio(tp, predicted)


class RecallMetric(_ConfusionMetric):
    """Macro recall: per class, true positives over actual positives, then their mean."""

    name = "recall"

    def per_class(self, tp: np.ndarray, predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
        return _ratio(tp, actual)


class FScoreMetric(_ConfusionMetric):
    """Macro F-beta: per class ``(1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp)``, then the mean."""

    def __init__(self, beta: float = 1.0):
        self.beta = beta
        self.name = "f1_score" if beta == 1.0 else f"f{beta:g}_score"
        super().__init__()

    def per_class(self, tp: np.ndarray, predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
        b2 = self.beta**2
        return _ratio((1 + b2) * tp, b2 * actual + predicted)
