"""Transformers: the position-wise feed-forward block and encoder and decoder stacks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from burnish import Device, Tensor
from burnish.nn.activation import Gelu, Relu
from burnish.nn.attention import MultiHeadAttention, MultiHeadAttentionConfig
from burnish.nn.config import Config
from burnish.nn.dropout import Dropout
from burnish.nn.initializer import Initializer
from burnish.nn.linear import DEFAULT_INITIALIZER, Linear, LinearConfig
from burnish.nn.module import Module
from burnish.nn.norm import LayerNorm, LayerNormConfig

Activation = Literal["gelu", "relu"]
ACTIVATIONS: dict[str, type[Gelu] | type[Relu]] = {"gelu": Gelu, "relu": Relu}


def _activation(name: str) -> Gelu | Relu:
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]()


class PositionWiseFeedForwardConfig(Config):
    d_model: int
    d_ff: int
    dropout: float = 0.1
    activation: Activation = "gelu"
    initializer: Initializer = DEFAULT_INITIALIZER

    def init(self, device: Device | str | None = None) -> PositionWiseFeedForward:
        return PositionWiseFeedForward(
            linear_inner=LinearConfig(self.d_model, self.d_ff,
                                      initializer=self.initializer).init(device),
            linear_outer=LinearConfig(self.d_ff, self.d_model,
                                      initializer=self.initializer).init(device),
            dropout=Dropout(self.dropout),
            activation=_activation(self.activation),
        )


class PositionWiseFeedForward(Module):
    """``linear_outer(dropout(activation(linear_inner(x))))`` on ``[..., d_model]``."""

    linear_inner: Linear
    linear_outer: Linear
    dropout: Dropout
    activation: Gelu | Relu

    def forward(self, x: Tensor) -> Tensor:
        return self.linear_outer(self.dropout(self.activation(self.linear_inner(x))))


class TransformerEncoderConfig(Config):
    """An encoder of ``n_layers`` layers (self-attention, then feed-forward). ``norm_first``:
    pre-norm (layer norm before each block, inside the residual) instead of the original
    post-norm (after each residual sum)."""

    d_model: int
    d_ff: int
    n_heads: int
    n_layers: int
    dropout: float = 0.1
    norm_first: bool = False
    activation: Activation = "gelu"
    initializer: Initializer = DEFAULT_INITIALIZER

    def init(self, device: Device | str | None = None) -> TransformerEncoder:
        return TransformerEncoder([self._layer(device) for _ in range(self.n_layers)])

    def _layer(self, device: Device | str | None) -> TransformerEncoderLayer:
        return TransformerEncoderLayer(
            attention=MultiHeadAttentionConfig(self.d_model, self.n_heads, self.dropout,
                                               initializer=self.initializer).init(device),
            feed_forward=PositionWiseFeedForwardConfig(self.d_model, self.d_ff, self.dropout,
                                                       self.activation,
                                                       self.initializer).init(device),
            norm_1=LayerNormConfig(self.d_model).init(device),
            norm_2=LayerNormConfig(self.d_model).init(device),
            dropout=Dropout(self.dropout),
            norm_first=self.norm_first,
        )


class TransformerEncoderLayer(Module):
    """One encoder layer; see ``TransformerEncoder``."""

    attention: MultiHeadAttention
    feed_forward: PositionWiseFeedForward
    norm_1: LayerNorm
    norm_2: LayerNorm
    dropout: Dropout
    norm_first: bool = False

    def forward(self, x: Tensor, mask_pad: Tensor | None = None,
                mask_attn: Tensor | None = None, causal: bool = False) -> Tensor:
        def attend(h: Tensor) -> Tensor:
            return self.attention(h, mask_pad=mask_pad, mask_attn=mask_attn,
                                  need_weights=False, causal=causal).context

        x = _residual(x, attend, self.norm_1, self.dropout, self.norm_first)
        return _residual(x, self.feed_forward, self.norm_2, self.dropout, self.norm_first)


class TransformerEncoder(Module):
    """A stack of encoder layers on ``[batch, seq, d_model]``.

    ``mask_pad`` ``[batch, seq]`` (true at padding) and ``mask_attn`` (``[seq, seq]`` or
    ``[batch, seq, seq]``, true where attention is forbidden) go to every layer's attention;
    ``causal=True`` forbids each position the ones after it without a mask tensor (see
    ``MultiHeadAttention``).
    """

    layers: list[TransformerEncoderLayer]

    def forward(self, x: Tensor, mask_pad: Tensor | None = None,
                mask_attn: Tensor | None = None, causal: bool = False) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask_pad, mask_attn, causal)
        return x


class TransformerDecoderConfig(Config):
    """A decoder of ``n_layers`` layers (masked self-attention, cross-attention to the
    encoder's output, feed-forward); fields as in ``TransformerEncoderConfig``."""

    d_model: int
    d_ff: int
    n_heads: int
    n_layers: int
    dropout: float = 0.1
    norm_first: bool = False
    activation: Activation = "gelu"
    initializer: Initializer = DEFAULT_INITIALIZER

    def init(self, device: Device | str | None = None) -> TransformerDecoder:
        return TransformerDecoder([self._layer(device) for _ in range(self.n_layers)])

    def _layer(self, device: Device | str | None) -> TransformerDecoderLayer:
        attention = MultiHeadAttentionConfig(self.d_model, self.n_heads, self.dropout,
                                             initializer=self.initializer)
        return TransformerDecoderLayer(
            self_attention=attention.init(device),
            cross_attention=attention.init(device),
            feed_forward=PositionWiseFeedForwardConfig(self.d_model, self.d_ff, self.dropout,
                                                       self.activation,
                                                       self.initializer).init(device),
            norm_1=LayerNormConfig(self.d_model).init(device),
            norm_2=LayerNormConfig(self.d_model).init(device),
            norm_3=LayerNormConfig(self.d_model).init(device),
            dropout=Dropout(self.dropout),
            norm_first=self.norm_first,
        )


class TransformerDecoderLayer(Module):
    """One decoder layer; see ``TransformerDecoder``."""

    self_attention: MultiHeadAttention
    cross_attention: MultiHeadAttention
    feed_forward: PositionWiseFeedForward
    norm_1: LayerNorm
    norm_2: LayerNorm
    norm_3: LayerNorm
    dropout: Dropout
    norm_first: bool = False

    def forward(self, target: Tensor, memory: Tensor, target_mask_pad: Tensor | None = None,
                target_mask_attn: Tensor | None = None, memory_mask_pad: Tensor | None = None,
                memory_mask_attn: Tensor | None = None) -> Tensor:
        def attend_self(h: Tensor) -> Tensor:
            return self.self_attention(h, mask_pad=target_mask_pad,
                                       mask_attn=target_mask_attn, need_weights=False).context

        def attend_memory(h: Tensor) -> Tensor:
            return self.cross_attention(h, memory, mask_pad=memory_mask_pad,
                                        mask_attn=memory_mask_attn, need_weights=False).context

        x = _residual(target, attend_self, self.norm_1, self.dropout, self.norm_first)
        x = _residual(x, attend_memory, self.norm_2, self.dropout, self.norm_first)
        return _residual(x, self.feed_forward, self.norm_3, self.dropout, self.norm_first)


class TransformerDecoder(Module):
    """A stack of decoder layers: ``target`` ``[batch, seq_t, d_model]`` attends to itself
    (pass ``target_mask_attn=causal_mask(seq_t)`` for autoregressive decoding) and to
    ``memory`` ``[batch, seq_m, d_model]``, the encoder's output. The ``target_*`` masks go to
    the self-attention, the ``memory_*`` masks (``memory_mask_pad`` ``[batch, seq_m]``) to the
    cross-attention."""

    layers: list[TransformerDecoderLayer]

    def forward(self, target: Tensor, memory: Tensor, target_mask_pad: Tensor | None = None,
                target_mask_attn: Tensor | None = None, memory_mask_pad: Tensor | None = None,
                memory_mask_attn: Tensor | None = None) -> Tensor:
        x = target
        for layer in self.layers:
            x = layer(x, memory, target_mask_pad, target_mask_attn, memory_mask_pad,
                      memory_mask_attn)
        return x


def _residual(x: Tensor, block: Callable[[Tensor], Tensor], norm: LayerNorm, dropout: Dropout,
              norm_first: bool) -> Tensor:
    """``x + dropout(block(norm(x)))`` (pre-norm) or ``norm(x + dropout(block(x)))``."""
    if norm_first:
        return x + dropout(block(norm(x)))
    return norm(x + dropout(block(x)))
