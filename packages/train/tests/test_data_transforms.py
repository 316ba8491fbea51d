"""Normalizer (standardisation fitted on training data) and the image augmentations."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from loader_workers import Augment, Stack  # importable by the worker processes

from burnish.data import (
    Compose,
    DataLoader,
    InMemoryDataset,
    MapperDataset,
    Normalizer,
    RandomCrop,
    RandomFlip,
)


def test_normalizer_standardises_with_the_training_statistics():
    train = np.array([[1.0, 10.0, 5.0], [3.0, 30.0, 5.0]])
    normalizer = Normalizer.fit(train)
    np.testing.assert_allclose(normalizer.mean, [2, 20, 5])
    np.testing.assert_allclose(normalizer.std, [1, 10, 0])
    out = normalizer(train)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[-1, -1, 0], [1, 1, 0]])  # the constant column is centred
    # Other data is standardised with the training split's statistics, not its own.
    np.testing.assert_allclose(normalizer(np.array([[4.0, 0.0, 7.0]])), [[2, -2, 2]])
    np.testing.assert_allclose(normalizer.inverse(out), train)


def test_normalizer_ignores_nan_and_checks_shapes():
    normalizer = Normalizer.fit(np.array([[1.0], [np.nan], [3.0]]))
    np.testing.assert_allclose(normalizer.mean, [2])
    with pytest.raises(ValueError, match=r"shape \(2, 3\).*feature shape \(1,\)"):
        normalizer(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="no item"):
        Normalizer.fit(np.zeros((0, 3)))
    # Per-channel statistics of images [n, h, w, c]: reduce over the first three axes.
    images = np.random.default_rng(0).random((4, 5, 5, 3))
    channels = Normalizer.fit(images, axis=(0, 1, 2))
    assert channels.mean.shape == (3,)
    np.testing.assert_allclose(channels(images).mean(axis=(0, 1, 2)), 0, atol=1e-6)


def test_random_crop_shifts_within_the_padding_and_is_seeded():
    image = np.arange(16, dtype=np.uint8).reshape(4, 4) + 1
    crop = RandomCrop(4, padding=1)
    outs = [crop(image, np.random.default_rng(seed)) for seed in range(30)]
    assert all(out.shape == (4, 4) and out.dtype == np.uint8 for out in outs)
    # Every output is the image shifted by at most one pixel, zeros filling in.
    shifts = set()
    for out in outs:
        padded = np.pad(image, 1)
        found = [(dy, dx) for dy in range(3) for dx in range(3)
                 if np.array_equal(padded[dy:dy + 4, dx:dx + 4], out)]
        assert found, out
        shifts.add(found[0])
    assert len(shifts) > 4  # the shifts vary
    again = crop(image, np.random.default_rng(7))
    np.testing.assert_array_equal(again, outs[7])
    colour = RandomCrop((2, 3))(np.zeros((4, 5, 3)), np.random.default_rng(0))
    assert colour.shape == (2, 3, 3)
    with pytest.raises(ValueError, match="cannot crop 6x6 from a 4x4 image"):
        RandomCrop(6)(image)


def test_random_flip():
    image = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(RandomFlip(p=1)(image), image[:, ::-1])
    np.testing.assert_array_equal(RandomFlip(p=1, horizontal=False)(image), image[::-1])
    np.testing.assert_array_equal(RandomFlip(p=0)(image), image)
    flips = [RandomFlip()(image, np.random.default_rng(s))[0, 0] for s in range(40)]
    assert 0 in flips and 2 in flips
    with pytest.raises(ValueError, match="probability"):
        RandomFlip(p=2)


def test_augmentations_under_the_loader_are_the_same_with_and_without_workers():
    images = InMemoryDataset([np.full((6, 6), i + 1, np.uint8) for i in range(8)])
    augmented = MapperDataset(images, Augment(Compose(RandomCrop(6, padding=2), RandomFlip())))
    pickle.dumps(augmented)

    def epoch(seed=3, **options):
        loader = DataLoader(augmented, Stack(), batch_size=4, shuffle=True, seed=seed, **options)
        return [batch.copy() for batch in loader]

    plain = epoch()
    assert any(not np.array_equal(a, b) for a, b in zip(plain, epoch(seed=4)))
    for a, b in zip(plain, epoch(num_workers=2, worker_mode="process")):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(plain, epoch()):
        np.testing.assert_array_equal(a, b)
