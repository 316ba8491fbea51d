"""MNIST: the handwritten digits, read from IDX files in a folder, downloaded into the cache, or
from the copy of the test set shipped in burnish-train."""

from __future__ import annotations

import gzip
import hashlib
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .dataset import DatasetBase, check_index
from .download import cache_dir, download_verified
from .errors import ChecksumError, DataError
from .idx import parse_idx, read_idx

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

#: The MNIST test set shipped inside burnish-train (``t10k-*-ubyte.gz``), with its NOTICE.md:
#: what ``MnistDataset("test", embedded=True)`` reads, with no cache and no network.
EMBEDDED_DIR = Path(__file__).parent / "embedded" / "mnist"


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

    With ``embedded=True`` (split "test" only), the test set comes from the copy shipped inside
    burnish-train (``EMBEDDED_DIR``, 1.7 MB; MNIST is under CC BY-SA 3.0, see the NOTICE.md
    there): the same 10,000 digits as the downloaded test set, byte for byte, checked against
    the same SHA-256 each time they are read; nothing is downloaded or cached. It is what to
    fall back on offline: the training split is not shipped, so split the test set instead
    (``PartialDataset``). Raises ValueError for ``split="train"`` or together with ``root``,
    and ChecksumError when the shipped files are damaged.
    """

    def __init__(
        self,
        split: str = "train",
        root: str | Path | None = None,
        download: bool = True,
        embedded: bool = False,
    ):
        if split not in SPLITS:
            raise ValueError(f"MNIST has the splits {sorted(SPLITS)}, not {split!r}")
        self.split = split
        prefix = SPLITS[split]
        names = [f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"]
        if embedded:
            if split != "test":
                raise ValueError(
                    f"burnish-train ships only MNIST's test split (10,000 digits), not {split!r}; "
                    "read MnistDataset('test', embedded=True) and split it with PartialDataset"
                )
            if root is not None:
                raise ValueError(
                    f"embedded=True reads the copy shipped in burnish-train, root={str(root)!r} "
                    "a folder: pass one of them"
                )
            images_path, labels_path = (EMBEDDED_DIR / f"{name}.gz" for name in names)
            self.images, self.labels = (read_shipped(path) for path in (images_path, labels_path))
        else:
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


def read_shipped(path: Path) -> np.ndarray:
    """The array in the gzipped IDX file ``path`` shipped with burnish-train, after checking the
    SHA-256 of its decompressed bytes; ChecksumError when they differ (a damaged install)."""
    name = path.name.removesuffix(".gz")
    try:
        raw = gzip.decompress(path.read_bytes())
    except FileNotFoundError as error:
        raise DataError(
            f"{path} is missing from this install of burnish-train; reinstall it, or pass root= "
            "a folder that holds the MNIST files"
        ) from error
    except (OSError, EOFError, zlib.error) as error:
        raise ChecksumError(
            f"{path}, shipped with burnish-train, does not decompress ({error}); reinstall "
            "burnish-train"
        ) from error
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256[name]:
        raise ChecksumError(
            f"{path}, shipped with burnish-train, decompresses to SHA-256 {digest}, but MNIST's "
            f"{name} has {SHA256[name]}; reinstall burnish-train"
        )
    return parse_idx(raw, str(path))
