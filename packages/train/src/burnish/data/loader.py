"""The DataLoader: batches of a dataset in a seeded order, built ahead on worker threads."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from burnish import Device

from .batcher import Batcher
from .dataset import Dataset


class DataLoader:
    """Iterates over ``dataset`` in batches of ``batch_size`` items, each made by
    ``batcher.batch(items, device)``.

    - ``shuffle``: each epoch reads the items in a new random order, fixed by ``(seed, epoch)``;
      without it, in index order.
    - ``drop_last``: leave out a last batch smaller than ``batch_size`` (kept by default).
    - ``num_workers > 0``: batches are built on that many threads, ``prefetch`` batches per worker
      in flight ahead of the one being consumed, so loading overlaps the training step. The
      batches and their order are the same as without workers.

    The loader keeps its place: ``epoch`` (the epoch the next iteration reads) advances when an
    iteration runs to its end, and ``position`` counts the batches already handed out in the
    current epoch. An iteration stopped early (``break``) resumes there on the next ``iter``;
    ``state_dict()`` and ``load_state_dict()`` carry that place across a restart, so a resumed
    run reads exactly the batches an uninterrupted one would have. ``set_epoch(n)`` starts epoch
    ``n`` from its beginning.
    """

    def __init__(
        self,
        dataset: Dataset,
        batcher: Batcher,
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        num_workers: int = 0,
        prefetch: int = 2,
        drop_last: bool = False,
        device: Device | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be 0 or more, got {num_workers}")
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, got {prefetch}")
        self.dataset = dataset
        self.batcher = batcher
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.num_workers = num_workers
        self.prefetch = prefetch
        self.drop_last = drop_last
        self.device = device
        self.epoch = 0
        self.position = 0

    def __len__(self) -> int:
        """The number of batches of one epoch."""
        items = len(self.dataset)
        if self.drop_last:
            return items // self.batch_size
        return -(-items // self.batch_size)

    def order(self, epoch: int) -> np.ndarray:
        """The dataset indices in the order epoch ``epoch`` reads them."""
        if not self.shuffle:
            return np.arange(len(self.dataset))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.dataset))

    def batch_indices(self, epoch: int) -> list[list[int]]:
        """The dataset indices of each batch of epoch ``epoch``."""
        order = self.order(epoch).tolist()
        size = self.batch_size
        return [order[start : start + size] for start in range(0, len(self) * size, size)]

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` next, from its first batch."""
        self.epoch = epoch
        self.position = 0

    def place(self) -> tuple[int, int]:
        """(epoch, position) of the next batch: after an epoch's last batch, the next epoch's
        first, even before the iteration has noticed that it is over."""
        if self.position >= len(self) > 0:
            return self.epoch + 1, 0
        return self.epoch, self.position

    def state_dict(self) -> dict[str, int]:
        """Where the loader stands: the epoch, the batches handed out in it, and the settings
        that fix the order (checked by ``load_state_dict``)."""
        epoch, position = self.place()
        return {
            "epoch": epoch,
            "position": position,
            "seed": self.seed,
            "length": len(self.dataset),
            "batch_size": self.batch_size,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from a ``state_dict()``: the next iteration starts at its epoch and batch.

        Raises ValueError when the state was taken on a dataset of another length or with
        another seed or batch size, where the same position would mean other items."""
        for key in ("seed", "length", "batch_size"):
            ours = self.state_dict()[key]
            if key in state and state[key] != ours:
                raise ValueError(
                    f"the loader state was saved with {key}={state[key]}, "
                    f"but this loader has {key}={ours}"
                )
        position = int(state["position"])
        if not 0 <= position <= len(self):
            raise ValueError(f"position {position} is outside an epoch of {len(self)} batches")
        self.epoch = int(state["epoch"])
        self.position = position

    def load(self, indices: list[int]) -> Any:
        """The batch of the items at ``indices``."""
        return self.batcher.batch([self.dataset.get(i) for i in indices], self.device)

    def __iter__(self) -> Iterator[Any]:
        self.epoch, self.position = self.place()
        batches = self.batch_indices(self.epoch)[self.position :]
        if self.num_workers == 0:
            for indices in batches:
                batch = self.load(indices)
                self.position += 1
                yield batch
        else:
            yield from self.iterate_with_workers(batches)
        self.epoch += 1
        self.position = 0

    def iterate_with_workers(self, batches: list[list[int]]) -> Iterator[Any]:
        in_flight: deque[Future] = deque()
        pending = iter(batches)
        executor = ThreadPoolExecutor(self.num_workers, thread_name_prefix="burnish-data")
        try:
            for indices in pending:
                in_flight.append(executor.submit(self.load, indices))
                if len(in_flight) >= self.num_workers * self.prefetch:
                    break
            while in_flight:
                batch = in_flight.popleft().result()
                for indices in pending:
                    in_flight.append(executor.submit(self.load, indices))
                    break
                self.position += 1
                yield batch
        finally:
            # An iteration stopped early must not leave threads building batches nobody reads.
            executor.shutdown(wait=True, cancel_futures=True)
