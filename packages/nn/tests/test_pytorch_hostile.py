"""Hostile PyTorch files: every one fails with RecordError naming what is wrong, in time and
memory bounded by the file's size."""

from __future__ import annotations

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

