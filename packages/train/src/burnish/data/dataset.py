"""The Dataset protocol and the datasets that wrap other datasets (map, shuffle, slice, window)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Dataset(Protocol):
    """What the DataLoader reads: a length and random access by index.

    ``get(index)`` takes ``0 <= index < len(dataset)`` and returns one item; the datasets of this
    module also accept ``dataset[index]`` and iterate over their items in order.
    """

    def __len__(self) -> int: ...

    def get(self, index: int) -> Any: ...


class DatasetBase:
    """Shared behaviour: ``dataset[i]`` (negative indices count from the end) and iteration."""

    def __len__(self) -> int:
        raise NotImplementedError

    def get(self, index: int) -> Any:
        raise NotImplementedError

    def __getitem__(self, index: int) -> Any:
        return self.get(check_index(index, len(self)))

    def __iter__(self) -> Iterator[Any]:
        for index in range(len(self)):
            yield self.get(index)


def check_index(index: int, length: int) -> int:
    """``index`` made non-negative; IndexError naming both the index and the length otherwise."""
    position = index + length if index < 0 else index
    if not 0 <= position < length:
        raise IndexError(f"index {index} is out of range for a dataset of {length} items")
    return position


class InMemoryDataset(DatasetBase):
    """The items of a list (or any sequence), held in memory."""

    def __init__(self, items: Sequence[Any]):
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def get(self, index: int) -> Any:
        return self.items[check_index(index, len(self))]


class MapperDataset(DatasetBase):
    """``fn(item)`` for each item of ``dataset``, computed when the item is read."""

    def __init__(self, dataset: Dataset, fn: Callable[[Any], Any]):
        self.dataset = dataset
        self.fn = fn

    def __len__(self) -> int:
        return len(self.dataset)

    def get(self, index: int) -> Any:
        return self.fn(self.dataset.get(index))


class ShuffledDataset(DatasetBase):
    """The items of ``dataset`` in a fixed random order: the same seed gives the same order."""

    def __init__(self, dataset: Dataset, seed: int = 0):
        self.dataset = dataset
        self.seed = seed
        self.order = np.random.default_rng(seed).permutation(len(dataset))

    def __len__(self) -> int:
        return len(self.order)

    def get(self, index: int) -> Any:
        return self.dataset.get(int(self.order[check_index(index, len(self))]))


class PartialDataset(DatasetBase):
    """Items ``start`` (included) to ``end`` (excluded) of ``dataset``, as ``items[start:end]``:
    bounds are clamped to the dataset, and negative bounds count from its end."""

    def __init__(self, dataset: Dataset, start: int = 0, end: int | None = None):
        self.dataset = dataset
        self.start, self.end, _ = slice(start, end).indices(len(dataset))
        self.end = max(self.end, self.start)

    def __len__(self) -> int:
        return self.end - self.start

    def get(self, index: int) -> Any:
        return self.dataset.get(self.start + check_index(index, len(self)))


class WindowsDataset(DatasetBase):
    """Every run of ``size`` consecutive items of ``dataset``, as a list: item ``i`` is
    ``[dataset[i], ..., dataset[i + size - 1]]``, so there are ``len(dataset) - size + 1``."""

    def __init__(self, dataset: Dataset, size: int):
        if size < 1:
            raise ValueError(f"a window holds at least one item, got size={size}")
        self.dataset = dataset
        self.size = size

    def __len__(self) -> int:
        return max(len(self.dataset) - self.size + 1, 0)

    def get(self, index: int) -> list[Any]:
        start = check_index(index, len(self))
        return [self.dataset.get(start + offset) for offset in range(self.size)]


class ComposedDataset(DatasetBase):
    """The datasets one after the other: the items of the first, then of the second, ..."""

    def __init__(self, datasets: Sequence[Dataset]):
        self.datasets = list(datasets)
        self.ends = np.cumsum([len(d) for d in self.datasets], dtype=np.int64).tolist()

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def get(self, index: int) -> Any:
        index = check_index(index, len(self))
        which = bisect.bisect_right(self.ends, index)
        start = self.ends[which - 1] if which else 0
        return self.datasets[which].get(index - start)


class SamplerDataset(DatasetBase):
    """``size`` items drawn at random from ``dataset`` (with replacement unless told), fixed by
    ``seed``: oversample a small dataset, or take a random subset. Without replacement, ``size``
    may exceed the dataset's length: the dataset is then drawn whole, again and again."""

    def __init__(self, dataset: Dataset, size: int, replacement: bool = True, seed: int = 0):
        length = len(dataset)
        if size < 0:
            raise ValueError(f"a sampler draws a non-negative number of items, got size={size}")
        if length == 0 and size > 0:
            raise ValueError(f"cannot draw {size} items from an empty dataset")
        self.dataset = dataset
        rng = np.random.default_rng(seed)
        if replacement:
            self.indices = rng.integers(0, max(length, 1), size)
        else:
            rounds = -(-size // length) if size else 0
            self.indices = np.concatenate(
                [rng.permutation(length) for _ in range(rounds)] or [np.zeros(0, np.int64)]
            )[:size]

    def __len__(self) -> int:
        return len(self.indices)

    def get(self, index: int) -> Any:
        return self.dataset.get(int(self.indices[check_index(index, len(self))]))
