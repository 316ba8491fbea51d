"""Load a PyTorch-trained MNIST classifier (mnist-cnn.pt, a state_dict saved by train_torch.py)
into the burnish model of the same architecture, without PyTorch, and read digits with it.

    python examples/pytorch-import/pytorch-import.py              # the test set's last 2,000
    python examples/pytorch-import/pytorch-import.py --weights my.pt --count 500

The digits come from the folder in BURNISH_MNIST_DIR (or --data), else from the MNIST test set
shipped with burnish-train. The model was trained on the first 8,000 test digits only, so the
last 2,000 are digits it never saw.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import numpy as np

import burnish as bn
from burnish import Tensor, nn
from burnish import functional as F
from burnish.data import MnistDataset
from burnish.nn.import_weights import load_weights, read_pytorch

HERE = Path(__file__).parent
HELD_OUT = 8000
#: PyTorch's names (``TorchCnn`` in train_torch.py: layers by their index in a Sequential) to
#: burnish's (``Cnn``'s attributes); ``load_weights`` applies them with ``re.sub``, in order.
REMAP = [
    (r"^features\.0\.", "conv1."),
    (r"^features\.3\.", "conv2."),
    (r"^classifier\.1\.", "hidden."),
    (r"^classifier\.3\.", "output."),
]


class Cnn(nn.Module):
    """train_torch.py's ``TorchCnn`` in burnish: ``[batch, 1, 28, 28]`` images in [0, 1] to
    ``[batch, 10]`` logits."""

    conv1: nn.Conv2d
    conv2: nn.Conv2d
    pool: nn.MaxPool2d
    hidden: nn.Linear
    output: nn.Linear

    def forward(self, images: Tensor) -> Tensor:
        x = self.pool(F.relu(self.conv1(images)))  # [b, 8, 14, 14]
        x = self.pool(F.relu(self.conv2(x)))  # [b, 16, 7, 7]
        x = F.relu(self.hidden(x.reshape([x.shape[0], -1])))  # flattened as torch's Flatten
        return self.output(x)


def make_cnn(device) -> Cnn:
    return Cnn(
        conv1=nn.Conv2dConfig(1, 8, 3, padding=1).init(device),
        conv2=nn.Conv2dConfig(8, 16, 3, padding=1).init(device),
        pool=nn.MaxPool2d(2),
        hidden=nn.LinearConfig(16 * 7 * 7, 32).init(device),
        output=nn.LinearConfig(32, 10).init(device),
    )


def load_model(weights: Path, device, verbose: bool = False) -> Cnn:
    """``Cnn`` holding the state_dict in ``weights``, read without PyTorch and without running
    any code the file's pickle names; with ``verbose``, print how the keys were mapped."""
    result = load_weights(make_cnn(device), weights, remap=REMAP)
    if verbose:
        print(f"{weights.name}: PyTorch key -> burnish parameter")
        for key, data in read_pytorch(weights).items():
            name = key
            for pattern, replacement in REMAP:
                name = re.sub(pattern, replacement, name)
            print(f"  {key:<22} {name:<16} {list(data.shape)}")
        print(result)  # loaded N of N parameters, then any missing or unused
    return result.module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, default=HERE / "mnist-cnn.pt",
                        help="a state_dict saved by torch.save (default: the shipped "
                             "mnist-cnn.pt)")
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST test set (default: $BURNISH_MNIST_DIR, else "
                             "the copy shipped with burnish-train)")
    parser.add_argument("--count", type=int, default=2000,
                        help="how many of the last, held-out test digits to read (at most "
                             "2,000)")
    parser.add_argument("--show", type=int, default=10,
                        help="print this many predictions beside their labels")
    parser.add_argument("--backend", default="ndarray")
    args = parser.parse_args()
    if not 1 <= args.count <= 10_000 - HELD_OUT:
        parser.error(f"--count must be between 1 and {10_000 - HELD_OUT}, got {args.count}")

    device = bn.backend(args.backend).default_device()
    model = load_model(args.weights, device, verbose=True)
    print(f"{model.num_params():,} parameters on {device}")

    test = MnistDataset("test", root=args.data, embedded=args.data is None)
    images = test.images[-args.count:].astype(np.float32)[:, None] / 255.0
    labels = test.labels[-args.count:].astype(np.int64)
    predicted = np.concatenate([
        model(Tensor.from_numpy(images[start:start + 500], device)).argmax(dim=1).to_numpy()
        .reshape(-1) for start in range(0, len(images), 500)
    ])
    for prediction, label in zip(predicted[:args.show], labels[:args.show]):
        mark = "" if prediction == label else "  <- wrong"
        print(f"label {label}  predicted {prediction}{mark}")
    right = int((predicted == labels).sum())
    print(f"accuracy on {len(labels):,} held-out test digits: {right / len(labels):.1%} "
          f"({right}/{len(labels)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
