"""Train a small CNN on your own images: a folder per class (``ROOT/<class>/*.png``) read by
``burnish.data.ImageFolderDataset``, augmented with random shifts (and flips, when asked),
trained with the Learner; prints the validation accuracy.

``--make-from-mnist DIR --count N`` writes such a folder from MNIST digits to try it on."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

import burnish as bn
from burnish import optim
from burnish.data import (
    Compose,
    DataLoader,
    ImageFolderDataset,
    MapperDataset,
    MnistDataset,
    Normalizer,
    PartialDataset,
    RandomCrop,
    RandomFlip,
    ShuffledDataset,
)
from burnish.train import AccuracyMetric, LearnerBuilder, LossMetric

sys.path.insert(0, str(Path(__file__).parent))
from model import CnnConfig  # noqa: E402
from pipeline import Augment, ImageBatcher, as_float, write_mnist_folder  # noqa: E402


def make_from_mnist(args: argparse.Namespace) -> None:
    """Write ``args.count`` MNIST test digits as ``DIR/<digit>/<n>.png``."""
    digits = MnistDataset("test", root=args.mnist, embedded=args.mnist is None)
    source = args.mnist or "the copy of MNIST's test set shipped with burnish-train"
    written = write_mnist_folder(digits, args.make_from_mnist, args.count)
    print(f"wrote {sum(written.values())} PNGs from {source} into {args.make_from_mnist}: "
          + ", ".join(f"{name}/ {count}" for name, count in written.items()))


def normalizer_of(dataset, grey: bool, limit: int = 2000) -> Normalizer:
    """Per-channel mean and std of (up to ``limit`` of) the training images."""
    images = as_float(np.stack([dataset.get(i).image for i in range(min(limit, len(dataset)))]))
    if grey:
        images = images[..., None]
    return Normalizer.fit(images, axis=(0, 1, 2))


def train(args: argparse.Namespace) -> float:
    """Split, augment, train; return the validation accuracy."""
    images = ImageFolderDataset(args.data)
    first = images.get(0).image
    grey = first.ndim == 2
    channels = 1 if grey else first.shape[2]
    height, width = first.shape[:2]
    shuffled = ShuffledDataset(images, seed=args.seed)
    cut = len(images) - max(1, round(len(images) * args.valid_fraction))
    train_set, valid_set = PartialDataset(shuffled, 0, cut), PartialDataset(shuffled, cut)
    print(f"{len(images)} images of {height}x{width}x{channels} in {len(images.classes)} "
          f"classes ({', '.join(images.classes)}): {len(train_set)} to train, "
          f"{len(valid_set)} to validate")

    transforms = [RandomCrop((height, width), padding=args.shift)]
    if args.flip:
        transforms.append(RandomFlip())
    augmented = MapperDataset(train_set, Augment(Compose(*transforms)))
    batcher = ImageBatcher(normalizer_of(train_set, grey), grey)

    bn.seed(args.seed)
    device = bn.backend(args.backend).default_device()
    model = CnnConfig(channels=channels, classes=len(images.classes)).init(device)
    # The loader seeds NumPy's generator for each batch: the same shifts from run to run.
    train_loader = DataLoader(augmented, batcher, args.batch_size, shuffle=True, seed=args.seed,
                              num_workers=args.workers, persistent_workers=args.workers > 0,
                              device=device)
    # Validation runs on model.valid(), on the backend the autodiff one wraps.
    valid_loader = DataLoader(valid_set, batcher, 256, device=model.valid().conv1.weight.device)
    steps = args.epochs * len(train_loader)
    schedule = optim.CosineAnnealingLr(args.lr, steps, warmup_iters=min(50, steps // 10))
    learner = (LearnerBuilder(args.run_dir)
               .metrics(LossMetric(), AccuracyMetric())
               .num_epochs(args.epochs)
               .seed(args.seed)
               .build(model, optim.Adam(), schedule))
    started = time.perf_counter()
    model = learner.fit(train_loader, valid_loader)
    accuracy = learner.valid_metrics[1].value()
    path = model.valid().save(args.run_dir / "model.safetensors")
    print(f"validation accuracy {accuracy:.2f}% on {len(valid_set)} images after "
          f"{time.perf_counter() - started:.0f}s; model saved to {path}")
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path,
                        help="the dataset's root folder: one sub-folder of images per class")
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="an autodiff backend to train on (e.g. autodiff+wgpu)")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/custom-image-dataset"),
                        help="where checkpoints, logs and the model go")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak of the cosine schedule")
    parser.add_argument("--valid-fraction", type=float, default=0.2,
                        help="share of the images held out for validation")
    parser.add_argument("--shift", type=int, default=2,
                        help="random shifts of up to this many pixels (a random crop of the "
                             "image padded by as many); 0: none")
    parser.add_argument("--flip", action="store_true",
                        help="also mirror images left to right at random (photos of objects; "
                             "not digits or text)")
    parser.add_argument("--workers", type=int, default=0,
                        help="worker processes that read and augment the images")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--make-from-mnist", type=Path, metavar="DIR",
                        help="write a folder of PNGs from MNIST digits here, then stop")
    parser.add_argument("--count", type=int, default=2000,
                        help="how many digits --make-from-mnist writes")
    parser.add_argument("--mnist", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of MNIST's IDX files for --make-from-mnist (default: "
                             "$BURNISH_MNIST_DIR, else the test set shipped with burnish-train)")
    args = parser.parse_args()
    if args.make_from_mnist is not None:
        make_from_mnist(args)
        return
    if args.data is None:
        parser.error("--data ROOT is required (a folder with one sub-folder of images per "
                     "class); --make-from-mnist DIR writes one to try")
    if not args.backend.startswith("autodiff+"):
        parser.error(f"--backend must be an autodiff backend to train, e.g. autodiff+"
                     f"{args.backend}; got {args.backend!r}")
    if not 0 < args.valid_fraction < 1:
        parser.error(f"--valid-fraction must be between 0 and 1, got {args.valid_fraction}")
    train(args)


if __name__ == "__main__":
    main()
