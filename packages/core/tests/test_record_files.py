"""Record files under stress: atomic writes, truncation, flipped bytes and hostile inputs."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import struct
from pathlib import Path

import msgpack
import numpy as np
import pytest

from burnish.errors import RecordError
from burnish.record import atomic as atomic_module
from burnish.record import formats, load, save
from burnish.record.builtin.binary import MAGIC
from burnish.record.record import RecordMetadata
from burnish.record.tree import normalize
from burnish.tensor_data import TensorData

FORMATS = ["safetensors", "msgpack", "json", "binary"]
EXTENSIONS = {"safetensors": ".safetensors", "msgpack": ".mpk", "json": ".json", "binary": ".bin"}


def small_record() -> dict:
    return {
        "encoder": {
            "weight": TensorData(np.arange(6, dtype=np.float32).reshape(2, 3)),
            "mask": TensorData(np.array([True, False])),
            "layers": [{"bias": TensorData(np.array([-1, 7], dtype=np.int16))}],
        },
        "scale": TensorData(np.array(0.5, dtype=np.float64)),
        "empty": {},
    }


def encoded(name: str) -> bytes:
    """The bytes ``name`` writes for small_record(), without touching the disk."""
    return formats()[name].dumps(normalize(small_record()), RecordMetadata(user={"m": "x"}))


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# Atomic writes.


def test_a_failed_write_leaves_the_previous_file_intact(tmp_path: Path, monkeypatch) -> None:
    path = save({"w": TensorData([1.0])}, tmp_path / "m.bin")
    before = path.read_bytes()

    def broken_fsync(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_module.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space left"):
        save({"w": TensorData([2.0, 3.0])}, path)
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []
    monkeypatch.undo()
    load(path).tensors["w"].assert_eq(TensorData([1.0]))


def test_an_interrupted_write_leaves_the_previous_file_intact(tmp_path: Path, monkeypatch) -> None:
    path = save({"w": TensorData([1.0])}, tmp_path / "m.mpk")
    before = path.read_bytes()

    def interrupted_replace(source: str, target: str) -> None:
        assert Path(source).read_bytes() != before  # the new bytes were fully written
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic_module.os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        save({"w": TensorData([2.0, 3.0])}, path)
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_a_write_that_stops_halfway_never_reaches_the_target(tmp_path: Path, monkeypatch) -> None:
    path = save({"w": TensorData([1.0])}, tmp_path / "m.safetensors")
    before = path.read_bytes()
    real_open = open

    class HalfFile:
        def __init__(self, file):
            self.file = file

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, data: bytes) -> None:
            self.file.write(data[: len(data) // 2])
            raise OSError(5, "I/O error")

    monkeypatch.setattr(atomic_module, "open", lambda fd, mode: HalfFile(real_open(fd, mode)),
                        raising=False)
    with pytest.raises(OSError, match="I/O error"):
        save({"w": TensorData(np.zeros(1000, np.float32))}, path)
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_a_record_that_cannot_be_encoded_creates_no_file(tmp_path: Path) -> None:
    with pytest.raises(RecordError):
        save({"w": None}, tmp_path / "m.json")  # type: ignore[dict-item]
    assert list(tmp_path.iterdir()) == []


def test_new_files_get_ordinary_permissions(tmp_path: Path) -> None:
    path = save({}, tmp_path / "m.bin")
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


# Truncated and corrupt files.


@pytest.mark.parametrize("name", FORMATS)
def test_every_truncation_is_an_error(name: str) -> None:
    data = encoded(name)
    # A JSON document minus its final newline is still the same document.
    end = len(data.rstrip()) if name == "json" else len(data)
    for cut in range(end):
        with pytest.raises(RecordError):
            formats()[name].loads(data[:cut])


@pytest.mark.parametrize("name", FORMATS)
def test_truncated_files_name_the_file(tmp_path: Path, name: str) -> None:
    data = encoded(name)
    path = tmp_path / f"cut{EXTENSIONS[name]}"
    for cut in np.linspace(0, len(data) - 2, 7).astype(int):
        path.write_bytes(data[:cut])
        with pytest.raises(RecordError, match=f"cannot load {path} as {name}"):
            load(path)


@pytest.mark.parametrize("name", FORMATS)
def test_flipped_bytes_give_a_record_error_or_a_record(name: str) -> None:
    """Formats without a checksum may read a flipped value back as a different value, but never
    fail with anything other than RecordError; the binary format detects every flip."""
    data = encoded(name)
    rng = np.random.default_rng(3)
    caught = 0
    for _ in range(300):
        corrupt = bytearray(data)
        position = int(rng.integers(len(data)))
        corrupt[position] ^= 1 << int(rng.integers(8))
        try:
            formats()[name].loads(bytes(corrupt))
        except RecordError:
            caught += 1
    if name == "binary":
        assert caught == 300
    else:
        assert caught > 0


def test_every_flip_of_a_binary_record_is_detected() -> None:
    data = encoded("binary")
    for position in range(len(data)):
        corrupt = bytearray(data)
        corrupt[position] ^= 0x10
        with pytest.raises(RecordError):
            formats()["binary"].loads(bytes(corrupt))


# Hostile files.


class Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


@pytest.mark.parametrize("name", FORMATS)
def test_a_pickle_is_refused_and_never_executed(tmp_path: Path, name: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / f"model{EXTENSIONS[name]}"
    path.write_bytes(pickle.dumps({"w": Exploit()}))
    with pytest.raises(RecordError, match=str(path)):
        load(path)
    assert not (tmp_path / "pwned.txt").exists()


def short_id(value: object) -> str | None:
    """Test ids from the expected message, not from kilobytes of hostile bytes."""
    return None if isinstance(value, str) else "data"


def safetensors_bytes(header: dict, data: bytes = b"", length: int | None = None) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


@pytest.mark.parametrize(
    "data",
    [
        safetensors_bytes({}, length=10**15),
        safetensors_bytes({}, length=2**64 - 1),
        safetensors_bytes({"w": {"dtype": "F32", "shape": [10**8, 10**8], "data_offsets": [0, 4]}},
                          b"abcd"),
        safetensors_bytes({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 10**15]}},
                          b"abcd"),
        safetensors_bytes({"w": {"dtype": "F32", "shape": [2**40, 2**40, 2**40],
                                 "data_offsets": [0, 0]}}),
        safetensors_bytes({"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}},
                          b"abcdefgh"),
        safetensors_bytes({"w": {"dtype": "BOOL", "shape": [1], "data_offsets": [0, 1]}}, b"\x02"),
        safetensors_bytes({"__metadata__": {"burnish.narrow": '{"w": "int4"}'},
                           "w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\xff"),
        safetensors_bytes({"__metadata__": {"burnish.narrow": '{"v": "uint2"}'},
                           "w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\x01"),
        safetensors_bytes({"__metadata__": {"burnish.narrow": '{"w": "float32"}'},
                           "w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\x01"),
        safetensors_bytes({"__metadata__": {"burnish.format_version": "1"},
                           "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"abcd"),
        safetensors_bytes({"__metadata__": {"burnish.format_version": "99",
                                            "burnish.structure": "{}"}}),
        safetensors_bytes({"__metadata__": {"burnish.format_version": "1", "burnish.version": "x",
                                            "burnish.precision": "full", "burnish.metadata": "{}",
                                            "burnish.structure": '{"v": null}'}}),
        safetensors_bytes({"__metadata__": {"burnish.format_version": "1", "burnish.version": "x",
                                            "burnish.precision": "full", "burnish.metadata": "{}",
                                            "burnish.structure": "[" * 100_000}}),
        b"",
        b"\x00" * 7,
    ],
    ids=lambda data: f"{len(data)}-bytes",
)
def test_hostile_safetensors_files(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(data)
    with pytest.raises(RecordError, match=f"{path}"):
        load(path)


def mpk(document: object) -> bytes:
    return msgpack.packb(document, use_bin_type=True)


METADATA = {"format_version": 1, "burnish_version": "0.1.0", "precision": "full", "user": {}}


def mpk_leaf(**leaf: object) -> bytes:
    return mpk({"metadata": METADATA, "tensors": {"w": leaf}})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (mpk_leaf(dtype="float32", shape=[10**8, 10**8], bytes=b"abcd"), "needs"),
        (mpk_leaf(dtype="float32", shape=[-1], bytes=b""), "non-size"),
        (mpk_leaf(dtype="float32", shape=[1] * 100, bytes=b"abcd"), "not a list of sizes"),
        (mpk_leaf(dtype="float32", shape="4", bytes=b"abcd"), "not a list of sizes"),
        (mpk_leaf(dtype="float32", shape=[1], bytes="abcd"), "where bytes belong"),
        (mpk_leaf(dtype="complex64", shape=[1], bytes=b"abcdabcd"), "unknown dtype"),
        (mpk_leaf(dtype="bool", shape=[2], bytes=b"\x01\x07"), "0 and 1"),
        (mpk({"metadata": METADATA, "tensors": {"w": 3}}), "neither a tensor"),
        (mpk({"metadata": METADATA, "tensors": [1]}), "root must be a mapping"),
        (mpk({"metadata": METADATA, "tensors": {"a.b": {}}}), "free of '.'"),
        (mpk({"metadata": {**METADATA, "format_version": 2}, "tensors": {}}), "newer"),
        (mpk({"metadata": {**METADATA, "user": 5}, "tensors": {}}), "user"),
        (mpk({"metadata": None, "tensors": {}}), "metadata must be a mapping"),
        (mpk({"tensors": {}}), "metadata must be a mapping"),
        (mpk([1, 2, 3]), "no top-level"),
        (mpk({1: 2}), "truncated or corrupt"),
        (mpk({"metadata": METADATA, "tensors": {}}) + b"\x00", "trailing bytes"),
        (mpk({"metadata": METADATA, "tensors": {"w": msgpack.ExtType(5, b"x")}}), "extension"),
        (b"\x91" * 100_000 + b"\x80", "truncated or corrupt"),
        # A bin header that claims 4 GiB followed by nothing.
        (b"\xc6\xff\xff\xff\xff", "truncated or corrupt"),
    ],
    ids=short_id,
)
def test_hostile_msgpack_files(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "hostile.mpk"
    path.write_bytes(data)
    with pytest.raises(RecordError, match=message):
        load(path)


def json_leaf(**leaf: object) -> bytes:
    return json.dumps({"metadata": METADATA, "tensors": {"w": leaf}}).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (json_leaf(dtype="float32", shape=[10**15], values=[]), "shape"),
        (json_leaf(dtype="float32", shape=[2, 2], values=[[1.0, 2.0], [3.0]]), "shape"),
        (json_leaf(dtype="float32", shape=[2], values=[1.0, "one"]), "not a number"),
        (json_leaf(dtype="float32", shape=[1], values=[[1.0]]), "not a number"),
        (json_leaf(dtype="float32", shape=[1], values=[True]), "not a number"),
        (json_leaf(dtype="float64", shape=[1], values=[10**400]), "too large"),
        (json_leaf(dtype="int8", shape=[1], values=[128]), "not an int8"),
        (json_leaf(dtype="int64", shape=[1], values=[1.5]), "not an int64"),
        (json_leaf(dtype="bool", shape=[1], values=[2]), "true or false"),
        (json_leaf(dtype="float32", shape=[], values=None), "not a number"),
        (b"[" * 100_000, "nests too deeply"),
        (b"\xff\xfe{}", "UTF-8"),
        (b'{"metadata": 1', "truncated or corrupt"),
        (b"NaN", "no top-level"),
    ],
    ids=short_id,
)
def test_hostile_json_files(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "hostile.json"
    path.write_bytes(data)
    with pytest.raises(RecordError, match=message):
        load(path)


def binary_bytes(header: object, data: bytes = b"", length: int | None = None) -> bytes:
    """A binary record with a valid checksum: what an attacker, not a bad disk, would write."""
    packed = msgpack.packb(header, use_bin_type=True)
    size = len(packed) if length is None else length
    body = struct.pack("<8sIQ", MAGIC, 1, size) + packed
    body += bytes(-len(body) % 8) + data
    return body + hashlib.blake2b(body, digest_size=32).digest()


def binary_leaf(**leaf: object) -> dict:
    return {"metadata": METADATA, "tensors": {"w": leaf}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (binary_bytes(binary_leaf(dtype="float32", shape=[1], offset=0), b"abcd", 10**15),
         "beyond the file"),
        (binary_bytes(binary_leaf(dtype="float32", shape=[10**8, 10**8], offset=0), b"abcd"),
         "outside"),
        (binary_bytes(binary_leaf(dtype="float32", shape=[1], offset=10**15), b"abcd"), "outside"),
        (binary_bytes(binary_leaf(dtype="float32", shape=[1], offset=-4), b"abcd"), "outside"),
        (binary_bytes(binary_leaf(dtype="float32", shape=[1], offset="0"), b"abcd"), "outside"),
        (binary_bytes(binary_leaf(dtype="complex64", shape=[1], offset=0), b"abcdabcd"),
         "unknown dtype"),
        (binary_bytes({"metadata": METADATA, "tensors": {
            "a": {"dtype": "float32", "shape": [2], "offset": 0},
            "b": {"dtype": "float32", "shape": [1], "offset": 4}}}, bytes(8)),
         r"tensor 'b' \(bytes 4 to 8\) overlaps tensor 'a' \(bytes 0 to 8\)"),
        (binary_bytes({"metadata": METADATA, "tensors": {"many": [
            {"dtype": "uint8", "shape": [64], "offset": 0}] * 3}}, bytes(64)),
         "tensor 'many.1' .* overlaps tensor 'many.0'"),
        (binary_bytes({"metadata": METADATA}), "no 'tensors'"),
        (binary_bytes([[[[]]]]), "no 'tensors'"),
        (binary_bytes(binary_leaf(dtype="float32", shape=[1], offset=0), b"abcd")[:-1] + b"\x00",
         "checksum"),
        (MAGIC + struct.pack("<IQ", 2, 0) + bytes(32), "checksum"),
        (b"\x80\x04" + bytes(60), "not a burnish binary record"),
        (MAGIC, "too short"),
    ],
    ids=short_id,
)
def test_hostile_binary_files(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "hostile.bin"
    path.write_bytes(data)
    with pytest.raises(RecordError, match=message):
        load(path)


def test_a_newer_binary_layout_is_refused_by_name(tmp_path: Path) -> None:
    body = struct.pack("<8sIQ", MAGIC, 2, 0)
    path = tmp_path / "new.bin"
    path.write_bytes(body + hashlib.blake2b(body, digest_size=32).digest())
    with pytest.raises(RecordError, match="layout version 2"):
        load(path)


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "absent.safetensors")
