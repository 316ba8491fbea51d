"""Attention as FlashAttention-2-style kernels (``kernels.attention``); shapes the kernels do not
take use the protocol's default, which materialises the scores."""

from __future__ import annotations

from burnish.backend.attention_ops import AttentionOps
from burnish.jit.kernels import attention as flash
from burnish.jit.tensor import JitTensor


class JitAttentionOps(AttentionOps):
    # Defaults for: head dims (of q/k or of v) above ``flash.MAX_HEAD_DIM`` or of 0, for the
    # backward runtimes that bind fewer than ``flash.BACKWARD_BUFFERS`` buffers, and runtimes
    # that prefer the composition (``Runtime.fused_attention``). A runtime's library
    # (``Runtime.library_attention``) goes first.

    def attention(self, q: JitTensor, k: JitTensor, v: JitTensor, mask: JitTensor | None,
                  scale: float, causal: bool, dtype) -> tuple[JitTensor, JitTensor]:
        found = q.runtime.library_attention(q, k, v, mask, scale, causal)
        if found is not None:
            return found
        if not flash.fits(q, v) or not q.runtime.fused_attention(q.dtype):
            return AttentionOps.attention(self, q, k, v, mask, scale, causal, dtype)
        return flash.attention(q, k, v, mask, scale, causal)

    def attention_backward(self, q: JitTensor, k: JitTensor, v: JitTensor,
                           mask: JitTensor | None, out: JitTensor, lse: JitTensor,
                           grad: JitTensor, scale: float, causal: bool, dtype
                           ) -> tuple[JitTensor, JitTensor, JitTensor]:
        found = q.runtime.library_attention_backward(q, k, v, mask, grad, scale, causal)
        if found is not None:
            return found
        if not flash.fits(q, v, backward=True) or not q.runtime.fused_attention(q.dtype):
            return AttentionOps.attention_backward(self, q, k, v, mask, out, lse, grad, scale,
                                                   causal, dtype)
        return flash.attention_backward(q, k, v, mask, out, lse, grad, scale, causal)
