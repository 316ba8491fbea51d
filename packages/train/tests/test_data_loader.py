"""The DataLoader: batch order, seeding, epochs, resuming, workers, the last batch (worker
processes in more depth: test_data_loader_workers.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from burnish.data import DataLoader, InMemoryDataset, MapperDataset, MnistBatcher, MnistItem


class ListBatcher:
    """A batch is the list of its items (and the device it was asked for)."""

    def batch(self, items, device):
        return list(items)


def epochs(loader, count):
    return [list(loader) for _ in range(count)]


def test_batches_in_order_without_shuffle_and_a_short_last_batch():
    loader = DataLoader(InMemoryDataset(list(range(10))), ListBatcher(), batch_size=4)
    assert len(loader) == 3
    assert list(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_drop_last_leaves_out_the_short_batch():
    loader = DataLoader(InMemoryDataset(list(range(10))), ListBatcher(), 4, drop_last=True)
    assert len(loader) == 2
    assert list(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    exact = DataLoader(InMemoryDataset(list(range(8))), ListBatcher(), 4, drop_last=True)
    assert len(exact) == 2 and len(list(exact)) == 2


def test_shuffle_gives_a_new_seeded_order_each_epoch():
    data = InMemoryDataset(list(range(20)))
    first = epochs(DataLoader(data, ListBatcher(), 5, shuffle=True, seed=7), 3)
    again = epochs(DataLoader(data, ListBatcher(), 5, shuffle=True, seed=7), 3)
    other = epochs(DataLoader(data, ListBatcher(), 5, shuffle=True, seed=8), 3)
    assert first == again and first != other
    assert first[0] != first[1] != first[2]
    for epoch in first:
        assert sorted(x for batch in epoch for x in batch) == list(range(20))


def test_set_epoch_reproduces_that_epoch():
    loader = DataLoader(InMemoryDataset(list(range(12))), ListBatcher(), 4, shuffle=True, seed=1)
    three = epochs(loader, 3)
    assert loader.epoch == 3
    loader.set_epoch(1)
    assert list(loader) == three[1] and loader.epoch == 2


def test_state_dict_resumes_exactly_mid_epoch():
    data = InMemoryDataset(list(range(30)))
    whole = epochs(DataLoader(data, ListBatcher(), 4, shuffle=True, seed=3), 2)
    loader = DataLoader(data, ListBatcher(), 4, shuffle=True, seed=3)
    list(loader)
    seen = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == 3:
            state = loader.state_dict()
            break
    assert state["epoch"] == 1 and state["position"] == 3
    resumed = DataLoader(data, ListBatcher(), 4, shuffle=True, seed=3)
    resumed.load_state_dict(state)
    assert seen + list(resumed) == whole[1]
    assert resumed.state_dict()["epoch"] == 2 and resumed.state_dict()["position"] == 0


def test_a_state_saved_after_the_last_batch_resumes_with_the_next_epoch():
    data = InMemoryDataset(list(range(8)))
    whole = epochs(DataLoader(data, ListBatcher(), 4, shuffle=True, seed=4), 2)
    loader = DataLoader(data, ListBatcher(), 4, shuffle=True, seed=4)
    for index, _ in enumerate(loader):
        if index == len(loader) - 1:
            state = loader.state_dict()
            break
    assert (state["epoch"], state["position"]) == (1, 0)
    resumed = DataLoader(data, ListBatcher(), 4, shuffle=True, seed=4)
    resumed.load_state_dict(state)
    assert list(resumed) == whole[1]
    assert list(loader) == whole[1]


def test_an_iteration_stopped_early_continues_where_it_stopped():
    loader = DataLoader(InMemoryDataset(list(range(6))), ListBatcher(), 2)
    assert next(iter(loader)) == [0, 1]
    assert list(loader) == [[2, 3], [4, 5]] and loader.epoch == 1


def test_load_state_dict_refuses_a_state_of_another_setup():
    loader = DataLoader(InMemoryDataset(list(range(10))), ListBatcher(), 4, seed=1)
    state = loader.state_dict()
    other = DataLoader(InMemoryDataset(list(range(11))), ListBatcher(), 4, seed=1)
    with pytest.raises(ValueError, match="length=10, but this loader has length=11"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="position 9 is outside an epoch of 3 batches"):
        loader.load_state_dict({"epoch": 0, "position": 9})


@pytest.mark.parametrize("mode", ["process", "thread"])
@pytest.mark.parametrize("num_workers", [1, 3])
def test_workers_give_the_same_batches(num_workers, mode):
    data = InMemoryDataset(list(range(23)))
    plain = DataLoader(data, ListBatcher(), 4, shuffle=True, seed=5)
    workers = DataLoader(data, ListBatcher(), 4, shuffle=True, seed=5, num_workers=num_workers,
                         worker_mode=mode)
    assert epochs(plain, 2) == epochs(workers, 2)


def test_worker_threads_load_batches_concurrently_ahead_of_the_consumer():
    lock = threading.Lock()
    active = [0, 0]  # now, most at once

    def slow(x):
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return x

    data = MapperDataset(InMemoryDataset(list(range(16))), slow)
    loader = DataLoader(data, ListBatcher(), 2, num_workers=4, prefetch=2, worker_mode="thread")
    assert [x for batch in loader for x in batch] == list(range(16))
    assert active[1] > 1


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_workers_resume_and_stop_early_cleanly(mode):
    data = InMemoryDataset(list(range(40)))
    whole = list(DataLoader(data, ListBatcher(), 4, shuffle=True, seed=2))
    loader = DataLoader(data, ListBatcher(), 4, shuffle=True, seed=2, num_workers=2,
                        worker_mode=mode)
    seen = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == 4:
            break
    assert loader.state_dict()["position"] == 4
    assert seen + list(loader) == whole


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_a_batcher_error_reaches_the_consumer(mode):
    class Failing:
        def batch(self, items, device):
            if 4 in items:
                raise RuntimeError("bad item 4")
            return items

    loader = DataLoader(InMemoryDataset(list(range(8))), Failing(), 2, num_workers=2,
                        worker_mode=mode)
    with pytest.raises(RuntimeError, match="bad item 4"):
        list(loader)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(InMemoryDataset([1]), ListBatcher(), 0)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(InMemoryDataset([1]), ListBatcher(), 1, num_workers=-1)
    with pytest.raises(ValueError, match="worker_mode must be 'process' or 'thread'"):
        DataLoader(InMemoryDataset([1]), ListBatcher(), 1, worker_mode="processes")


def test_mnist_batcher_makes_normalised_float_images_and_int64_targets():
    items = [
        MnistItem(np.full((28, 28), 255, np.uint8), 3),
        MnistItem(np.zeros((28, 28), np.uint8), 9),
    ]
    batch = MnistBatcher().batch(items, None)
    assert batch.images.shape == [2, 1, 28, 28] and str(batch.images.dtype) == "float32"
    assert str(batch.targets.dtype) == "int64" and batch.targets.tolist() == [3, 9]
    pixels = np.asarray(batch.images.tolist())
    np.testing.assert_allclose(pixels[0, 0, 0, 0], (1 - 0.1307) / 0.3081, rtol=1e-6)
    np.testing.assert_allclose(pixels[1, 0, 5, 5], -0.1307 / 0.3081, rtol=1e-6)


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_the_loader_passes_its_device_to_the_batcher(mode):
    import burnish as bn
    from burnish.data import MnistBatch

    device = bn.backend("ndarray").default_device()
    items = [MnistItem(np.full((28, 28), i, np.uint8), i) for i in range(5)]
    loader = DataLoader(InMemoryDataset(items), MnistBatcher(), 2, device=device, num_workers=2,
                        worker_mode=mode)
    batches = list(loader)
    assert all(isinstance(b, MnistBatch) for b in batches)
    assert [b.targets.tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    assert all(b.images.device == device for b in batches)
    expected = MnistBatcher().batch(items[2:4], device)
    np.testing.assert_array_equal(batches[1].images.to_numpy(), expected.images.to_numpy())
