"""Whether the DataLoader's workers keep the model busy: an epoch whose items are decoded and
augmented as they are read, through ``DataLoader(num_workers=2)``, against the same epoch fed
batches made beforehand.

    python bench/run.py loader --repeat 5 --min-time 0 --no-torch

The model is examples/mnist's CNN on ``autodiff+<backend>`` (Adam at 1e-3), 32 steps of batch
64. Each item is a 28x28 synthetic digit stored as PNG bytes (zlib, "up" filter); reading it
decodes the PNG with ``burnish.data``'s decoder, pads it by 2 pixels and crops a random 28x28
window (a shift of up to 2 pixels, seeded by the item's index), so the loader's work is real
per-item Python and NumPy. The pre-made epoch gets the very same batches, made before timing.

Cases: 2 persistent worker processes (beside them, no workers: what the workers hide); 2 worker
processes started at each epoch (``persistent_workers=False``: the start-up an epoch pays); 2
worker threads (the GIL); 2 persistent worker processes feeding a 2x wider CNN, whose step
rather than the loading is the bottleneck; and 2 persistent worker processes feeding a step that
waits 20 ms without using the CPU, as a step on an accelerator does, which shows what the
loader's process spends on the batches when the workers have a core of their own.
"""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import numpy as np
from timing import Case

ITEMS = 2048
BATCH = 64
LR = 1e-3
SHIFT = 2

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "mnist"))


def encode_png(image: np.ndarray) -> bytes:
    """An 8-bit greyscale PNG of ``image`` with every row "up"-filtered (the first one unfiltered,
    as "up" against zeros is)."""
    height, width = image.shape
    rows = image.astype(np.int16)
    filtered = np.empty((height, width + 1), np.uint8)
    filtered[:, 0] = 2
    filtered[:, 1:] = (rows - np.vstack([np.zeros((1, width), np.int16), rows[:-1]])) & 0xFF

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(filtered.tobytes())) + chunk(b"IEND", b""))


def digits() -> list[tuple[int, bytes, int]]:
    """(index, PNG bytes, label) of each item: a blurred stroke pattern per class, with noise."""
    rng = np.random.default_rng(0)
    items = []
    for index in range(ITEMS):
        label = index % 10
        image = np.zeros((28, 28), np.float32)
        image[6:22, 4 + label:8 + label] = 255  # a bar whose place says the class
        image += rng.normal(0, 20, image.shape)
        items.append((index, encode_png(np.clip(image, 0, 255).astype(np.uint8)), label))
    return items


def decode_and_augment(item: tuple[int, bytes, int]):
    """An ``MnistItem``: the PNG decoded, padded and cropped at a random shift."""
    from burnish.data import MnistItem
    from burnish.data.images import decode_png

    index, png, label = item
    image = np.pad(decode_png(png, f"digit {index}"), SHIFT)
    dy, dx = np.random.default_rng(index).integers(0, 2 * SHIFT + 1, 2)
    return MnistItem(image[dy:dy + 28, dx:dx + 28], label)


def train_epoch(model, batches) -> object:
    """One epoch of the CNN's step and Adam over ``batches`` (any iterable of MnistBatch)."""
    from burnish import optim

    adam = optim.Adam()
    for batch in batches:
        loss = model.forward_classification(batch).loss
        model = adam.step(LR, model, loss.backward())
    return model


def wait_epoch(batches, seconds: float = 0.02) -> int:
    """An epoch of steps that each read the batch's shapes and wait ``seconds`` off the CPU."""
    import time

    count = 0
    for batch in batches:
        count += batch.images.shape[0]
        time.sleep(seconds)
    return count


def cases(ctx) -> list[Case]:
    """The epoch fed by loaders with 2 workers (processes, kept or started each epoch, and
    threads), with none, and from pre-made batches; and a wider CNN fed by 2 processes."""
    from model import CnnConfig

    import burnish as bn
    from burnish.autodiff import Autodiff
    from burnish.backend import AutodiffOps
    from burnish.data import DataLoader, InMemoryDataset, MapperDataset, MnistBatcher

    backend = ctx.backend
    device = (backend if isinstance(backend, AutodiffOps) else Autodiff(backend)).default_device()
    bn.seed(0)
    model = CnnConfig().init(device)
    wide = CnnConfig(channels1=16, channels2=32, hidden=128).init(device)
    dataset = MapperDataset(InMemoryDataset(digits()), decode_and_augment)

    def loader(**workers):
        return DataLoader(dataset, MnistBatcher(), BATCH, **workers)

    processes = loader(num_workers=2, persistent_workers=True)
    premade = list(loader())

    def epoch(net, batches):
        return ctx.synced(lambda: train_epoch(net, batches))

    name = f"MNIST CNN, PNG decode + random shift: {len(premade)} steps of {BATCH}"
    goal = "2 workers within 10% of pre-made batches"

    def met(seconds):
        return seconds["burnish"] <= 1.10 * seconds["premade"]

    return [
        Case("loader", f"{name}, 2 worker processes (persistent)",
             {"burnish": epoch(model, processes), "plain": epoch(model, loader()),
              "premade": epoch(model, premade)}, goal, met,
             note="column 'burnish, no autodiff' here: the loader without workers"),
        Case("loader", f"{name}, 2 worker processes started each epoch",
             {"burnish": epoch(model, loader(num_workers=2)), "premade": epoch(model, premade)},
             goal, met),
        Case("loader", f"{name}, 2 worker threads",
             {"burnish": epoch(model, loader(num_workers=2, worker_mode="thread")),
              "premade": epoch(model, premade)}, goal, met),
        Case("loader", f"{name}, 2x wider CNN, 2 worker processes (persistent)",
             {"burnish": epoch(wide, processes), "premade": epoch(wide, premade)}, goal, met),
        Case("loader", f"{name}, a 20 ms step off the CPU, 2 worker processes (persistent)",
             {"burnish": lambda: wait_epoch(processes), "premade": lambda: wait_epoch(premade)},
             goal, met),
    ]
