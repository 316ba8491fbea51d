"""Scaled dot-product attention and its gradient, with defaults that materialise the scores.

``q`` is ``[batch, heads, seq_q, head_dim]``, ``k`` ``[batch, heads, seq_k, head_dim]`` and
``v`` ``[batch, heads, seq_k, value_dim]``, one float dtype; ``burnish.functional`` has checked
the shapes. ``mask`` is ``None`` or a 4-d bool primitive broadcastable to ``[batch, heads,
seq_q, seq_k]``, true where a query may not attend to a key; ``causal`` also forbids key ``j``
to query ``i`` where ``j > i`` (the upper-left triangle, PyTorch's ``is_causal``).

Forbidden scores take the dtype's most negative finite value before the softmax (what
``nn.MultiHeadAttention`` has always done): their weight is zero, and a query with no key left
gets uniform weights (the mean of ``v``) rather than NaN.
"""

from __future__ import annotations

from abc import ABC

import ml_dtypes

from burnish.backend.base import Primitive
from burnish.dtype import DType, int64


def masked_score(dtype: DType) -> float:
    """The score a forbidden (query, key) pair takes: ``dtype``'s most negative finite value."""
    return float(ml_dtypes.finfo(dtype.numpy).min)


class AttentionOps(ABC):  # noqa: B024 (only defaults, by design)
    """Attention as one op, so a backend can run it without the ``seq_q x seq_k`` scores.
    The defaults materialise them (matmul, mask_fill, softmax, matmul)."""

    def attention(self, q: Primitive, k: Primitive, v: Primitive, mask: Primitive | None,
                  scale: float, causal: bool, dtype: DType) -> tuple[Primitive, Primitive]:
        """``softmax(q @ k^T * scale, forbidden pairs filled) @ v``: the output ``[batch,
        heads, seq_q, value_dim]`` and each row's log-sum-exp of its (filled) scores,
        ``[batch, heads, seq_q]`` (what ``attention_backward`` recomputes the weights from)."""
        scores = _scores(self, q, k, mask, scale, causal, dtype)
        top = self.max(scores, 3)
        shifted = self.exp(self.sub(scores, top))
        total = self.sum(shifted, 3)
        out = self.matmul(self.div(shifted, total), v)
        lse = self.add(top, self.log(total))
        return out, self.reshape(lse, tuple(q.shape[:3]))

    def attention_backward(self, q: Primitive, k: Primitive, v: Primitive,
                           mask: Primitive | None, out: Primitive, lse: Primitive,
                           grad: Primitive, scale: float, causal: bool, dtype: DType
                           ) -> tuple[Primitive, Primitive, Primitive]:
        """The gradients ``(dq, dk, dv)`` of ``attention`` given ``grad`` of its output;
        ``out`` and ``lse`` are what ``attention`` returned. Forbidden pairs pass no gradient
        to ``q`` and ``k``; a query with no key left passes its uniform weights to ``v``."""
        scores = _scores(self, q, k, mask, scale, causal, dtype)
        weights = self.softmax(scores, 3, dtype)
        dv = self.matmul(_swap_last(self, weights), grad)
        dscores = self.softmax_backward(weights, self.matmul(grad, _swap_last(self, v)), 3,
                                        dtype)
        for forbidden in _forbidden(self, q, k, mask, causal):
            dscores = self.mask_fill(dscores, forbidden, 0.0, dtype)
        dscores = self.mul_scalar(dscores, scale, dtype)
        dq = self.matmul(dscores, k)
        dk = self.matmul(_swap_last(self, dscores), q)
        return dq, dk, dv


def _scores(b: AttentionOps, q: Primitive, k: Primitive, mask: Primitive | None, scale: float,
            causal: bool, dtype: DType) -> Primitive:
    """``q @ k^T * scale`` with the forbidden pairs filled (``masked_score``)."""
    scores = b.mul_scalar(b.matmul(q, _swap_last(b, k)), scale, dtype)
    for forbidden in _forbidden(b, q, k, mask, causal):
        scores = b.mask_fill(scores, forbidden, masked_score(dtype), dtype)
    return scores


def _swap_last(b: AttentionOps, x: Primitive) -> Primitive:
    return b.permute(x, (0, 1, 3, 2))


def _forbidden(b: AttentionOps, q: Primitive, k: Primitive, mask: Primitive | None,
               causal: bool) -> list[Primitive]:
    """The bool masks (each broadcastable to the scores) of the forbidden pairs."""
    masks = [] if mask is None else [mask]
    if causal:
        device = b._device_of(q)
        seq_q, seq_k = q.shape[2], k.shape[2]
        rows = b.reshape(b.arange(0, seq_q, 1, int64, device), (seq_q, 1))
        cols = b.reshape(b.arange(0, seq_k, 1, int64, device), (1, seq_k))
        masks.append(b.greater(cols, rows))
    return masks
