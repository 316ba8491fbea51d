"""Train the small MNIST CNN that pytorch-import.py loads, with PyTorch, and save its state_dict.

Needs torch and NumPy (burnish never needs torch); run it only to remake ``mnist-cnn.pt``:

    python3 examples/pytorch-import/train_torch.py [--data DIR] [--out FILE]

It trains for a few seconds on the first 8,000 digits of MNIST's test set (from ``--data`` or
``BURNISH_MNIST_DIR``, else the copy shipped with burnish-train); pytorch-import.py measures the
accuracy on the other 2,000, which the model never saw.
"""

from __future__ import annotations

import argparse
import gzip
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).parent
TRAIN = 8000


class TorchCnn(nn.Module):
    """Two 3x3 conv layers (8 and 16 channels) with ReLU and 2x2 max pooling, then a 32-unit
    hidden layer and 10 logits; named as PyTorch code often names them, in Sequentials."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 7 * 7, 32), nn.ReLU(), nn.Linear(32, 10),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(images))


def digits(data: Path | None) -> tuple[np.ndarray, np.ndarray]:
    """MNIST's test set from the IDX files of ``data`` (``t10k-images-idx3-ubyte.gz`` and
    ``t10k-labels-idx1-ubyte.gz``), else from the copy shipped with burnish-train: images
    float32 ``[n, 1, 28, 28]`` in [0, 1] and labels int64."""
    if data is None:
        from burnish.data.mnist import EMBEDDED_DIR as data
    with gzip.open(Path(data) / "t10k-images-idx3-ubyte.gz") as file:
        images = np.frombuffer(file.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(Path(data) / "t10k-labels-idx1-ubyte.gz") as file:
        labels = np.frombuffer(file.read(), np.uint8, offset=8)
    return images.astype(np.float32) / 255.0, labels.astype(np.int64)


def train(data: Path | None, out: Path, epochs: int = 3) -> TorchCnn:
    """Fit ``TorchCnn`` on the first 8,000 test digits and save its state_dict to ``out``."""
    torch.manual_seed(0)
    images, labels = digits(data)
    x, y = torch.from_numpy(images[:TRAIN]), torch.from_numpy(labels[:TRAIN])
    model = TorchCnn()
    optimizer = torch.optim.Adam(model.parameters(), 3e-3)
    for epoch in range(epochs):
        for batch in torch.randperm(TRAIN).split(64):
            loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    model.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out)
    print(f"saved {out} ({out.stat().st_size:,} bytes)")
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST test set (default: $BURNISH_MNIST_DIR, else "
                             "the copy shipped with burnish-train)")
    parser.add_argument("--out", type=Path, default=HERE / "mnist-cnn.pt")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    train(args.data, args.out, args.epochs)


if __name__ == "__main__":
    main()
