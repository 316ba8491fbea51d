"""The Batcher protocol, which turns a list of items into a batch, and the MNIST batcher."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from burnish import Device, Tensor

# The mean and standard deviation of MNIST's training pixels (scaled to [0, 1]), as everyone uses.
MNIST_MEAN = 0.1307
MNIST_STD = 0.3081


@runtime_checkable
class Batcher(Protocol):
    """Turns the items of one batch into what the model reads (usually a dataclass of tensors).

    ``batch`` may run on a DataLoader's worker thread; ``device`` is where the tensors go
    (``None``: the default backend's default device).

    A batcher may also split ``batch`` in two, so that a DataLoader's worker processes do the
    collating: ``collate(items)`` returns NumPy arrays and plain Python values (it runs in the
    worker, and its result is pickled back), and ``to_tensors(collated, device)`` makes the
    batch from them in the loader's process. ``batch(items, device)`` must then equal
    ``to_tensors(collate(items), device)``. Without the pair, process workers send back the
    items they read and ``batch`` runs in the loader's process.
    """

    def batch(self, items: list[Any], device: Device | None) -> Any: ...


@dataclass
class MnistBatch:
    """A batch of MNIST digits: ``images`` float32 ``[batch, 1, 28, 28]``, normalised as
    ``(pixel / 255 - 0.1307) / 0.3081``, and ``targets`` int64 ``[batch]`` (the digits)."""

    images: Tensor
    targets: Tensor


class MnistBatcher:
    """Stacks ``MnistItem``s (anything with a uint8 ``image`` [28, 28] and an int ``label``)."""

    def batch(self, items: list[Any], device: Device | None = None) -> MnistBatch:
        return self.to_tensors(self.collate(items), device)

    def collate(self, items: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """The normalised images (float32 ``[batch, 1, 28, 28]``) and the targets (int64)."""
        if not items:
            raise ValueError("cannot make an MNIST batch of no items")
        pixels = np.stack([np.asarray(item.image) for item in items]).astype(np.float32)
        pixels = (pixels / 255.0 - MNIST_MEAN) / MNIST_STD
        images = pixels.reshape(len(items), 1, *pixels.shape[1:]).astype(np.float32)
        targets = np.array([int(item.label) for item in items], dtype=np.int64)
        return images, targets

    def to_tensors(
        self, collated: tuple[np.ndarray, np.ndarray], device: Device | None = None
    ) -> MnistBatch:
        images, targets = collated
        return MnistBatch(
            images=Tensor.from_numpy(images, device), targets=Tensor.from_numpy(targets, device)
        )
