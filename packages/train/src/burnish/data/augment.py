"""Image augmentations on NumPy arrays: random crops with padding (shifts) and random flips.

Each transform is a picklable object called as ``transform(image, rng=None)`` on an image of
shape ``[height, width]`` or ``[height, width, channels]`` (as ``read_image`` gives). ``rng``
is a ``numpy.random.Generator``; without one, the draws come from NumPy's global generator,
which the ``DataLoader`` seeds for each batch from ``(seed, epoch, position)``: augmented
batches are then the same from run to run, whatever the number of workers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def draw_below(high: int, rng: np.random.Generator | None) -> int:
    """A random integer in ``[0, high)``, from ``rng`` or NumPy's global generator."""
    return int(rng.integers(high)) if rng is not None else int(np.random.randint(high))


def draw_uniform(rng: np.random.Generator | None) -> float:
    """A random float in ``[0, 1)``, from ``rng`` or NumPy's global generator."""
    return float(rng.random()) if rng is not None else float(np.random.random())


class RandomCrop:
    """A random ``size`` crop of the image padded by ``padding`` pixels of ``fill`` on each side.

    ``size`` is ``(height, width)`` or one int for a square; with ``size`` the image's own size,
    this shifts the image by up to ``padding`` pixels in each direction (the usual augmentation
    for digits and small photos). Raises ValueError when the padded image is smaller than
    ``size``."""

    def __init__(self, size: int | tuple[int, int], padding: int = 0, fill: float = 0):
        self.size = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
        if padding < 0 or min(self.size) < 1:
            raise ValueError(f"RandomCrop needs a positive size and padding >= 0, got size="
                             f"{self.size}, padding={padding}")
        self.padding = int(padding)
        self.fill = fill

    def __call__(self, image: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        image = np.asarray(image)
        if image.ndim not in (2, 3):
            raise ValueError(f"RandomCrop takes [height, width] or [height, width, channels] "
                             f"images, got shape {image.shape}")
        p = self.padding
        if p:
            pads = [(p, p), (p, p)] + [(0, 0)] * (image.ndim - 2)
            image = np.pad(image, pads, constant_values=self.fill)
        height, width = self.size
        if image.shape[0] < height or image.shape[1] < width:
            raise ValueError(f"cannot crop {height}x{width} from a {image.shape[0]}x"
                             f"{image.shape[1]} image (padding included)")
        top = draw_below(image.shape[0] - height + 1, rng)
        left = draw_below(image.shape[1] - width + 1, rng)
        return image[top : top + height, left : left + width].copy()


class RandomFlip:
    """The image mirrored left to right (``horizontal``) or top to bottom, with probability
    ``p``. Only for data whose classes do not change when flipped (photos of objects, not
    digits or text)."""

    def __init__(self, p: float = 0.5, horizontal: bool = True):
        if not 0 <= p <= 1:
            raise ValueError(f"RandomFlip's probability must be in [0, 1], got {p}")
        self.p = p
        self.horizontal = horizontal

    def __call__(self, image: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        image = np.asarray(image)
        if image.ndim not in (2, 3):
            raise ValueError(f"RandomFlip takes [height, width] or [height, width, channels] "
                             f"images, got shape {image.shape}")
        if draw_uniform(rng) < self.p:
            return image[:, ::-1].copy() if self.horizontal else image[::-1].copy()
        return image


class Compose:
    """The transforms applied in turn, each with the same ``rng``."""

    def __init__(self, *transforms: Callable[..., np.ndarray]) -> None:
        self.transforms = transforms

    def __call__(self, image: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        for transform in self.transforms:
            image = transform(image, rng)
        return image
