"""The DataLoader's worker processes: order, seeding, the last batch, errors, shutdown, resume."""

from __future__ import annotations

import gc
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from loader_workers import (
    ArrayBatcher,
    AugmentedDataset,
    DyingDataset,
    FailingDataset,
    OddError,
    OddFailingDataset,
    WhoDataset,
    remember_worker,
    wait_gone,
)

from burnish import Tensor
from burnish.data import DataLoader, InMemoryDataset, MapperDataset, WorkerError

HERE = Path(__file__).parent


class ListBatcher:
    """A batch is the list of its items (made in the loader's process: it has no collate)."""

    def batch(self, items, device):
        return list(items)


def worker_pids(batches) -> set[int]:
    return {item[1] for batch in batches for item in batch}


@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_come_in_order_with_the_last_one_short_or_dropped(drop_last):
    loader = DataLoader(WhoDataset(23), ListBatcher(), 4, shuffle=True, seed=9, num_workers=2,
                        drop_last=drop_last)
    reference = DataLoader(InMemoryDataset(list(range(23))), ListBatcher(), 4, shuffle=True,
                           seed=9, drop_last=drop_last)
    for _ in range(2):
        batches = list(loader)
        assert [[item[0] for item in batch] for batch in batches] == list(reference)
        assert len(batches) == len(loader) == (5 if drop_last else 6)
        assert len(batches[-1]) == (4 if drop_last else 3)
        pids = worker_pids(batches)
        assert os.getpid() not in pids and 1 <= len(pids) <= 2
        assert {item[2] for batch in batches for item in batch} <= {0, 1}


def test_collating_runs_in_the_workers_and_tensors_are_made_here():
    loader = DataLoader(InMemoryDataset(list(range(10))), ArrayBatcher(), 4, num_workers=2)
    batches = list(loader)
    assert [values.tolist() for values, _, _ in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert all(isinstance(values, Tensor) for values, _, _ in batches)
    assert all(made_in == os.getpid() != collated_in for _, collated_in, made_in in batches)


@pytest.mark.parametrize("num_workers", [0, 1, 3])
def test_augmentations_from_the_global_generators_do_not_depend_on_the_workers(num_workers):
    reference = DataLoader(AugmentedDataset(20), ListBatcher(), 3, shuffle=True, seed=4,
                           num_workers=2)
    loader = DataLoader(AugmentedDataset(20), ListBatcher(), 3, shuffle=True, seed=4,
                        num_workers=num_workers)
    before = (random.getstate(), np.random.get_state()[1].tolist())
    first = [list(reference), list(reference)]
    assert [list(loader), list(loader)] == first
    assert first[0] != first[1]  # each epoch draws anew
    draws = [item[1] for batch in first[0] for item in batch]
    assert len(set(draws)) == len(draws)  # every batch (and item) its own draws
    assert (random.getstate(), np.random.get_state()[1].tolist()) == before


def test_worker_init_fn_runs_once_in_each_worker():
    loader = DataLoader(WhoDataset(12), ListBatcher(), 2, num_workers=2,
                        worker_init_fn=remember_worker, persistent_workers=True)
    try:
        batches = list(loader) + list(loader)
        # Each item was read by the worker that remember_worker was told about.
        assert all(item[3] == item[2] for batch in batches for item in batch)
        assert len(worker_pids(batches)) <= 2
    finally:
        loader.close()


def test_a_worker_error_is_raised_as_itself_naming_the_worker_item_and_traceback():
    loader = DataLoader(FailingDataset(12, bad=7), ListBatcher(), 2, num_workers=2)
    delivered = []
    with pytest.raises(ValueError, match="bad item 7") as caught:
        for batch in loader:
            delivered.append(batch)
    assert delivered == [[0, 1], [2, 3], [4, 5]]  # the batches before the failing one
    note = "\n".join(caught.value.__notes__)
    assert "in DataLoader worker process" in note
    assert "reading item 7 of batch 3 of epoch 0" in note
    assert "Traceback (most recent call last)" in note and "in get" in note
    assert 'raise ValueError(f"bad item {index}")' in note
    assert loader.position == 3  # the failing batch is read again by the next iteration


def test_an_exception_that_cannot_travel_arrives_as_a_worker_error_with_its_text():
    loader = DataLoader(OddFailingDataset(6, bad=2), ListBatcher(), 2, num_workers=1)
    with pytest.raises(WorkerError, match=f"{OddError.__qualname__}: odd failure 7: item 2"):
        list(loader)


def test_a_dataset_that_cannot_be_pickled_is_refused_with_advice():
    data = MapperDataset(InMemoryDataset(list(range(4))), lambda x: x + 1)
    loader = DataLoader(data, ListBatcher(), 2, num_workers=2)
    with pytest.raises(WorkerError, match="need the dataset pickled.*worker_mode='thread'"):
        list(loader)
    threads = DataLoader(data, ListBatcher(), 2, num_workers=2, worker_mode="thread")
    assert list(threads) == [[1, 2], [3, 4]]


def test_a_worker_that_dies_is_reported():
    loader = DataLoader(DyingDataset(8, bad=5), ListBatcher(), 2, num_workers=2)
    with pytest.raises(WorkerError, match="exited with code 3 unexpectedly"):
        list(loader)
    assert loader.workers is None


def test_workers_stop_after_an_epoch_a_break_and_an_error_in_the_loop():
    loader = DataLoader(WhoDataset(16, pause=0.01), ListBatcher(), 2, num_workers=2)
    pids = worker_pids(list(loader))
    assert wait_gone(pids) == [] and loader.workers is None
    for batch in loader:
        pids = worker_pids([batch])
        break
    assert wait_gone(pids) == []
    with pytest.raises(KeyError):
        for batch in loader:
            pids = worker_pids([batch])
            raise KeyError("the training step failed")
    gc.collect()
    assert wait_gone(pids) == []


def test_persistent_workers_serve_every_epoch_until_closed_or_collected():
    loader = DataLoader(WhoDataset(16), ListBatcher(), 2, num_workers=2, shuffle=True,
                        persistent_workers=True)
    served = worker_pids(list(loader))
    # On a busy machine one worker may build every batch of an epoch: compare with the
    # processes the loader started, not with those that happened to serve.
    started = {process.pid for process in loader.workers.processes}
    assert len(started) == 2 and served <= started
    iterator = iter(loader)
    batch = next(iterator)
    iterator.close()  # left early: the workers stay, and skip what was asked of them
    rest = list(loader)
    reference = DataLoader(InMemoryDataset(list(range(16))), ListBatcher(), 2, shuffle=True)
    reference.set_epoch(1)
    assert [[item[0] for item in b] for b in [batch, *rest]] == list(reference)
    assert worker_pids([batch, *rest]) <= started
    assert {process.pid for process in loader.workers.processes} == started
    loader.close()
    assert wait_gone(started) == []
    list(loader)  # a closed loader starts new workers
    again = {process.pid for process in loader.workers.processes}
    assert again and not again & started
    del loader
    gc.collect()
    assert wait_gone(again) == []


def test_an_iteration_overtaken_by_a_newer_one_on_persistent_workers_says_so():
    loader = DataLoader(WhoDataset(40), ListBatcher(), 2, num_workers=2, persistent_workers=True)
    try:
        first = iter(loader)
        next(first)
        assert len(list(loader)) == 19
        with pytest.raises(RuntimeError, match="abandoned when a newer one started"):
            list(first)
    finally:
        loader.close()


def test_the_seed_of_each_iteration_reaches_persistent_workers():
    loader = DataLoader(AugmentedDataset(6), ListBatcher(), 3, num_workers=1,
                        persistent_workers=True)
    try:
        before = list(loader)
        loader.seed, loader.epoch = 1, 0
        other = DataLoader(AugmentedDataset(6), ListBatcher(), 3, seed=1)
        assert list(loader) == list(other) != before
    finally:
        loader.close()


def test_resuming_from_a_state_dict_gives_the_uninterrupted_batches():
    whole = DataLoader(AugmentedDataset(30), ListBatcher(), 4, shuffle=True, seed=3)
    epochs = [list(whole), list(whole)]
    loader = DataLoader(AugmentedDataset(30), ListBatcher(), 4, shuffle=True, seed=3,
                        num_workers=2)
    list(loader)
    seen = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == 3:
            state = loader.state_dict()
            break
    resumed = DataLoader(AugmentedDataset(30), ListBatcher(), 4, shuffle=True, seed=3,
                         num_workers=2)
    resumed.load_state_dict(state)
    assert seen + list(resumed) == epochs[1]  # the augmentations too


def run_reader(*args: str) -> tuple[subprocess.Popen, list[int]]:
    """loader_workers.py reading a loader in a process group of its own; its workers' ids."""
    reader = subprocess.Popen([sys.executable, str(HERE / "loader_workers.py"), *args],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    line = reader.stdout.readline().split()
    assert line[:1] == ["workers"], line
    return reader, [int(pid) for pid in line[1:]]


@pytest.mark.parametrize("persistent", [False, True])
def test_ctrl_c_stops_the_workers_with_the_loader(persistent):
    reader, pids = run_reader(*(["persistent"] if persistent else []))
    os.killpg(reader.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    out, _ = reader.communicate(timeout=30)
    assert reader.returncode == 130 and "interrupted" in out
    assert wait_gone(pids) == []


def test_workers_leave_when_the_loader_process_is_killed():
    reader, pids = run_reader("persistent")
    reader.kill()
    reader.wait(timeout=30)
    assert wait_gone(pids) == []
