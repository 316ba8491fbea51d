"""Import an MNIST classifier from ONNX (mnist-cnn.onnx, exported from PyTorch by
train_export.py) into burnish and classify handwritten digits with it.

    python examples/onnx-mnist/onnx-mnist.py                 # the MNIST test set's last 2,000
    python examples/onnx-mnist/onnx-mnist.py --image digit.pgm

The MNIST test set is read from the folder in BURNISH_MNIST_DIR (or --data): the files
t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz. The model was trained on the first
8,000 test images only, so the last 2,000 are images it never saw.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import warnings
from pathlib import Path

import numpy as np

import burnish as bn
from burnish import Tensor
from burnish.onnx import import_model

HERE = Path(__file__).parent
HELD_OUT = 8000


def read_mnist(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(folder / "t10k-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(folder / "t10k-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images.astype(np.float32) / 255.0, labels.astype(np.int64)


def read_pgm(path: Path) -> np.ndarray:
    """A binary (P5) 8-bit PGM image, white digit on black, 28x28, as [1, 1, 28, 28]."""
    data = path.read_bytes()
    fields, rest = data.split(maxsplit=4)[:4], data.split(maxsplit=4)[4]
    if fields[0] != b"P5":
        raise SystemExit(f"{path}: not a binary PGM image (P5)")
    width, height, top = int(fields[1]), int(fields[2]), int(fields[3])
    if (width, height) != (28, 28) or top > 255:
        raise SystemExit(f"{path}: expected an 8-bit 28x28 image, got {width}x{height}")
    pixels = np.frombuffer(rest[:28 * 28], np.uint8).reshape(1, 1, 28, 28)
    return pixels.astype(np.float32) / top


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST test set (default: $BURNISH_MNIST_DIR)")
    parser.add_argument("--image", type=Path, help="classify this 28x28 PGM image instead")
    parser.add_argument("--backend", default="ndarray")
    args = parser.parse_args()

    device = bn.backend(args.backend).default_device()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # onnx's own deprecation notices
        model = import_model(HERE / "mnist-cnn.onnx", device)
    print(f"imported mnist-cnn.onnx: {model.num_params()} parameters on {device}")

    if args.image is not None:
        logits = model(Tensor.from_data(read_pgm(args.image), device=device))
        print(f"{args.image}: digit {logits.argmax(dim=1).item()}")
        return 0
    if args.data is None or not (Path(args.data) / "t10k-images-idx3-ubyte.gz").is_file():
        print("no MNIST test set: set BURNISH_MNIST_DIR (or pass --data) to a folder holding "
              "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz, or pass --image "
              "DIGIT.pgm (28x28, white on black)")
        return 0
    images, labels = read_mnist(Path(args.data))
    images, labels = images[HELD_OUT:], labels[HELD_OUT:]
    correct = 0
    for start in range(0, len(images), 500):
        batch = Tensor.from_data(images[start:start + 500], device=device)
        predicted = model(batch).argmax(dim=1).to_numpy().reshape(-1)
        correct += int((predicted == labels[start:start + 500]).sum())
    first = model(Tensor.from_data(images[:8], device=device)).argmax(dim=1).to_numpy()
    print(f"first test images: predicted {first.reshape(-1).tolist()}, "
          f"labels {labels[:8].tolist()}")
    accuracy = correct / len(images)
    print(f"accuracy on {len(images)} held-out test images: {accuracy:.1%}")
    return 0 if accuracy > 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())
