"""ImageFolderDataset: images sorted into one folder per class, labelled by folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .dataset import DatasetBase, check_index
from .errors import DataError
from .images import IMAGE_SUFFIXES, read_image


@dataclass
class ImageItem:
    """One image (as ``read_image`` gives it), its class index and the file it came from."""

    image: np.ndarray
    label: int
    path: Path


class ImageFolderDataset(DatasetBase):
    """The images under ``root/<class>/``: ``classes`` are the folder names, sorted, and an item's
    ``label`` is its folder's index in them. Files are read when their item is.

    Images are PNG, PGM/PPM or ``.npy`` (no dependency: JPEG and other formats would need
    Pillow, which burnish does not require); other files are ignored. Raises DataError when
    ``root`` holds no class folder or no image."""

    def __init__(self, root: str | Path):
        root = Path(root)
        if not root.is_dir():
            raise DataError(f"{root} is not a folder")
        self.root = root
        self.classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        if not self.classes:
            raise DataError(f"{root} holds no class folder (one folder per class expected)")
        self.files: list[tuple[Path, int]] = [
            (path, label)
            for label, name in enumerate(self.classes)
            for path in sorted((root / name).rglob("*"))
            if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES
        ]
        if not self.files:
            raise DataError(f"no image ({', '.join(IMAGE_SUFFIXES)}) under {root}")

    def __len__(self) -> int:
        return len(self.files)

    def get(self, index: int) -> ImageItem:
        path, label = self.files[check_index(index, len(self))]
        return ImageItem(image=read_image(path), label=label, path=path)
