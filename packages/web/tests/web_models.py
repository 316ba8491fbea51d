"""The models the tests export: examples/mnist's CNN, a ResNet-18 (BasicBlocks [2, 2, 2, 2];
narrow, so that the browser checks stay quick) and a small transformer encoder."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import burnish.functional as F
from burnish import Tensor, cat, nn

MNIST = Path(__file__).resolve().parents[3] / "examples" / "mnist"


def mnist_cnn(device) -> nn.Module:
    """examples/mnist's CNN, freshly initialised."""
    sys.path.insert(0, str(MNIST))
    try:
        from model import CnnConfig
    finally:
        sys.path.remove(str(MNIST))
    return CnnConfig().init(device)


class Downsample(nn.Module):
    conv: nn.Conv2d
    bn: nn.BatchNorm

    def forward(self, x: Tensor) -> Tensor:
        return self.bn(self.conv(x))


class BasicBlock(nn.Module):
    conv1: nn.Conv2d
    bn1: nn.BatchNorm
    conv2: nn.Conv2d
    bn2: nn.BatchNorm
    downsample: Downsample | None

    def forward(self, x: Tensor) -> Tensor:
        out = nn.Relu()(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return nn.Relu()(out + identity)


class ResNet(nn.Module):
    conv1: nn.Conv2d
    bn1: nn.BatchNorm
    stem_pool: nn.MaxPool2d
    layers: list
    pool: nn.AdaptiveAvgPool2d
    fc: nn.Linear

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem_pool(nn.Relu()(self.bn1(self.conv1(x))))
        for block in self.layers:
            x = block(x)
        x = self.pool(x)
        return self.fc(x.reshape([x.shape[0], -1]))


def resnet18(device, width: int = 8, classes: int = 10) -> ResNet:
    """ResNet-18 (He et al.) with ``width`` channels in its first stage (64 in the paper)."""

    def conv(cin: int, cout: int, kernel: int, stride: int, padding: int) -> nn.Conv2d:
        return nn.Conv2dConfig(cin, cout, kernel, stride=stride, padding=padding,
                               bias=False).init(device)

    def norm(channels: int) -> nn.BatchNorm:
        return nn.BatchNormConfig(channels).init(device)

    layers, cin = [], width
    for stage, blocks in enumerate([2, 2, 2, 2]):
        cout = width * 2 ** stage
        for i in range(blocks):
            stride = 2 if stage > 0 and i == 0 else 1
            down = (Downsample(conv(cin, cout, 1, stride, 0), norm(cout))
                    if stride != 1 or cin != cout else None)
            layers.append(BasicBlock(conv(cin, cout, 3, stride, 1), norm(cout),
                                     conv(cout, cout, 3, 1, 1), norm(cout), down))
            cin = cout
    return ResNet(conv(3, width, 7, 2, 3), norm(width), nn.MaxPool2d(3, stride=2, padding=1),
                  layers, nn.AdaptiveAvgPool2d([1, 1]), nn.LinearConfig(cin, classes).init(device))


def encoder(device, d_model: int = 32, layers: int = 2) -> nn.TransformerEncoder:
    """A transformer encoder: ``layers`` post-norm layers of 4 heads, GELU feed-forward."""
    return nn.TransformerEncoderConfig(d_model=d_model, d_ff=2 * d_model, n_heads=4,
                                       n_layers=layers).init(device)


def ops(device):
    """A function of two inputs (``[32]`` and ``[8, 5]``) with 52 outputs: math, activations,
    reductions (tree and loop), a scan, products, comparisons, masks, casts, views of the input,
    concatenation, pooling, interpolation, a constant written from the host and a tensor the
    function holds, and int64 results (argmax, argmin, sort, topk, gather, pooling indices):
    the kernels behind most models beyond those above."""

    # A tensor the function holds that is no module's parameter: exported by its bytes.
    held = Tensor.from_data(np.linspace(0.5, 2, 32, dtype=np.float32), device=device)

    def many(x: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        a = x.reshape([4, 8])
        return (x.exp(), (x.abs() + 0.5).log(), x.tanh(), x.erf(), x.sin(), x.cos(), x.floor(),
                x.round(), x.sign(), (x.abs() + 0.1).sqrt(), x.powf(2.0), x.clamp(-0.5, 0.5),
                x.remainder(0.7), F.gelu(x), F.sigmoid(x), F.silu(x), F.log_softmax(a, dim=1),
                a.sum(dim=1), a.mean(dim=0), a.var(dim=1), a.max(dim=1), a.cumsum(dim=1),
                a.flip([1]), a.permute([1, 0]) * 1.0, a.matmul(y), a.prod(dim=1),
                (a > 0).cast("float32"), a.mask_fill(a < 0, -1.0), a.any(dim=1).cast("float32"),
                a.cast("int32").cast("float32"), a.repeat([2, 1]),
                a.slice([slice(1, 3), slice(0, 8, 2)]) * 2.0,
                F.max_pool1d(a.reshape([1, 4, 8]), 2), F.avg_pool1d(a.reshape([1, 4, 8]), 2),
                F.interpolate(x.reshape([1, 2, 4, 4]), [8, 8], mode="bilinear"),
                (a * 2.0).sigmoid(),
                a.min(dim=0), a.equal(a.max(dim=1, keepdim=True)).cast("float32"),
                # A constant made from host data in the pass: a write in the launch list.
                x * Tensor.from_data(np.linspace(-1, 1, 32, dtype=np.float32), device=x.device),
                cat([a, a * 2.0], dim=1), x * held,
                # int64 results, held as int32 in the browser.
                a.argmax(dim=1), a.argmin(dim=0), a.argsort(dim=1), *a.sort_with_indices(dim=1),
                *a.topk_with_indices(3, dim=1), a.gather(1, a.argsort(dim=1)), a.argmax(dim=1) * -3,
                *F.max_pool1d_with_indices(a.reshape([1, 4, 8]), 2))

    return many


class TokenClassifier(nn.Module):
    """Token ids (int64 ``[batch, seq]``) to class scores: an embedding, a transformer encoder,
    the mean over the sequence, a linear layer."""

    embedding: nn.Embedding
    encoder: nn.TransformerEncoder
    head: nn.Linear

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(self.encoder(self.embedding(ids)).mean(dim=1).reshape([ids.shape[0], -1]))


def token_classifier(device, vocab: int = 50, d_model: int = 32) -> TokenClassifier:
    return TokenClassifier(nn.EmbeddingConfig(vocab, d_model).init(device),
                           encoder(device, d_model), nn.LinearConfig(d_model, 3).init(device))
