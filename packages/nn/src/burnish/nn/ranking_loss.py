"""Ranking and embedding losses: margin ranking, cosine embedding and triplet margin."""

from __future__ import annotations

from burnish import Tensor, where
from burnish import functional as F
from burnish.errors import ShapeError
from burnish.nn.loss import Reduction, _same_shape, reduce
from burnish.nn.module import Module
from burnish.shape import show


def _check_targets(op: str, inputs: Tensor, targets: Tensor) -> None:
    expected = list(inputs.shape[:-1]) if op == "cosine embedding" else list(inputs.shape)
    if list(targets.shape) != expected:
        raise ShapeError(f"{op}: targets {show(targets.shape)} must be {show(expected)} for "
                         f"inputs {show(inputs.shape)}")


class MarginRankingLoss(Module):
    """``max(0, -y * (x1 - x2) + margin)``: ``y = 1`` says ``x1`` should rank above ``x2`` by
    ``margin``, ``y = -1`` the reverse (PyTorch's ``MarginRankingLoss``)."""

    margin: float = 0.0
    reduction: Reduction = "mean"

    def forward(self, input1: Tensor, input2: Tensor, targets: Tensor) -> Tensor:
        _same_shape("margin ranking", input1, input2)
        _check_targets("margin ranking", input1, targets)
        targets = targets.cast(input1.dtype)
        return reduce(F.relu(-targets * (input1 - input2) + self.margin), self.reduction)


class CosineEmbeddingLoss(Module):
    """For ``[..., d]`` embeddings and targets ``[...]`` of ±1: ``1 - cos(x1, x2)`` where the
    target is 1 (similar), ``max(0, cos(x1, x2) - margin)`` where it is -1 (PyTorch's
    ``CosineEmbeddingLoss``; norms are kept off zero by ``eps``)."""

    margin: float = 0.0
    eps: float = 1e-12
    reduction: Reduction = "mean"

    def forward(self, input1: Tensor, input2: Tensor, targets: Tensor) -> Tensor:
        _same_shape("cosine embedding", input1, input2)
        _check_targets("cosine embedding", input1, targets)
        dot = (input1 * input2).sum(-1)
        norms = ((input1 * input1).sum(-1) + self.eps) * ((input2 * input2).sum(-1) + self.eps)
        cosine = dot * norms.rsqrt()
        loss = where(targets > 0, 1.0 - cosine, F.relu(cosine - self.margin))
        return reduce(loss, self.reduction)


class TripletMarginLoss(Module):
    """``max(d(a, p) - d(a, n) + margin, 0)`` for anchors, positives and negatives ``[..., d]``,
    ``d`` the ``p``-norm distance over the last dim of ``x - y + eps`` (PyTorch's
    ``TripletMarginLoss``). ``swap``: ``d(a, n)`` is the smaller of it and ``d(p, n)``."""

    margin: float = 1.0
    p: float = 2.0
    eps: float = 1e-6
    swap: bool = False
    reduction: Reduction = "mean"

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        _same_shape("triplet margin", anchor, positive)
        _same_shape("triplet margin", anchor, negative)
        to_positive = self._distance(anchor, positive)
        to_negative = self._distance(anchor, negative)
        if self.swap:
            to_negative = to_negative.minimum(self._distance(positive, negative))
        return reduce(F.relu(to_positive - to_negative + self.margin), self.reduction)

    def _distance(self, x: Tensor, y: Tensor) -> Tensor:
        diff = (x - y + self.eps).abs()
        if self.p == 2.0:
            return (diff * diff).sum(-1).sqrt()
        return diff.powf(self.p).sum(-1).powf(1.0 / self.p)
