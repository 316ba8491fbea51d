"""The models of bench_train.py, each in burnish.nn and in torch with the same parameter names
and layouts that burnish's PyTorch loader reads, with their sizes, data and training setup."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from resnet18 import burnish_resnet18, torch_resnet18

from burnish import Tensor

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@dataclass(frozen=True)
class Spec:
    """One model of the benchmark: what it is (``title``), its sizes (``full`` for the figures,
    ``small`` to check the script in seconds on a CPU), its optimizer and learning rate."""

    name: str
    title: str
    full: dict[str, int]
    small: dict[str, int]
    optimizer: str  # "adamw", "adam" or "sgd" (momentum 0.9)
    lr: float


SPECS = {
    "gpt": Spec("gpt", "GPT-style causal LM: token embedding + learned positions, {layers} "
                "pre-norm blocks (LayerNorm, causal self-attention of {heads} heads, GELU MLP "
                "4x), d_model {d_model}, seq {seq}, batch {batch}, vocab {vocab}, AdamW",
                dict(vocab=8192, d_model=512, heads=8, layers=6, seq=256, batch=16),
                dict(vocab=64, d_model=32, heads=4, layers=2, seq=16, batch=4), "adamw", 3e-4),
    "resnet": Spec("resnet", "ResNet-18, CIFAR stem, batch {batch} of 3x{size}x{size}, "
                   "BatchNorm in training mode, SGD with momentum 0.9",
                   dict(batch=128, size=32), dict(batch=2, size=8), "sgd", 0.1),
    "lstm": Spec("lstm", "LSTM, {layers} layers {d_input} -> {d_hidden}, seq {seq}, batch "
                 "{batch}, a linear head on the last step ({classes} classes), Adam",
                 dict(layers=2, d_input=256, d_hidden=512, seq=64, batch=64, classes=10),
                 dict(layers=2, d_input=8, d_hidden=16, seq=8, batch=4, classes=10), "adam", 1e-3),
    "mnist": Spec("mnist", "examples/mnist's CNN (2 convs, max pools, dropout 0.25, 2 linear "
                  "layers), batch {batch} of 1x28x28, Adam",
                  dict(batch=64), dict(batch=4), "adam", 1e-3),
    "chargpt": Spec("chargpt", "character-level transformer ({params} parameters): vocab "
                    "{vocab}, d_model {d_model}, {layers} pre-norm blocks of {heads} heads, seq "
                    "{seq}, batch {batch}, AdamW",
                    dict(vocab=65, d_model=64, heads=4, layers=2, seq=64, batch=16),
                    dict(vocab=32, d_model=16, heads=2, layers=1, seq=16, batch=4), "adamw",
                    1e-3),
}

#: Batches made beforehand and cycled through, so that no step waits for data.
BATCHES = 4


def make_data(name: str, sizes: dict[str, int], seed: int = 0) -> list[tuple[np.ndarray, ...]]:
    """``BATCHES`` batches of random inputs and targets for model ``name``."""
    rng = np.random.default_rng(seed)
    batch = sizes["batch"]

    def one() -> tuple[np.ndarray, ...]:
        if name in ("gpt", "chargpt"):
            ids = rng.integers(0, sizes["vocab"], (batch, sizes["seq"] + 1))
            return ids[:, :-1], ids[:, 1:]  # the next token of each position
        if name == "resnet":
            images = rng.standard_normal((batch, 3, sizes["size"], sizes["size"]),
                                         dtype=np.float32)
            return images, rng.integers(0, 10, batch)
        if name == "lstm":
            x = rng.standard_normal((batch, sizes["seq"], sizes["d_input"]), dtype=np.float32)
            return x, rng.integers(0, sizes["classes"], batch)
        images = rng.random((batch, 1, 28, 28), dtype=np.float32)
        return images, rng.integers(0, 10, batch)

    return [one() for _ in range(BATCHES)]


# -- burnish -----------------------------------------------------------------------------------


def burnish_model(name: str, sizes: dict[str, int], device) -> Any:
    """Model ``name`` in burnish.nn on ``device``, with burnish's own initial weights."""
    from burnish import nn

    if name in ("gpt", "chargpt"):
        d_model = sizes["d_model"]

        class Gpt(nn.Module):
            """Token embedding plus a learned position vector, pre-norm transformer blocks
            under a causal mask, a final LayerNorm and a linear head."""

            tokens: nn.Embedding
            positions: nn.Param
            encoder: nn.TransformerEncoder
            norm: nn.LayerNorm
            head: nn.Linear

            def forward(self, ids: Tensor, mask: Tensor | None) -> Tensor:
                # No mask tensor: the causal flag (as torch's is_causal hint).
                x = self.tokens(ids) + self.positions.val()
                return self.head(self.norm(self.encoder(x, mask_attn=mask,
                                                        causal=mask is None)))

        positions = nn.Normal(0.0, 0.02).init([sizes["seq"], d_model], device)
        return Gpt(nn.EmbeddingConfig(sizes["vocab"], d_model).init(device), positions,
                   nn.TransformerEncoderConfig(d_model, 4 * d_model, sizes["heads"],
                                               sizes["layers"], dropout=0.0, norm_first=True,
                                               activation="gelu").init(device),
                   nn.LayerNormConfig(d_model).init(device),
                   nn.LinearConfig(d_model, sizes["vocab"]).init(device))
    if name == "resnet":
        return burnish_resnet18(device, cifar=True, classes=10)
    if name == "lstm":
        class StackedLstm(nn.Module):
            """LSTM layers one over the other, then a linear head on the last step."""

            layers: list[nn.Lstm]
            head: nn.Linear

            def forward(self, x: Tensor) -> Tensor:
                for layer in self.layers:
                    x, _ = layer(x)
                return self.head(x[:, x.shape[1] - 1])

        widths = [sizes["d_input"]] + [sizes["d_hidden"]] * sizes["layers"]
        return StackedLstm([nn.LstmConfig(a, b).init(device) for a, b in zip(widths, widths[1:])],
                           nn.LinearConfig(sizes["d_hidden"], sizes["classes"]).init(device))
    return mnist_config().init(device)


def mnist_config() -> Any:
    """examples/mnist's ``CnnConfig`` (imported from the example, so that the benchmark trains
    the network the example trains)."""
    folder = str(EXAMPLES / "mnist")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    from model import CnnConfig

    return CnnConfig()


def burnish_optimizer(spec: Spec, capturable: bool) -> Any:
    from burnish import optim

    if spec.optimizer == "sgd":
        return optim.Sgd(momentum=0.9)
    if spec.optimizer == "adamw":
        return optim.AdamW(weight_decay=0.01, capturable=capturable)
    return optim.Adam(capturable=capturable)


def burnish_loss(name: str, sizes: dict[str, int], device, causal_mask: str = "flag"
                 ) -> Callable[..., Tensor]:
    """``loss(model, x, y)`` for model ``name``: the mean cross-entropy of its logits.
    ``causal_mask`` (the GPT models): ``"flag"`` (attention's ``causal=True``) or ``"tensor"``
    (``nn.causal_mask``, made once, as a user would hoist it)."""
    from burnish import nn

    cross_entropy = nn.CrossEntropyLoss()
    if name in ("gpt", "chargpt"):
        mask = nn.causal_mask(sizes["seq"], device) if causal_mask == "tensor" else None
        vocab = sizes["vocab"]

        def loss(model, ids, targets):
            logits = model(ids, mask)
            return cross_entropy(logits.reshape([-1, vocab]), targets.reshape([-1]))

        return loss
    return lambda model, x, y: cross_entropy(model(x), y)


def load_torch_weights(name: str, model: Any, state: dict[str, np.ndarray]) -> Any:
    """``model`` holding the weights of a torch model's ``state`` (its state dict as NumPy
    arrays), read by burnish's PyTorch loader (Linear weights transposed, norms' weight and
    bias as gamma and beta, packed attention and LSTM weights split), so that both frameworks
    start from the same point."""
    from burnish.nn.import_weights import load_weights

    remap = []
    if name == "lstm":  # torch's nn.LSTM packs every layer in one module: one Lstm each here
        remap = [(r"^lstm\.(\w+)_l(\d+)$", r"layers.\2.\1_l0")]
    return load_weights(model, state, remap=remap).module


# -- torch -------------------------------------------------------------------------------------


def torch_model(torch, name: str, sizes: dict[str, int], attention: str = "torch") -> Any:
    """Model ``name`` in torch (on the CPU; the caller moves it), with the parameter names
    that ``load_torch_weights`` maps onto burnish's model. ``attention``: ``"torch"`` uses
    ``nn.TransformerEncoder`` (whose training path calls ``scaled_dot_product_attention``, a
    fused kernel where the GPU has one); ``"math"`` writes attention out as burnish does
    (matmul, masked fill, softmax, matmul)."""
    nn = torch.nn
    if name in ("gpt", "chargpt"):
        d_model, seq, heads = sizes["d_model"], sizes["seq"], sizes["heads"]

        class Gpt(nn.Module):
            def __init__(self):
                super().__init__()
                self.tokens = nn.Embedding(sizes["vocab"], d_model)
                self.positions = nn.Parameter(torch.randn(seq, d_model) * 0.02)
                layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0,
                                                   activation="gelu", batch_first=True,
                                                   norm_first=True)
                self.encoder = nn.TransformerEncoder(layer, sizes["layers"],
                                                     enable_nested_tensor=False)
                self.norm = nn.LayerNorm(d_model)
                self.head = nn.Linear(d_model, sizes["vocab"])

            def forward(self, ids, mask):
                x = self.tokens(ids) + self.positions
                if attention == "math":
                    for block in self.encoder.layers:
                        x = x + math_attention(torch, block.self_attn, block.norm1(x), mask)
                        x = x + block.linear2(torch.nn.functional.gelu(
                            block.linear1(block.norm2(x))))
                else:
                    x = self.encoder(x, mask=mask, is_causal=True)
                return self.head(self.norm(x))

        return Gpt()
    if name == "resnet":
        return torch_resnet18(torch, cifar=True, classes=10)
    if name == "lstm":
        class StackedLstm(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(sizes["d_input"], sizes["d_hidden"], sizes["layers"],
                                    batch_first=True)
                self.head = nn.Linear(sizes["d_hidden"], sizes["classes"])

            def forward(self, x):
                return self.head(self.lstm(x)[0][:, -1])

        return StackedLstm()
    config = mnist_config()

    class Cnn(nn.Module):
        """examples/mnist's CNN, layer for layer."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, config.channels1, 3, padding=1)
            self.conv2 = nn.Conv2d(config.channels1, config.channels2, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.dropout = nn.Dropout(config.dropout)
            self.hidden = nn.Linear(config.channels2 * 49, config.hidden)
            self.output = nn.Linear(config.hidden, 10)

        def forward(self, images):
            x = self.pool(torch.relu(self.conv1(images)))
            x = self.pool(torch.relu(self.conv2(x)))
            x = self.dropout(torch.flatten(x, 1))
            return self.output(self.dropout(torch.relu(self.hidden(x))))

    return Cnn()


def math_attention(torch, attention, x, mask):
    """torch ``MultiheadAttention``'s self-attention written out as burnish computes it."""
    batch, seq, d_model = x.shape
    heads = attention.num_heads
    q, k, v = torch.nn.functional.linear(x, attention.in_proj_weight,
                                         attention.in_proj_bias).chunk(3, -1)
    q, k, v = (t.reshape(batch, seq, heads, -1).transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-2, -1)) * (1.0 / (d_model // heads) ** 0.5)
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, d_model)
    return attention.out_proj(context)


def torch_optimizer(torch, spec: Spec, params) -> Any:
    """The optimizer of ``spec`` with the same settings as ``burnish_optimizer``'s."""
    if spec.optimizer == "sgd":
        return torch.optim.SGD(params, spec.lr, momentum=0.9)
    if spec.optimizer == "adamw":
        return torch.optim.AdamW(params, spec.lr, weight_decay=0.01)
    return torch.optim.Adam(params, spec.lr)


def torch_loss(torch, name: str, sizes: dict[str, int], device) -> Callable[..., Any]:
    """``loss(model, x, y)`` as ``burnish_loss``'s."""
    cross_entropy = torch.nn.functional.cross_entropy
    if name in ("gpt", "chargpt"):
        seq, vocab = sizes["seq"], sizes["vocab"]
        mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=device), 1)

        def loss(model, ids, targets):
            return cross_entropy(model(ids, mask).reshape(-1, vocab), targets.reshape(-1))

        return loss
    return lambda model, x, y: cross_entropy(model(x), y)
