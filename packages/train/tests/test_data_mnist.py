"""MNIST: IDX parsing, the real test set (with BURNISH_MNIST_DIR, and the copy shipped in
burnish-train), downloads without a network."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path
from urllib.error import URLError

import numpy as np
import pytest

from burnish.data import (
    ChecksumError,
    DataError,
    DataLoader,
    MnistBatcher,
    MnistDataset,
    read_idx,
)
from burnish.data import download as download_module
from burnish.data import mnist as mnist_module

MNIST_DIR = os.environ.get("BURNISH_MNIST_DIR")


def idx_bytes(array: np.ndarray) -> bytes:
    """``array`` (uint8) as an IDX file."""
    header = bytes([0, 0, 0x08, array.ndim]) + np.array(array.shape, ">u4").tobytes()
    return header + array.astype(np.uint8).tobytes()


def tiny_split(count: int = 5) -> tuple[np.ndarray, np.ndarray]:
    images = np.arange(count * 28 * 28, dtype=np.int64).reshape(count, 28, 28) % 256
    return images.astype(np.uint8), np.arange(count, dtype=np.uint8) % 10


def write_split(folder: Path, prefix: str, compress: bool, count: int = 5) -> dict[str, bytes]:
    images, labels = tiny_split(count)
    files = {
        f"{prefix}-images-idx3-ubyte": idx_bytes(images),
        f"{prefix}-labels-idx1-ubyte": idx_bytes(labels),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if compress:
            (folder / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)
    return files


@pytest.mark.parametrize("compress", [False, True])
def test_a_tiny_idx_split_parses(tmp_path, compress):
    write_split(tmp_path, "t10k", compress)
    dataset = MnistDataset("test", root=tmp_path)
    images, labels = tiny_split()
    assert len(dataset) == 5
    item = dataset[3]
    assert item.label == 3 and item.image.dtype == np.uint8 and item.image.shape == (28, 28)
    np.testing.assert_array_equal(item.image, images[3])


def test_read_idx_checks_header_and_size(tmp_path):
    good = idx_bytes(np.arange(6, dtype=np.uint8).reshape(2, 3))
    (tmp_path / "good").write_bytes(good)
    np.testing.assert_array_equal(read_idx(tmp_path / "good"), [[0, 1, 2], [3, 4, 5]])
    (tmp_path / "short").write_bytes(good[:-1])
    with pytest.raises(DataError, match="holds 17 bytes, but its shape \\[2, 3\\]"):
        read_idx(tmp_path / "short")
    (tmp_path / "text").write_bytes(b"hello world")
    with pytest.raises(DataError, match="is not an IDX file"):
        read_idx(tmp_path / "text")


def test_a_missing_file_and_a_bad_split_are_named(tmp_path):
    with pytest.raises(DataError, match="neither train-images-idx3-ubyte nor .*gz is in"):
        MnistDataset("train", root=tmp_path)
    with pytest.raises(ValueError, match="'valid'"):
        MnistDataset("valid", root=tmp_path)


def test_images_and_labels_of_different_counts_are_refused(tmp_path):
    write_split(tmp_path, "t10k", False)
    labels = idx_bytes(np.zeros(4, np.uint8))
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(labels)
    with pytest.raises(DataError, match="5 images but .* 4 labels"):
        MnistDataset("test", root=tmp_path)


@pytest.mark.skipif(MNIST_DIR is None, reason="set BURNISH_MNIST_DIR to the MNIST folder")
def test_the_real_test_set():
    dataset = MnistDataset("test", root=MNIST_DIR)
    assert len(dataset) == 10_000
    assert dataset[0].label == 7
    assert sorted(set(dataset.labels.tolist())) == list(range(10))
    assert dataset[0].image.shape == (28, 28) and dataset[0].image.max() == 255
    batch = next(iter(DataLoader(dataset, MnistBatcher(), 64)))
    assert batch.images.shape == [64, 1, 28, 28] and batch.targets.tolist()[0] == 7


def test_the_shipped_test_set_is_mnists():
    dataset = MnistDataset("test", embedded=True)
    assert len(dataset) == 10_000 and dataset[0].label == 7 and dataset[-1].label == 6
    assert dataset.images.shape == (10_000, 28, 28) and dataset.images.dtype == np.uint8
    assert np.bincount(dataset.labels).tolist() == [
        980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009
    ]
    if MNIST_DIR is not None:
        real = MnistDataset("test", root=MNIST_DIR)
        np.testing.assert_array_equal(dataset.images, real.images)
        np.testing.assert_array_equal(dataset.labels, real.labels)


def test_the_shipped_copy_needs_no_cache_and_no_network(monkeypatch, tmp_path):
    def no_network(*args, **kwargs):
        raise AssertionError("the shipped copy should have been read")

    monkeypatch.setattr(download_module, "urlopen", no_network)
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
    assert len(MnistDataset("test", embedded=True)) == 10_000
    assert not (tmp_path / "cache").exists()


def test_only_the_test_split_is_shipped_and_not_with_a_folder(tmp_path):
    with pytest.raises(ValueError, match="ships only MNIST's test split .* not 'train'"):
        MnistDataset("train", embedded=True)
    with pytest.raises(ValueError, match="embedded=True reads the copy .* root="):
        MnistDataset("test", root=tmp_path, embedded=True)


def test_a_damaged_shipped_copy_is_refused(monkeypatch, tmp_path):
    images, labels = tiny_split()
    monkeypatch.setattr(mnist_module, "EMBEDDED_DIR", tmp_path)
    with pytest.raises(DataError, match="t10k-images-idx3-ubyte.gz is missing .* reinstall"):
        MnistDataset("test", embedded=True)
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes(images)))
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(labels)))
    with pytest.raises(ChecksumError, match="decompresses to SHA-256 [0-9a-f]{64}, but MNIST's "
                       "t10k-images-idx3-ubyte has 0fa7898d"):
        MnistDataset("test", embedded=True)
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8b not gzip")
    with pytest.raises(ChecksumError, match="does not decompress"):
        MnistDataset("test", embedded=True)


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A local mirror (file://) of a tiny test split, its checksums, and an empty cache."""
    files = write_split(tmp_path / "mirror", "t10k", compress=True)
    monkeypatch.setattr(mnist_module, "MIRRORS", [(tmp_path / "mirror").as_uri() + "/"])
    sums = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    monkeypatch.setattr(mnist_module, "SHA256", sums)
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "mnist"


def test_download_fills_the_cache_and_reuses_it(mirror, monkeypatch, capsys):
    dataset = MnistDataset("test")
    assert len(dataset) == 5 and dataset[2].label == 2
    assert sorted(p.name for p in mirror.iterdir()) == [
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ]
    assert "t10k-images-idx3-ubyte" in capsys.readouterr().err

    def no_network(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(download_module, "urlopen", no_network)
    assert len(MnistDataset("test")) == 5


def test_the_next_mirror_is_tried_when_one_fails(mirror, monkeypatch, tmp_path):
    good = mnist_module.MIRRORS[0]
    monkeypatch.setattr(mnist_module, "MIRRORS", [(tmp_path / "nowhere").as_uri() + "/", good])
    assert len(MnistDataset("test")) == 5


def test_a_checksum_mismatch_keeps_nothing(mirror, monkeypatch):
    monkeypatch.setitem(mnist_module.SHA256, "t10k-images-idx3-ubyte", "0" * 64)
    with pytest.raises(ChecksumError, match="published checksum is 0000"):
        MnistDataset("test")
    assert not mirror.exists() or not any(mirror.iterdir())


def test_offline_says_to_pass_root(mirror, monkeypatch):
    def offline(*args, **kwargs):
        raise URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(download_module, "urlopen", offline)
    with pytest.raises(DataError, match="offline.*name resolution.*Pass root="):
        MnistDataset("test")
    with pytest.raises(DataError, match="download=False; pass root="):
        MnistDataset("test", download=False)


def test_burnish_offline_downloads_nothing(mirror, monkeypatch):
    urlopen = download_module.urlopen

    def no_network(*args, **kwargs):
        raise AssertionError("BURNISH_OFFLINE should have stopped the download")

    monkeypatch.setattr(download_module, "urlopen", no_network)
    monkeypatch.setenv("BURNISH_OFFLINE", "1")
    with pytest.raises(DataError, match="not downloading t10k-images-idx3-ubyte: BURNISH_OFFLINE"):
        MnistDataset("test")
    assert not mirror.exists()
    monkeypatch.setattr(download_module, "urlopen", urlopen)
    for allowed in ("0", ""):
        monkeypatch.setenv("BURNISH_OFFLINE", allowed)
        assert len(MnistDataset("test")) == 5


def test_the_cache_folder_follows_burnish_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path))
    assert download_module.cache_dir("mnist") == tmp_path / "mnist"
    monkeypatch.delenv("BURNISH_CACHE")
    assert download_module.cache_dir("mnist") == Path.home() / ".cache" / "burnish" / "mnist"
