"""The text classification example's model: token and position embeddings, a transformer
encoder, pooling over the tokens and a linear head; and the batches it reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from burnish import Tensor, nn
from burnish.nn.initializer import Normal
from burnish.train import ClassificationOutput


@dataclass
class TextBatch:
    """``tokens`` int ``[batch, seq]`` (``pad_id`` after each text's end), ``mask_pad`` bool
    ``[batch, seq]`` (true at padding) and ``targets`` int ``[batch]``."""

    tokens: Tensor
    mask_pad: Tensor
    targets: Tensor


class TextBatcher:
    """Items ``(token_ids, label)``, the ids already padded to one length, to a ``TextBatch``."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def batch(self, items: list[tuple[np.ndarray, int]], device) -> TextBatch:
        tokens = np.stack([ids for ids, _ in items]).astype(np.int64)
        targets = np.array([label for _, label in items], dtype=np.int64)
        return TextBatch(
            tokens=Tensor.from_numpy(tokens, device),
            mask_pad=Tensor.from_numpy(tokens == self.pad_id, device),
            targets=Tensor.from_numpy(targets, device),
        )


class TextClassifier(nn.Module):
    """``[batch, seq]`` token ids (with their padding mask) to ``[batch, classes]`` logits."""

    tokens: nn.Embedding
    positions: nn.Embedding
    dropout: nn.Dropout
    encoder: nn.TransformerEncoder
    norm: nn.LayerNorm
    head: nn.Linear
    pooling: str = "mean"

    def forward(self, tokens: Tensor, mask_pad: Tensor) -> Tensor:
        seq = tokens.shape[1]
        positions = Tensor.arange(seq, device=tokens.device).unsqueeze(0)
        x = self.dropout(self.tokens(tokens) + self.positions(positions))  # [b, seq, d]
        x = self.norm(self.encoder(x, mask_pad))
        if self.pooling == "first":  # the [CLS] token the tokenizer puts first
            pooled = x[:, 0]
        else:  # the mean over the text's tokens, padding left out
            keep = mask_pad.logical_not().float().unsqueeze(-1)  # [b, seq, 1]
            pooled = (x * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        return self.head(pooled)

    def forward_classification(self, batch: TextBatch) -> ClassificationOutput:
        device = self.head.weight.device
        logits = self(batch.tokens.to_device(device), batch.mask_pad.to_device(device))
        targets = batch.targets.to_device(logits.device)
        return ClassificationOutput(nn.CrossEntropyLoss()(logits, targets), logits, targets)


class TextClassifierConfig(nn.Config):
    vocab_size: int
    classes: int
    max_length: int = 64
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    dropout: float = 0.1
    pooling: Literal["mean", "first"] = "mean"

    def init(self, device=None) -> TextClassifier:
        if self.pooling not in ("mean", "first"):
            raise ValueError(f"pooling is 'mean' or 'first', not {self.pooling!r}")
        embedding = Normal(0.0, 0.02)
        return TextClassifier(
            tokens=nn.EmbeddingConfig(self.vocab_size, self.d_model, embedding).init(device),
            positions=nn.EmbeddingConfig(self.max_length, self.d_model, embedding).init(device),
            dropout=nn.Dropout(self.dropout),
            encoder=nn.TransformerEncoderConfig(
                self.d_model, self.d_ff, self.n_heads, self.n_layers, self.dropout,
                norm_first=True,
            ).init(device),
            norm=nn.LayerNormConfig(self.d_model).init(device),
            head=nn.LinearConfig(self.d_model, self.classes).init(device),
            pooling=self.pooling,
        )
