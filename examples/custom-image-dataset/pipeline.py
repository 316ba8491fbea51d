"""The custom image dataset example's data pipeline: augmenting items, batching them, and
writing a folder of PNGs from MNIST to try it on."""

from __future__ import annotations

import dataclasses
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from burnish import Device, Tensor
from burnish.data import ImageItem, Normalizer


class Augment:
    """Applies an image transform (``burnish.data.RandomCrop``...) to an item's image; a class,
    not a lambda, so that worker processes can receive it."""

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, item: ImageItem) -> ImageItem:
        return dataclasses.replace(item, image=self.transform(item.image))


def as_float(images: np.ndarray) -> np.ndarray:
    """Images scaled to [0, 1] (integers by their dtype's maximum), channels last:
    ``[..., height, width, channels]``, grey images getting one channel."""
    if np.issubdtype(images.dtype, np.integer):
        images = images.astype(np.float32) / np.iinfo(images.dtype).max
    return images.astype(np.float32)


@dataclass
class ImageBatch:
    """``images`` float32 ``[batch, channels, height, width]``, standardised per channel, and
    ``targets`` int64 ``[batch]`` (class indices)."""

    images: Tensor
    targets: Tensor


class ImageBatcher:
    """Stacks ``ImageItem``s of one size, scales them to [0, 1] and standardises each channel
    with ``normalizer`` (fitted on training images)."""

    def __init__(self, normalizer: Normalizer, grey: bool):
        self.normalizer = normalizer
        self.grey = grey

    def batch(self, items: list[ImageItem], device: Device | None = None) -> ImageBatch:
        return self.to_tensors(self.collate(items), device)

    def collate(self, items: list[ImageItem]) -> tuple[np.ndarray, np.ndarray]:
        shapes = {item.image.shape for item in items}
        if len(shapes) > 1:
            raise ValueError(f"images of different shapes in one batch: {sorted(shapes)}; "
                             "resize them to one size first")
        images = as_float(np.stack([item.image for item in items]))
        if self.grey:
            images = images[..., None]
        images = self.normalizer(images).transpose(0, 3, 1, 2)
        targets = np.array([item.label for item in items], np.int64)
        return np.ascontiguousarray(images), targets

    def to_tensors(self, collated: tuple[np.ndarray, np.ndarray],
                   device: Device | None = None) -> ImageBatch:
        images, targets = collated
        return ImageBatch(Tensor.from_numpy(images, device), Tensor.from_numpy(targets, device))


def png(image: np.ndarray) -> bytes:
    """A uint8 grey image ``[height, width]`` as PNG bytes (no row filters: small, not tight)."""
    height, width = image.shape
    rows = np.concatenate([np.zeros((height, 1), np.uint8), image.astype(np.uint8)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows.tobytes())) + chunk(b"IEND", b""))


def write_mnist_folder(digits, folder: Path, count: int) -> dict[str, int]:
    """The first ``count`` items of ``digits`` (``MnistItem``s) as ``folder/<digit>/<n>.png``;
    returns how many images each class folder got."""
    written: dict[str, int] = {}
    for index in range(min(count, len(digits))):
        item = digits.get(index)
        name = str(item.label)
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / f"{index:05d}.png").write_bytes(png(item.image))
        written[name] = written.get(name, 0) + 1
    return dict(sorted(written.items()))
