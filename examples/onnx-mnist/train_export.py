"""Train the small MNIST CNN that onnx-mnist.py imports, with PyTorch, and export it to ONNX.

Needs torch (and the MNIST test set: ``BURNISH_MNIST_DIR``); run it only to remake
``mnist-cnn.onnx``. It trains on the first 8,000 test images only; onnx-mnist.py measures its
accuracy on the other 2,000, which the model never saw.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).parent
TRAIN = 8000


def read(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(folder / "t10k-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(folder / "t10k-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images.astype(np.float32) / 255.0, labels.astype(np.int64)


def main() -> None:
    torch.manual_seed(0)
    images, labels = read(Path(os.environ["BURNISH_MNIST_DIR"]))
    x, y = torch.from_numpy(images[:TRAIN]), torch.from_numpy(labels[:TRAIN])
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
    optimizer = torch.optim.Adam(model.parameters(), 2e-3)
    for epoch in range(4):
        for i in torch.randperm(TRAIN).split(64):
            loss = nn.functional.cross_entropy(model(x[i]), y[i])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    model.eval()
    torch.onnx.export(model, (x[:1],), str(HERE / "mnist-cnn.onnx"), input_names=["image"],
                      output_names=["logits"], opset_version=18, dynamo=True,
                      external_data=False, dynamic_shapes=({0: torch.export.Dim("batch")},))


if __name__ == "__main__":
    main()
