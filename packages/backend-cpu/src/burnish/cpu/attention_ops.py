"""Attention on the CPU: scores materialised and multiplied through NumPy's BLAS (the
protocol's default) for float32 and float64, where the flash kernels' workgroup tiles, written
for GPUs' on-chip memory, would run as loops over arrays."""

from __future__ import annotations

from burnish.backend.attention_ops import AttentionOps
from burnish.jit.backend.attention_ops import JitAttentionOps
from burnish.jit.tensor import JitTensor


class CpuAttentionOps(JitAttentionOps):
    def attention(self, q: JitTensor, k: JitTensor, v: JitTensor, mask: JitTensor | None,
                  scale: float, causal: bool, dtype) -> tuple[JitTensor, JitTensor]:
        if q.runtime.blas(q.dtype):  # type: ignore[attr-defined]  # CpuRuntime's
            return AttentionOps.attention(self, q, k, v, mask, scale, causal, dtype)
        return super().attention(q, k, v, mask, scale, causal, dtype)

    def attention_backward(self, q: JitTensor, k: JitTensor, v: JitTensor,
                           mask: JitTensor | None, out: JitTensor, lse: JitTensor,
                           grad: JitTensor, scale: float, causal: bool, dtype
                           ) -> tuple[JitTensor, JitTensor, JitTensor]:
        if q.runtime.blas(q.dtype):  # type: ignore[attr-defined]  # CpuRuntime's
            return AttentionOps.attention_backward(self, q, k, v, mask, out, lse, grad, scale,
                                                   causal, dtype)
        return super().attention_backward(q, k, v, mask, out, lse, grad, scale, causal, dtype)
