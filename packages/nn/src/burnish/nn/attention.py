"""MultiHeadAttention: scaled dot-product attention over several heads, with its masks."""

from __future__ import annotations

import math
from typing import NamedTuple

from burnish import Device, Tensor
from burnish import functional as F
from burnish.backend.attention_ops import masked_score
from burnish.errors import ShapeError
from burnish.nn.config import Config
from burnish.nn.dropout import Dropout
from burnish.nn.initializer import Initializer
from burnish.nn.linear import DEFAULT_INITIALIZER, Linear, LinearConfig
from burnish.nn.module import Module
from burnish.nn.param import is_autodiff
from burnish.shape import show


def causal_mask(seq_length: int, device: Device | str | None = None) -> Tensor:
    """A bool ``[seq_length, seq_length]`` mask, true above the diagonal: position ``i`` may not
    attend to positions after it (Burn's ``generate_autoregressive_mask``)."""
    rows = Tensor.arange(seq_length, device=device).unsqueeze(1)
    return Tensor.arange(seq_length, device=device).unsqueeze(0) > rows


def masked_fill_value(scores: Tensor) -> float:
    """The most negative finite value of ``scores``' dtype: masked scores get it, so their
    weight is zero, and a row masked everywhere softmaxes to uniform weights instead of NaN."""
    return masked_score(scores.dtype)


class MhaOutput(NamedTuple):
    """What attention returns: ``context`` ``[batch, seq_q, d_model]`` and the attention
    ``weights`` ``[batch, n_heads, seq_q, seq_k]`` (after dropout; ``None`` when the forward
    was asked not to compute them, ``need_weights=False``)."""

    context: Tensor
    weights: Tensor | None


class MultiHeadAttentionConfig(Config):
    d_model: int
    n_heads: int
    dropout: float = 0.1
    bias: bool = True
    initializer: Initializer = DEFAULT_INITIALIZER

    def init(self, device: Device | str | None = None) -> MultiHeadAttention:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible into {self.n_heads} heads")
        linear = LinearConfig(self.d_model, self.d_model, self.bias, self.initializer)
        return MultiHeadAttention(
            query=linear.init(device), key=linear.init(device), value=linear.init(device),
            output=linear.init(device), dropout=Dropout(self.dropout), n_heads=self.n_heads,
        )


class MultiHeadAttention(Module):
    """Multi-head attention (Vaswani et al., 2017), as Burn's and PyTorch's.

    ``forward(query, key, value)`` takes ``[batch, seq, d_model]`` inputs; ``key`` defaults to
    ``query`` and ``value`` to ``key``, so ``mha(x)`` is self-attention and ``mha(x, memory)``
    cross-attention. Each head attends with ``softmax(q @ k^T / sqrt(d_model / n_heads))``;
    dropout applies to the attention weights.

    Masks are bool and true where attention is forbidden (PyTorch's convention):
    ``mask_pad`` ``[batch, seq_k]`` hides padded keys, ``mask_attn`` ``[seq_q, seq_k]`` or
    ``[batch, seq_q, seq_k]`` hides pairs (``causal_mask(seq)`` for decoders). Masked scores are
    filled with the dtype's most negative value before the softmax, so a query with no key left
    gets uniform weights rather than NaN. ``causal=True`` forbids query ``i`` every key ``j > i``
    as ``mask_attn=causal_mask(seq)`` does, without a mask tensor: fused kernels then skip the
    forbidden blocks instead of reading a mask (PyTorch's ``is_causal``).

    ``need_weights=False`` returns no weights (``MhaOutput.weights`` is ``None``) and runs the
    heads through ``functional.scaled_dot_product_attention``: one backend op, which backends
    with a fused kernel (cuda, wgpu, rocm) run without storing the ``seq_q x seq_k`` scores, in
    the forward or the backward pass. The result is the same (up to rounding).
    """

    query: Linear
    key: Linear
    value: Linear
    output: Linear
    dropout: Dropout
    n_heads: int

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None,
                mask_pad: Tensor | None = None, mask_attn: Tensor | None = None,
                need_weights: bool = True, causal: bool = False) -> MhaOutput:
        key = query if key is None else key
        value = key if value is None else value
        if query.ndim != 3 or key.ndim != 3 or value.ndim != 3:
            raise ShapeError(f"attention: query, key and value must be [batch, seq, d_model], "
                             f"got {show(query.shape)}, {show(key.shape)}, {show(value.shape)}")
        if key.shape[1] != value.shape[1]:
            raise ShapeError(f"attention: key {show(key.shape)} and value {show(value.shape)} "
                             f"have different sequence lengths")
        batch, seq_q, d_model = query.dims()
        seq_k = key.shape[1]
        q = self._heads(self.query(query))
        k = self._heads(self.key(key))
        v = self._heads(self.value(value))
        mask = _combined_mask(mask_pad, mask_attn, batch, seq_q, seq_k)
        if not need_weights:
            dropout = self.dropout.prob if is_autodiff(q) else 0.0
            heads = F.scaled_dot_product_attention(q, k, v, mask, causal=causal,
                                                   dropout=dropout)
            context = heads.swap_dims(1, 2).reshape([batch, seq_q, d_model])
            return MhaOutput(self.output(context), None)
        scores = q.matmul(k.transpose()) * (1.0 / math.sqrt(d_model // self.n_heads))
        if causal:
            later = causal_mask(max(seq_q, seq_k), q.device)[:seq_q, :seq_k]
            later = later.reshape([1, 1, seq_q, seq_k])
            mask = later if mask is None else mask | later
        if mask is not None:
            scores = scores.mask_fill(mask, masked_fill_value(scores))
        weights = self.dropout(F.softmax(scores, -1))
        context = weights.matmul(v).swap_dims(1, 2).reshape([batch, seq_q, d_model])
        return MhaOutput(self.output(context), weights)

    def _heads(self, x: Tensor) -> Tensor:
        """``[batch, seq, d_model]`` to ``[batch, n_heads, seq, d_model / n_heads]``."""
        batch, seq, d_model = x.dims()
        return x.reshape([batch, seq, self.n_heads, d_model // self.n_heads]).swap_dims(1, 2)


def _combined_mask(mask_pad: Tensor | None, mask_attn: Tensor | None, batch: int, seq_q: int,
                   seq_k: int) -> Tensor | None:
    """Both masks as one bool mask broadcasting to ``[batch, n_heads, seq_q, seq_k]``."""
    mask = None
    if mask_pad is not None:
        if list(mask_pad.shape) != [batch, seq_k]:
            raise ShapeError(f"attention: mask_pad must be [batch, seq_k] = "
                             f"{show([batch, seq_k])}, got {show(mask_pad.shape)}")
        mask = mask_pad.bool().reshape([batch, 1, 1, seq_k])
    if mask_attn is not None:
        shape = list(mask_attn.shape)
        if shape == [seq_q, seq_k]:
            attn = mask_attn.bool().reshape([1, 1, seq_q, seq_k])
        elif shape == [batch, seq_q, seq_k]:
            attn = mask_attn.bool().reshape([batch, 1, seq_q, seq_k])
        else:
            raise ShapeError(f"attention: mask_attn must be [seq_q, seq_k] = "
                             f"{show([seq_q, seq_k])} or [batch, seq_q, seq_k], got "
                             f"{show(mask_attn.shape)}")
        mask = attn if mask is None else mask | attn
    return mask
