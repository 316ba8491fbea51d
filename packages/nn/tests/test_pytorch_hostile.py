"""Hostile PyTorch files: every one fails with RecordError naming what is wrong, in time and
memory bounded by the file's size."""

from __future__ import annotations

import io
import pickle
import shutil
import struct
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from burnish.errors import RecordError
from burnish.nn.import_weights import read_pytorch
from burnish.nn.import_weights.pytorch_file import LEGACY_MAGIC, LEGACY_PROTOCOL


def zip_file(path, pickled: bytes, storages: dict[str, bytes] | None = None):
    """A zip laid out as torch.save writes one (entries stored, not compressed)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickled)
        for key, data in (storages or {}).items():
            archive.writestr(f"archive/data/{key}", data)
    return path


def legacy_file(path, pickled: bytes):
    header = b"".join(pickle.dumps(v, protocol=2)
                      for v in (LEGACY_MAGIC, LEGACY_PROTOCOL, {"little_endian": True}))
    path.write_bytes(header + pickled + pickle.dumps([], protocol=2))
    return path


def tensor_opcodes(offset: int, size: tuple, stride: tuple, numel: int) -> bytes:
    """The pickle opcodes that push a tensor as torch.save writes it: a view of float storage
    "0" (``numel`` values)."""

    def ints(values):
        return b"(" + b"".join(b"I%d\n" % v for v in values) + b"t"

    storage = b"(Vstorage\nctorch\nFloatStorage\nV0\nVcpu\nI%d\ntQ" % numel
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage + b"I%d\n" % offset
            + ints(size) + ints(stride) + b"I00\nccollections\nOrderedDict\n)Rt")


def tensor_pickle(offset: int, size: tuple, stride: tuple, numel: int) -> bytes:
    """``{"w": tensor}`` (see ``tensor_opcodes``)."""
    return b"}Vw\n" + tensor_opcodes(offset, size, stride, numel) + b"Rs."


FIXTURES = Path(__file__).parents[3] / "tests" / "fixtures" / "pytorch"


def peak_bytes(function):
    """The peak of memory allocated (NumPy's buffers included) while ``function`` runs."""
    tracemalloc.start()
    try:
        function()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_a_broadcast_view_over_a_tiny_storage_is_refused_without_materialising(tmp_path):
    # 4000 x 4000 float32 would be 64 MB out of one stored value.
    pickled = tensor_pickle(0, (4000, 4000), (0, 0), 1)
    path = zip_file(tmp_path / "w.pt", pickled, {"0": np.ones(1, "<f4").tobytes()})

    def read():
        with pytest.raises(RecordError, match=r"entry 'w'.*repeats values.*contiguous"):
            read_pytorch(path)

    assert peak_bytes(read) < 1_000_000


def test_views_sharing_one_storage_many_times_over_are_bounded(tmp_path):
    # Each view is a valid copy of the whole storage; 200 of them would be 200 times the file.
    values = np.arange(4096, dtype="<f4")
    one = tensor_opcodes(0, (4096,), (1,), 4096) + b"R"
    pickled = b"(" + one * 200 + b"l."
    path = zip_file(tmp_path / "w.pt", pickled, {"0": values.tobytes()})
    with pytest.raises(RecordError, match=r"entry '\d+'.*times the file's size"):
        read_pytorch(path)


def test_shared_references_nested_deep_are_refused_in_bounded_time(tmp_path):
    # Each list holds the previous one twice: 2**40 paths from a pickle of a few hundred bytes.
    nested: list = [0]
    for _ in range(40):
        nested = [nested, nested]
    path = zip_file(tmp_path / "w.pt", pickle.dumps(nested, protocol=2))
    start = time.perf_counter()
    with pytest.raises(RecordError, match="visits more entries than the file has bytes"):
        read_pytorch(path)
    assert time.perf_counter() - start < 2


def test_colliding_dotted_paths_are_refused(tmp_path):
    values = np.arange(6, dtype="<f4").tobytes()
    tensor = tensor_opcodes(0, (6,), (1,), 6) + b"R"
    pickled = b"}(Va.b\n" + tensor + b"Va\n}Vb\n" + tensor + b"su."
    path = zip_file(tmp_path / "w.pt", pickled, {"0": values})
    with pytest.raises(RecordError, match="two entries have the dotted path 'a.b'"):
        read_pytorch(path)


@pytest.mark.parametrize("name", ["cnn.pt", "checkpoint.pt"])
def test_a_truncated_zip_is_reported_as_one(tmp_path, name):
    data = (FIXTURES / name).read_bytes()
    for length in (len(data) // 2, len(data) - 10, 30):
        path = tmp_path / name
        path.write_bytes(data[:length])
        with pytest.raises(RecordError, match="truncated or corrupt zip"):
            read_pytorch(path)


def test_a_corrupt_zip_entry_names_the_entry(tmp_path):
    path = shutil.copy(FIXTURES / "cnn.pt", tmp_path / "cnn.pt")
    data = bytearray(Path(path).read_bytes())
    with zipfile.ZipFile(path) as archive:
        entry = next(info for info in archive.infolist() if info.filename.endswith("data/0"))
    # The local header is 30 bytes, then the name and the extra field (torch pads with one).
    name_length, extra_length = struct.unpack_from("<HH", data, entry.header_offset + 26)
    data[entry.header_offset + 30 + name_length + extra_length] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    with pytest.raises(RecordError, match=r"zip entry '[^']*data/0' is truncated or corrupt"):
        read_pytorch(path)




@pytest.mark.parametrize("claimed", [2**30, 2**62])
def test_an_inflated_bytes_length_is_refused_without_allocating_it(tmp_path, claimed):
    # BINBYTES8 claiming a gigabyte (or more than any machine has) in a few bytes of pickle.
    pickled = b"\x80\x02}Vw\n\x8e" + struct.pack("<Q", claimed) + b"abc"
    path = zip_file(tmp_path / "w.pt", pickled)

    def read():
        with pytest.raises(RecordError, match="not a valid PyTorch pickle"):
            read_pytorch(path)

    assert peak_bytes(read) < 1_000_000

# Fuzzing: mutations of real files torch.save wrote (tests/fixtures/pytorch, made by
# make_fixtures.py there), with a fixed seed so a failure reproduces.


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    """One random damage: a truncation, flipped bytes, or a length field inflated (4 or 8 bytes
    overwritten with a large little-endian number)."""
    out = bytearray(data)
    kind = rng.integers(3)
    if kind == 0:
        return bytes(out[: rng.integers(len(out))])
    if kind == 1:
        for _ in range(rng.integers(1, 4)):
            out[rng.integers(len(out))] = rng.integers(256)
        return bytes(out)
    width = int(rng.choice([4, 8]))
    position = int(rng.integers(len(out) - width))
    value = int(rng.choice([2**31 - 1, 2**32 - 1, 2**40, 2**63 - 1, 10**12]))
    out[position : position + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
    return bytes(out)


def repacked(path: Path, rng: np.random.Generator) -> bytes:
    """The zip at ``path`` with its pickle mutated and the archive rebuilt around it: the
    entries' checksums hold again, so the damage reaches the unpickler."""
    with zipfile.ZipFile(path) as archive:
        entries = {info.filename: archive.read(info) for info in archive.infolist()}
    (pickle_name,) = [name for name in entries if name.endswith("/data.pkl")]
    entries[pickle_name] = mutate(entries[pickle_name], rng)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["cnn.pt", "cnn_legacy.pt", "checkpoint.pt",
                                  "checkpoint_legacy.pt"])
def test_mutated_pytorch_files_load_or_raise_record_error_in_bounded_memory(tmp_path, name):
    source = FIXTURES / name
    original = source.read_bytes()
    rng = np.random.default_rng(21)
    path = tmp_path / name
    refused = 0
    tracemalloc.start()
    try:
        for _ in range(80):
            zipped = original.startswith(b"PK")
            data = repacked(source, rng) if zipped and rng.integers(2) else mutate(original, rng)
            path.write_bytes(data)
            tracemalloc.reset_peak()
            try:
                read_pytorch(path)
            except RecordError:
                refused += 1
            peak = tracemalloc.get_traced_memory()[1]
            assert peak < 16 * len(original) + 2_000_000, f"{peak} bytes to read {len(data)}"
    finally:
        tracemalloc.stop()
    assert refused > 20
