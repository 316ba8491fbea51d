"""Losses: cross entropy, binary cross entropy, regression (MSE, Huber, smooth L1), KL, Poisson.

Under ``burnish.autocast`` each computes in float32, whatever its inputs' dtype.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from burnish import Tensor, where
from burnish import amp as _amp
from burnish import functional as F
from burnish.errors import ShapeError
from burnish.nn.activation import softplus
from burnish.nn.module import Module
from burnish.replay import guard
from burnish.shape import show
from burnish.tensor.core import checks_values

Reduction = Literal["mean", "sum", "none"]


def reduce(loss: Tensor, reduction: Reduction) -> Tensor:
    """``loss`` averaged, summed or left per element."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _same_shape(op: str, a: Tensor, b: Tensor) -> None:
    if list(a.shape) != list(b.shape):
        raise ShapeError(f"{op}: predictions {show(a.shape)} and targets {show(b.shape)} differ")


@functools.lru_cache(maxsize=64)
def _class_ids(classes: int, device) -> Tensor:
    """``arange(classes)`` on ``device``, made once (only ever read)."""
    return Tensor.arange(classes, device=device)


class CrossEntropyLoss(Module):
    """Mean cross entropy of ``[batch, classes]`` scores against int targets ``[batch]``.

    ``logits``: the scores are logits (log-softmax is taken), else probabilities (their log is
    taken). ``weights``: one per class; the mean is weighted by the targets' weights, as in
    PyTorch. ``smoothing``: label smoothing ``α``, the target distribution being
    ``(1 - α) * one_hot + α / classes``. ``pad_tokens``: targets with these ids are left out.

    A target outside ``[0, classes)`` that is not a pad token raises ``ShapeError`` naming it,
    its position and the range, as PyTorch raises: checked where the backend keeps values on the
    host (ndarray), and on GPU backends in debug mode (``BURNISH_DEBUG=1``), since reading the
    targets there costs a synchronisation per step. Unchecked, the plain mean (no weights,
    smoothing or pad tokens) gathers each target's score, and the gather's own check on the
    device raises ``ShapeError`` at the next read; the other forms count such a target as a
    class no score belongs to, and the loss is silently wrong.
    """

    logits: bool = True
    weights: Sequence[float] | None = None
    smoothing: float | None = None
    pad_tokens: Sequence[int] | None = None

    def forward(self, scores: Tensor, targets: Tensor) -> Tensor:
        if scores.ndim != 2 or targets.ndim != 1 or scores.shape[0] != targets.shape[0]:
            raise ShapeError(f"cross entropy: scores must be [batch, classes] and targets "
                             f"[batch], got {show(scores.shape)} and {show(targets.shape)}")
        batch, classes = scores.shape
        scores = _amp.full(scores)
        if checks_values(targets.device):
            pads = tuple(self.pad_tokens or ())
            guard(functools.partial(_check_targets, classes=classes, pads=pads,
                                    scores_shape=tuple(scores.shape)),
                  targets, key=(classes, pads, tuple(scores.shape)))
        log_probs = F.log_softmax(scores, 1) if self.logits else scores.log()
        if self.weights is None and not self.smoothing and not self.pad_tokens and batch:
            # The plain mean, each target's log-probability gathered: a training step's loss
            # is on its hot path, and its gradient keeps the targets, not a [batch, classes]
            # one-hot matrix (a language model's largest saved tensor beside the logits).
            picked = log_probs.gather(1, targets.unsqueeze(1))
            return picked.sum() * (-1.0 / batch)
        one_hot = (targets.unsqueeze(1) == _class_ids(classes, scores.device))
        one_hot = one_hot.cast(scores.dtype)
        weights = None
        if self.weights is not None:
            if len(self.weights) != classes:
                raise ShapeError(f"cross entropy: {len(self.weights)} class weights for "
                                 f"{classes} classes")
            weights = Tensor.from_data([float(w) for w in self.weights], scores.device,
                                       scores.dtype).unsqueeze(0)
        keep = Tensor.ones([targets.shape[0]], scores.device, scores.dtype)
        for pad in self.pad_tokens or ():
            keep = keep * (targets != pad).cast(scores.dtype)
        weighted = log_probs if weights is None else log_probs * weights
        nll = -(weighted * one_hot).sum(1)
        if self.smoothing:
            smooth = -weighted.sum(1) * (1.0 / classes)
            nll = nll * (1.0 - self.smoothing) + smooth * self.smoothing
        # The mean's denominator: the kept targets' weights (their count without weights).
        per_target = keep if weights is None else (one_hot * weights).sum(1) * keep
        return (nll * keep).sum() / per_target.sum()


def _check_targets(values: np.ndarray, classes: int, pads: Sequence[int] | None,
                   scores_shape) -> None:
    bad = (values < 0) | (values >= classes)
    if pads:
        bad &= ~np.isin(values, np.asarray(list(pads)))
    if not bad.any():
        return
    index = int(np.argmax(bad))
    value = values[index].item()
    hint = ""
    if value < 0:
        hint = f"; to leave such targets out, name them in pad_tokens (pad_tokens=[{value}])"
    count = int(bad.sum())
    others = f" ({count - 1} other target{'s' if count > 2 else ''} too)" if count > 1 else ""
    raise ShapeError(f"cross entropy: target {value} at index {index} is outside the classes "
                     f"[0, {classes}) of scores {show(scores_shape)}{others}{hint}")


class BinaryCrossEntropyLoss(Module):
    """Binary cross entropy of predictions against targets in [0, 1] of the same shape;
    ``logits``: predictions are logits (computed stably), else probabilities."""

    logits: bool = False
    reduction: Reduction = "mean"

    def forward(self, predictions: Tensor, targets: Tensor) -> Tensor:
        _same_shape("binary cross entropy", predictions, targets)
        predictions, targets = _amp.full(predictions), _amp.full(targets)
        targets = targets.cast(predictions.dtype)
        if self.logits:
            # max(x, 0) - x * t + log(1 + exp(-|x|)), as softplus(x) - x * t.
            loss = softplus(predictions) - predictions * targets
        else:
            p = predictions.clamp(1e-12, 1.0 - 1e-7)
            loss = -(targets * p.log() + (1.0 - targets) * (1.0 - p).log())
        return reduce(loss, self.reduction)


class MseLoss(Module):
    """Mean (or sum) of squared differences."""

    reduction: Reduction = "mean"

    def forward(self, predictions: Tensor, targets: Tensor) -> Tensor:
        _same_shape("mse", predictions, targets)
        predictions, targets = _amp.full(predictions), _amp.full(targets)
        diff = predictions - targets
        return reduce(diff * diff, self.reduction)


class HuberLoss(Module):
    """``0.5 * d^2`` where ``|d| <= delta``, ``delta * (|d| - 0.5 * delta)`` elsewhere."""

    delta: float = 1.0
    reduction: Reduction = "mean"

    def forward(self, predictions: Tensor, targets: Tensor) -> Tensor:
        _same_shape("huber", predictions, targets)
        predictions, targets = _amp.full(predictions), _amp.full(targets)
        diff = predictions - targets
        size = diff.abs()
        loss = where(size <= self.delta, diff * diff * 0.5,
                     (size - 0.5 * self.delta) * self.delta)
        return reduce(loss, self.reduction)


class SmoothL1Loss(Module):
    """``0.5 * d^2 / beta`` where ``|d| < beta``, ``|d| - 0.5 * beta`` elsewhere (PyTorch's
    ``SmoothL1Loss``: Huber divided by ``beta``; ``beta = 0`` is the L1 loss)."""

    beta: float = 1.0
    reduction: Reduction = "mean"

    def forward(self, predictions: Tensor, targets: Tensor) -> Tensor:
        _same_shape("smooth l1", predictions, targets)
        predictions, targets = _amp.full(predictions), _amp.full(targets)
        diff = predictions - targets
        size = diff.abs()
        if self.beta == 0.0:
            return reduce(size, self.reduction)
        loss = where(size < self.beta, diff * diff * (0.5 / self.beta), size - 0.5 * self.beta)
        return reduce(loss, self.reduction)


class KlDivLoss(Module):
    """Kullback-Leibler divergence ``sum target * (log(target) - log_probs)`` of a target
    distribution from predicted ``log_probs`` (PyTorch's ``KLDivLoss``; the input is a log).

    ``log_target``: targets are log-probabilities too. Terms with a zero target count zero.
    ``reduction``: ``"batchmean"`` (the default: the sum over a batch's first dim divided by
    its size, the true KL per sample), ``"mean"`` over every element, ``"sum"`` or ``"none"``.
    """

    log_target: bool = False
    reduction: Literal["batchmean", "mean", "sum", "none"] = "batchmean"

    def forward(self, log_probs: Tensor, targets: Tensor) -> Tensor:
        _same_shape("kl divergence", log_probs, targets)
        log_probs, targets = _amp.full(log_probs), _amp.full(targets)
        targets = targets.cast(log_probs.dtype)
        if self.log_target:
            loss = targets.exp() * (targets - log_probs)
        else:
            # xlogy: 0 * log(0) is 0, and log of the clamped target keeps it finite.
            positive = targets > 0
            target_log = targets.clamp_min(float(np.finfo(targets.dtype.numpy).tiny)).log()
            loss = where(positive, targets * (target_log - log_probs), 0.0)
        if self.reduction == "batchmean":
            return loss.sum() / (log_probs.shape[0] if log_probs.ndim else 1)
        return reduce(loss, self.reduction)


class PoissonNllLoss(Module):
    """Negative log-likelihood of counts ``targets`` under a Poisson of rate ``predictions``
    (PyTorch's ``PoissonNLLLoss``): ``exp(x) - t * x`` when ``log_input`` (the prediction is
    the log-rate), else ``x - t * log(x + eps)``. ``full`` adds Stirling's approximation of
    ``log(t!)``, ``t * log(t) - t + 0.5 * log(2 pi t)``, where ``t > 1``."""

    log_input: bool = True
    full: bool = False
    eps: float = 1e-8
    reduction: Reduction = "mean"

    def forward(self, predictions: Tensor, targets: Tensor) -> Tensor:
        _same_shape("poisson nll", predictions, targets)
        predictions, targets = _amp.full(predictions), _amp.full(targets)
        targets = targets.cast(predictions.dtype)
        if self.log_input:
            loss = predictions.exp() - targets * predictions
        else:
            loss = predictions - targets * (predictions + self.eps).log()
        if self.full:
            safe = targets.clamp_min(1.0)
            stirling = safe * safe.log() - safe + (safe * (2 * math.pi)).log() * 0.5
            loss = loss + where(targets > 1, stirling, 0.0)
        return reduce(loss, self.reduction)
