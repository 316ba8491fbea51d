"""The text-generation example's causal transformer language model, and sampling from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import burnish.functional as F
from burnish import Tensor, nn
from burnish.train import ClassificationOutput


@dataclass
class TextBatch:
    """``tokens`` int64 ``[batch, block + 1]``: the model reads the first ``block`` of each
    row and predicts the last ``block`` (each token's successor)."""

    tokens: Tensor


class TextBatcher:
    """Stacks windows of token ids (int64 NumPy arrays of one length) into a ``TextBatch``."""

    def batch(self, items: list[np.ndarray], device=None) -> TextBatch:
        return self.to_tensors(self.collate(items), device)

    def collate(self, items: list[np.ndarray]) -> np.ndarray:
        return np.stack(items).astype(np.int64)

    def to_tensors(self, collated: np.ndarray, device=None) -> TextBatch:
        return TextBatch(Tensor.from_numpy(collated, device))


class LanguageModel(nn.Module):
    """``[batch, seq]`` token ids to ``[batch, seq, vocab]`` logits of the next token: token
    plus learned position embeddings, a pre-norm transformer whose attention is causal (a
    position sees itself and those before it), a final layer norm and a linear head."""

    tokens: nn.Embedding
    positions: nn.Embedding
    encoder: nn.TransformerEncoder
    norm: nn.LayerNorm
    head: nn.Linear

    def forward(self, tokens: Tensor) -> Tensor:
        seq = tokens.shape[1]
        device = self.head.weight.device
        tokens = tokens.to_device(device)
        x = self.tokens(tokens) + self.positions(Tensor.arange(seq, device=device))
        x = self.encoder(x, mask_attn=nn.causal_mask(seq, device))
        return self.head(self.norm(x))

    def forward_classification(self, batch: TextBatch) -> ClassificationOutput:
        """The next-token loss over every position of the batch (the Learner's step)."""
        inputs, targets = batch.tokens[:, :-1], batch.tokens[:, 1:]
        logits = self(inputs)
        vocab = logits.shape[-1]
        logits = logits.reshape([-1, vocab])
        targets = targets.reshape([-1]).to_device(logits.device)
        return ClassificationOutput(nn.CrossEntropyLoss()(logits, targets), logits, targets)


class LanguageModelConfig(nn.Config):
    vocab_size: int
    block_size: int = 64
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    dropout: float = 0.1

    def init(self, device=None) -> LanguageModel:
        return LanguageModel(
            tokens=nn.EmbeddingConfig(self.vocab_size, self.d_model,
                                      nn.Normal(0.0, 0.02)).init(device),
            positions=nn.EmbeddingConfig(self.block_size, self.d_model,
                                         nn.Normal(0.0, 0.02)).init(device),
            encoder=nn.TransformerEncoderConfig(self.d_model, 4 * self.d_model, self.n_heads,
                                                self.n_layers, self.dropout,
                                                norm_first=True).init(device),
            norm=nn.LayerNormConfig(self.d_model).init(device),
            head=nn.LinearConfig(self.d_model, self.vocab_size).init(device),
        )


def generate(model: LanguageModel, prompt: list[int], length: int, block_size: int,
             temperature: float = 1.0, top_k: int | None = None,
             progress: Callable[[int], None] | None = None) -> list[int]:
    """``length`` token ids sampled one at a time after ``prompt``: the logits of the next
    token (given the last ``block_size`` tokens) divided by ``temperature``, kept to the
    ``top_k`` largest (all when ``None``), softmaxed, then drawn with ``multinomial``.
    ``progress(i)`` is called after each token."""
    device = model.head.weight.device
    tokens = list(prompt)
    generated = []
    for i in range(length):
        context = Tensor.from_data([tokens[-block_size:]], device)
        logits = model(context)[0, -1] / temperature  # [vocab]
        k = logits.shape[0] if top_k is None else min(top_k, logits.shape[0])
        values, indices = logits.topk_with_indices(k)
        choice = F.softmax(values, 0).multinomial(1)
        token = int(indices.gather(0, choice).item())
        tokens.append(token)
        generated.append(token)
        if progress is not None:
            progress(i)
    return generated
