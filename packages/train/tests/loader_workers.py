"""Datasets and batchers for the DataLoader's worker-process tests, in a module of their own so
that the workers can import them (imported by the tests, and run as a script by them)."""

from __future__ import annotations

import os
import random
import sys
import time

import numpy as np

from burnish import Tensor
from burnish.data import get_worker_info

#: Set in each worker by ``remember_worker``, read back through ``WhoDataset``'s items.
STARTED_AS: int | None = None


class WhoDataset:
    """Item ``i`` is ``(i, the reading process's id, its worker id, STARTED_AS)``."""

    def __init__(self, length: int, pause: float = 0.0):
        self.length = length
        self.pause = pause

    def __len__(self) -> int:
        return self.length

    def get(self, index: int):
        time.sleep(self.pause)
        info = get_worker_info()
        return index, os.getpid(), None if info is None else info.id, STARTED_AS


def remember_worker(worker_id: int) -> None:
    global STARTED_AS
    STARTED_AS = worker_id


class AugmentedDataset:
    """Item ``i`` is ``(i, a draw from NumPy's global generator, one from Python's random)``, as
    an augmentation that uses the global generators would make."""

    def __init__(self, length: int):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def get(self, index: int):
        return index, int(np.random.randint(1_000_000)), random.random()


class FailingDataset:
    """Raises ``ValueError("bad item N")`` when reading item ``bad``."""

    def __init__(self, length: int, bad: int):
        self.length = length
        self.bad = bad

    def __len__(self) -> int:
        return self.length

    def get(self, index: int):
        if index == self.bad:
            raise ValueError(f"bad item {index}")
        return index


class OddError(Exception):
    """An exception whose constructor does not take its message back: unpickling it fails."""

    def __init__(self, code: int, detail: str):
        super().__init__(f"odd failure {code}: {detail}")


class OddFailingDataset(FailingDataset):
    def get(self, index: int):
        if index == self.bad:
            raise OddError(7, f"item {index}")
        return index


class DyingDataset(FailingDataset):
    """The worker process that reads item ``bad`` exits at once, as a crash would."""

    def get(self, index: int):
        if index == self.bad:
            os._exit(3)
        return index


class ArrayBatcher:
    """Splits batching: ``collate`` (in the worker) stacks NumPy arrays, ``to_tensors`` (in the
    loader's process) makes the tensors and records the process that made them."""

    def batch(self, items, device=None):
        return self.to_tensors(self.collate(items), device)

    def collate(self, items):
        return np.array(items, np.int64), os.getpid()

    def to_tensors(self, collated, device=None):
        values, collated_in = collated
        return Tensor.from_numpy(values, device), collated_in, os.getpid()


class Augment:
    """A picklable mapper applying ``transform`` to each item (an image)."""

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, image):
        return self.transform(image)


class Stack:
    """A batcher stacking the items into one NumPy array."""

    def batch(self, items, device=None):
        return np.stack(items)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie left unreaped counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pids, seconds: float = 10.0) -> list[int]:
    """The ``pids`` still alive after waiting up to ``seconds`` for them to go."""
    deadline = time.monotonic() + seconds
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if alive(pid)]
    return left


if __name__ == "__main__":
    # Reads a slow loader with 2 worker processes forever, printing the workers' process ids
    # first, so that a test can interrupt or kill it and check that the workers go too.
    from burnish.data import DataLoader

    class ListBatcher:
        def batch(self, items, device):
            return items

    persistent = sys.argv[1:] == ["persistent"]
    loader = DataLoader(WhoDataset(64, pause=0.05), ListBatcher(), 2, num_workers=2,
                        persistent_workers=persistent)
    pids: set[int] = set()
    try:
        while True:
            for batch in loader:
                if len(pids) < 2:
                    pids.update(item[1] for item in batch)
                    if len(pids) == 2:
                        print("workers", *sorted(pids), flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
