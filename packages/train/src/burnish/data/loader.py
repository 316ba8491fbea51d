"""The DataLoader: batches of a dataset in a seeded order, built ahead by worker processes or
threads."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from burnish import Device

from .batcher import Batcher
from .dataset import Dataset
from .workers import ProcessWorkers, WorkerInfo, seeded_generators, set_worker_info

WORKER_MODES = ("process", "thread")


class DataLoader:
    """Iterates over ``dataset`` in batches of ``batch_size`` items, each made by
    ``batcher.batch(items, device)``.

    - ``shuffle``: each epoch reads the items in a new random order, fixed by ``(seed, epoch)``;
      without it, in index order.
    - ``drop_last``: leave out a last batch smaller than ``batch_size`` (kept by default).
    - ``num_workers > 0``: batches are built by that many workers, ``prefetch`` batches per
      worker in flight ahead of the one being consumed, so loading overlaps the training step.
      The batches and their order are the same as without workers.
    - ``worker_mode="process"`` (the default): the workers are processes, which run Python item
      work (decoding, augmentation) in parallel with the training step. Each reads the items of
      whole batches (``dataset.get``) and, when the batcher has ``collate`` and ``to_tensors``,
      collates them into NumPy arrays; the loader's process makes the tensors
      (``to_tensors``, or ``batch`` on the items read for other batchers), so tensors never
      cross processes. The dataset and batcher are pickled to the workers
      (``multiprocessing_context``: "forkserver" where there is one, else "spawn"; "fork" shares
      them unpickled), and ``worker_init_fn(worker_id)`` runs in each worker once it starts.
      ``persistent_workers`` keeps the processes from one epoch to the next (until ``close()``
      or garbage collection) instead of starting them at each iteration. An exception raised in
      a worker is raised here as itself, with a note naming the worker, the item and the
      worker's traceback. As with any multiprocessing, the workers import the main script
      again: keep its work under ``if __name__ == "__main__":``.
    - ``worker_mode="thread"``: the workers are threads running ``batcher.batch``; they share
      this process's objects (nothing is pickled) and the GIL, so they help when the loading
      releases it (file reads, zlib, large NumPy operations).
    - Without workers and with process workers, each batch is built with Python's ``random`` and
      NumPy's global generator seeded from ``(seed, epoch, position)`` (and restored after), so
      augmentations drawn from them are the same whichever worker builds the batch, and after a
      resume. Threads share those generators: draw from per-item generators there.

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
        worker_mode: str = "process",
        persistent_workers: bool = False,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: str | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be 0 or more, got {num_workers}")
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, got {prefetch}")
        if worker_mode not in WORKER_MODES:
            raise ValueError(f"worker_mode must be 'process' or 'thread', got {worker_mode!r}")
        self.dataset = dataset
        self.batcher = batcher
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.num_workers = num_workers
        self.prefetch = prefetch
        self.drop_last = drop_last
        self.device = device
        self.worker_mode = worker_mode
        self.persistent_workers = persistent_workers
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.epoch = 0
        self.position = 0
        self.workers: ProcessWorkers | None = None

    def close(self) -> None:
        """Stop the persistent worker processes now (garbage collection does it otherwise); a
        later iteration starts new ones."""
        if self.workers is not None:
            self.workers.shutdown()
            self.workers = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["workers"] = None  # processes belong to the loader they were started for
        return state

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
                with seeded_generators(self.seed, self.epoch, self.position):
                    batch = self.load(indices)
                self.position += 1
                yield batch
        elif self.worker_mode == "process":
            yield from self.iterate_with_processes(batches)
        else:
            yield from self.iterate_with_threads(batches)
        self.epoch += 1
        self.position = 0

    def iterate_with_processes(self, batches: list[list[int]]) -> Iterator[Any]:
        collating = hasattr(self.batcher, "collate") and hasattr(self.batcher, "to_tensors")
        if self.persistent_workers and self.workers is not None and self.workers.alive:
            workers = self.workers
        else:
            workers = ProcessWorkers(
                self.dataset, self.batcher if collating else None, self.num_workers, self.seed,
                self.worker_init_fn, self.multiprocessing_context,
            )
            if self.persistent_workers:
                self.workers = workers
        tasks = list(enumerate(batches, self.position))
        ahead = self.num_workers * self.prefetch
        keep = self.persistent_workers
        try:
            for payload in workers.run(self.seed, self.epoch, tasks, ahead):
                if collating:
                    # collating: the batcher has collate and to_tensors (checked above)
                    batch = self.batcher.to_tensors(payload, self.device)  # type: ignore[attr-defined]
                else:
                    batch = self.batcher.batch(payload, self.device)
                self.position += 1
                yield batch
        except GeneratorExit:  # a loop left early: the workers are fine, their tasks skipped
            raise
        except BaseException:
            keep = False  # an interrupted queue read, a dead worker: start afresh next time
            raise
        finally:
            if not keep:
                workers.shutdown()
                if self.workers is workers:
                    self.workers = None

    def iterate_with_threads(self, batches: list[list[int]]) -> Iterator[Any]:
        in_flight: deque[Future] = deque()
        pending = iter(batches)
        ids = itertools.count()

        def start_thread() -> None:
            worker_id = next(ids)
            set_worker_info(WorkerInfo(worker_id, self.num_workers, self.seed, self.dataset))
            if self.worker_init_fn is not None:
                self.worker_init_fn(worker_id)

        executor = ThreadPoolExecutor(
            self.num_workers, thread_name_prefix="burnish-data", initializer=start_thread
        )
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
