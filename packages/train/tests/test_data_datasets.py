"""The dataset kinds of burnish.data: in memory, mapped, shuffled, sliced, windowed, composed,
sampled."""

from __future__ import annotations

import pytest

from burnish.data import (
    ComposedDataset,
    Dataset,
    InMemoryDataset,
    MapperDataset,
    PartialDataset,
    SamplerDataset,
    ShuffledDataset,
    WindowsDataset,
)

TEN = InMemoryDataset(list(range(10)))


def test_in_memory_dataset_reads_by_index_and_iterates():
    assert len(TEN) == 10
    assert TEN.get(3) == 3 and TEN[3] == 3 and TEN[-1] == 9
    assert list(TEN) == list(range(10))
    assert isinstance(TEN, Dataset)
    with pytest.raises(IndexError, match="index 10 is out of range for a dataset of 10 items"):
        TEN.get(10)


def test_mapper_dataset_applies_the_function_when_read():
    calls = []
    squares = MapperDataset(TEN, lambda x: calls.append(x) or x * x)
    assert calls == []
    assert len(squares) == 10 and squares[4] == 16 and calls == [4]
    assert list(squares) == [x * x for x in range(10)]


def test_shuffled_dataset_is_a_seeded_permutation():
    shuffled = list(ShuffledDataset(TEN, seed=1))
    assert sorted(shuffled) == list(range(10)) and shuffled != list(range(10))
    assert list(ShuffledDataset(TEN, seed=1)) == shuffled
    assert list(ShuffledDataset(TEN, seed=2)) != shuffled


def test_partial_dataset_is_a_slice():
    assert list(PartialDataset(TEN, 2, 5)) == [2, 3, 4]
    assert list(PartialDataset(TEN, 8, 20)) == [8, 9]
    assert list(PartialDataset(TEN, -3)) == [7, 8, 9]
    assert len(PartialDataset(TEN, 6, 2)) == 0
    with pytest.raises(IndexError):
        PartialDataset(TEN, 2, 5).get(3)


def test_windows_dataset_gives_runs_of_consecutive_items():
    windows = WindowsDataset(TEN, 3)
    assert len(windows) == 8
    assert windows[0] == [0, 1, 2] and windows[-1] == [7, 8, 9]
    assert len(WindowsDataset(InMemoryDataset([1, 2]), 3)) == 0
    with pytest.raises(ValueError, match="size=0"):
        WindowsDataset(TEN, 0)


def test_composed_dataset_concatenates():
    composed = ComposedDataset([InMemoryDataset("ab"), InMemoryDataset([]), InMemoryDataset("cde")])
    assert len(composed) == 5
    assert list(composed) == list("abcde")
    assert composed[2] == "c" and composed[-1] == "e"
    assert len(ComposedDataset([])) == 0
    with pytest.raises(IndexError):
        composed.get(5)


def test_sampler_dataset_with_replacement_is_seeded_and_oversamples():
    sampled = SamplerDataset(InMemoryDataset("abc"), 20, seed=3)
    items = list(sampled)
    assert len(items) == 20 and set(items) <= set("abc")
    assert list(SamplerDataset(InMemoryDataset("abc"), 20, seed=3)) == items


def test_sampler_dataset_without_replacement_draws_each_item_once_per_round():
    subset = list(SamplerDataset(TEN, 4, replacement=False, seed=0))
    assert len(set(subset)) == 4
    rounds = list(SamplerDataset(TEN, 25, replacement=False, seed=0))
    assert sorted(rounds[:10]) == list(range(10)) and sorted(rounds[10:20]) == list(range(10))
    assert len(set(rounds[20:])) == 5
    with pytest.raises(ValueError, match="empty dataset"):
        SamplerDataset(InMemoryDataset([]), 3)


def test_datasets_compose_with_each_other():
    pipeline = MapperDataset(PartialDataset(ShuffledDataset(TEN, seed=0), 0, 5), str)
    assert sorted(pipeline, key=int) == sorted(str(x) for x in list(ShuffledDataset(TEN, 0))[:5])
