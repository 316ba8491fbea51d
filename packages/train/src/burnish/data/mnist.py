"""MNIST: the handwritten digits, read from IDX files in a folder or downloaded into the cache."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .dataset import DatasetBase, check_index
from .download import cache_dir, download_verified
from .errors import DataError
from .idx import read_idx

# Tried in turn. The original site (yann.lecun.com) now often refuses downloads.
MIRRORS = [
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
]

# SHA-256 of the decompressed IDX files, as published with the data by several projects
# (and matching the MD5s of the decompressed files that torchvision-era scripts check).
SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}

SPLITS = {"train": "train", "test": "t10k"}


@dataclass
class MnistItem:
    """One digit: ``image`` uint8 [28, 28] (0 is background, 255 ink) and its ``label`` 0-9."""

    image: np.ndarray
    label: int


class MnistDataset(DatasetBase):
    """The MNIST ``split`` ("train": 60,000 digits, "test": 10,000), items ``MnistItem``.

    With ``root``, the IDX files are read from that folder (``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each
    plain or with ``.gz``) and nothing is downloaded. Without it they come from the cache folder
    (``$BURNISH_CACHE/mnist`` or ``~/.cache/burnish/mnist``), downloaded there first when missing
    and ``download`` is true; downloads are checked against the published SHA-256 of the
    decompressed files. Raises DataError when the files are missing or malformed, or cannot be
    downloaded, and ChecksumError when a download does not match.
    """

    def __init__(self, split: str = "train", root: str | Path | None = None, download: bool = True):
        if split not in SPLITS:
            raise ValueError(f"MNIST has the splits {sorted(SPLITS)}, not {split!r}")
        self.split = split
        prefix = SPLITS[split]
        names = [f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"]
        if root is not None:
            images_path, labels_path = (find_file(Path(root), name) for name in names)
        else:
            images_path, labels_path = (cached_file(name, download) for name in names)
        self.images = read_idx(images_path)
        self.labels = read_idx(labels_path)
        if self.images.ndim != 3 or self.labels.ndim != 1:
            raise DataError(
                f"MNIST images are [n, rows, cols] and labels [n], got {list(self.images.shape)} "
                f"in {images_path} and {list(self.labels.shape)} in {labels_path}"
            )
        if len(self.images) != len(self.labels):
            raise DataError(
                f"{images_path} holds {len(self.images)} images but {labels_path} "
                f"{len(self.labels)} labels"
            )

    def __len__(self) -> int:
        return len(self.labels)

    def get(self, index: int) -> MnistItem:
        index = check_index(index, len(self))
        return MnistItem(image=self.images[index], label=int(self.labels[index]))


def find_file(root: Path, name: str) -> Path:
    """``root/name``, or ``root/name.gz``; DataError naming both when neither exists."""
    for candidate in (root / name, root / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise DataError(f"neither {name} nor {name}.gz is in {root}")


def cached_file(name: str, download: bool) -> Path:
    """The decompressed file ``name`` in the MNIST cache folder, downloaded when missing."""
    path = cache_dir("mnist") / name
    if path.is_file():
        return path
    if not download:
        raise DataError(
            f"{name} is not in the cache folder {path.parent} and download=False; "
            "pass root= a folder that holds the MNIST files"
        )
    urls = [f"{mirror}{name}.gz" for mirror in MIRRORS]
    return download_verified(urls, path, SHA256[name], decompress=True)
