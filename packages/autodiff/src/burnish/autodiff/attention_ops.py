"""Attention with its backward rule: one node, differentiated by the inner backend's
``attention_backward`` (which recomputes the weights from the saved log-sum-exp instead of
keeping the ``seq_q x seq_k`` weights)."""

from __future__ import annotations

from burnish.autodiff.graph import OUT, AutodiffPrimitive
from burnish.backend.attention_ops import AttentionOps
from burnish.dtype import DType

P = AutodiffPrimitive


class AutodiffAttentionOps(AttentionOps):
    """Attention: the inner backend computes, tracked ``q``, ``k`` or ``v`` add a node. The
    log-sum-exp it also returns is not tracked (no gradient flows back through it)."""

    def attention(self, q: P, k: P, v: P, mask: P | None, scale: float, causal: bool,
                  dtype: DType) -> tuple[P, P]:
        inner_mask = None if mask is None else mask.inner
        out, lse = self._inner.attention(q.inner, k.inner, v.inner, inner_mask, scale, causal,
                                         dtype)
        if q.node is None and k.node is None and v.node is None:
            return P(out), P(lse)
        saved = (q, k, v, inner_mask, OUT, lse, scale, causal)
        return self._record(out, (q, k, v), _attention_backward, saved), P(lse)

    def attention_backward(self, q: P, k: P, v: P, mask: P | None, out: P, lse: P, grad: P,
                           scale: float, causal: bool, dtype: DType) -> tuple[P, P, P]:
        tracked = [x for x in (q, k, v, out, lse, grad) if x.node is not None]
        if not tracked:
            grads = self._inner.attention_backward(
                q.inner, k.inner, v.inner, None if mask is None else mask.inner, out.inner,
                lse.inner, grad.inner, scale, causal, dtype)
            return tuple(P(g) for g in grads)  # type: ignore[return-value]  # three
        # Tracked (a gradient of a gradient): the default's composition, differentiable.
        return AttentionOps.attention_backward(self, q, k, v, mask, out, lse, grad, scale,
                                               causal, dtype)


def _attention_backward(b, dtype, g, q, k, v, mask, out, lse, scale, causal):
    return b.attention_backward(q, k, v, mask, out, lse, g, scale, causal, dtype)
