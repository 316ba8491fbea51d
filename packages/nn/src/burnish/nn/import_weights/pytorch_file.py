"""Reading PyTorch ``.pt``/``.pth`` files (zip and legacy) into tensors, without PyTorch."""

from __future__ import annotations

import io
import os
import re
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from burnish.errors import RecordError
from burnish.nn.import_weights.torch_pickle import Rebuilt, Storage, StorageType, unpickle
from burnish.record.tree import join
from burnish.tensor_data import TensorData

#: The first pickle of a legacy (non-zip) file, and the protocol version that follows it.
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001

_STORAGE_KEY = re.compile(r"[A-Za-z0-9_]+")
#: The first bytes of a zip archive (a local file header), as torch.save writes one.
ZIP_MAGIC = b"PK\x03\x04"

#: All tensors of a file together may take this many times the file's size once copied out:
#: room for a few tensors sharing one storage (tied weights), never a broadcast's gigabytes.
MAX_EXPANSION = 4


def read_pytorch(path: str | os.PathLike[str], top_level_key: str | None = None
                 ) -> dict[str, TensorData]:
    """Every tensor a file written by ``torch.save`` holds, by dotted path (``"0.weight"``,
    ``"encoder.layers.1.bias"``), in the file's order.

    Reads the zip format (``torch.save``'s default) and the legacy one
    (``_use_new_zipfile_serialization=False``). Nested dicts, lists and tuples give dotted paths;
    entries that are not tensors (an epoch count, a string) are skipped. ``top_level_key`` picks
    one entry of the saved dict first (``"state_dict"`` of a training checkpoint).

    Nothing in the file is executed: its pickle may only name PyTorch's tensor-rebuilding
    functions, its storage types and ``collections.OrderedDict``; any other global raises
    RecordError naming it, as do truncated or inconsistent files. Work and memory are bounded by
    the file's size: storages may not claim more bytes than the file holds, a tensor may not hold
    more values than its storage (a broadcast view is refused), all tensors together may not
    take more than ``MAX_EXPANSION`` times the file's size, and flattening may not visit more
    entries than the file has bytes (shared containers nested in each other would otherwise
    make it exponential). Two entries whose dotted paths collide are refused too.
    """
    source = Path(path)
    data = source.read_bytes()
    try:
        # A zip starts with a local file header; is_zipfile looks for the directory at the end,
        # which a truncated file lacks, so check both to report truncation as such.
        if data.startswith(ZIP_MAGIC) or zipfile.is_zipfile(io.BytesIO(data)):
            tree = _read_zip(data)
        else:
            tree = _read_legacy(data)
        if top_level_key is not None:
            if not isinstance(tree, dict) or top_level_key not in tree:
                keys = ", ".join(map(_key_text, tree)) if isinstance(tree, dict) else "none"
                raise RecordError(f"no entry {top_level_key!r} at the top level; it has {keys}")
            tree = tree[top_level_key]
        flattener = _Flattener(len(data))
        try:
            flattener.visit(tree, "")
        except RecursionError:
            raise RecordError("the saved object nests too deeply to be a state dict") from None
        return flattener.flat
    except RecordError as error:
        raise RecordError(f"cannot load {source} as a PyTorch file: {error}") from error


def _read_zip(data: bytes) -> Any:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, EOFError, ValueError) as error:
        raise RecordError(f"truncated or corrupt zip archive ({len(data)} bytes): {error}"
                          ) from None
    pickles = [name for name in archive.namelist()
               if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(pickles) != 1:
        raise RecordError(f"a PyTorch zip holds one <name>/data.pkl, found {len(pickles)}")
    prefix = pickles[0][: -len("data.pkl")]
    names = set(archive.namelist())

    def read(name: str) -> bytes:
        # torch.save stores every entry uncompressed; a compressed one could be a zip bomb.
        if archive.getinfo(name).compress_type != zipfile.ZIP_STORED:
            raise RecordError(f"entry {name!r} is compressed; PyTorch writes them stored")
        try:
            return archive.read(name)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
            raise RecordError(f"zip entry {name!r} is truncated or corrupt: {error}") from None

    order = "little"
    if prefix + "byteorder" in names:
        order = read(prefix + "byteorder").decode("ascii", "replace")
        if order not in ("little", "big"):
            raise RecordError(f"unknown byte order {order!r}")

    loaded = 0

    def load_storage(kind: StorageType, key: str, numel: int) -> Storage:
        nonlocal loaded
        name = f"{prefix}data/{key}"
        if not _STORAGE_KEY.fullmatch(key) or name not in names:
            raise RecordError(f"the pickle refers to storage {key!r}, which the archive lacks")
        expected = numel * kind.dtype.itemsize
        size = archive.getinfo(name).file_size
        if size != expected:
            raise RecordError(f"storage {key!r} ({kind.name}, {numel} values) needs {expected} "
                              f"bytes, the archive holds {size}")
        # Stored entries cannot hold more than the file; entries that overlap could.
        loaded += expected
        if loaded > len(data):
            raise RecordError(f"storage {key!r} brings the storages to {loaded} bytes, more "
                              f"than the {len(data)}-byte file holds (overlapping entries)")
        values = _values(read(name), kind, order)
        return Storage(kind.dtype, numel, [values])

    return unpickle(read(pickles[0]), load_storage)


def _read_legacy(data: bytes) -> Any:
    stream = io.BytesIO(data)

    def no_storage(kind: StorageType, key: str, numel: int) -> Storage:
        raise RecordError("a storage appears before the file's main pickle")

    if unpickle(stream, no_storage) != LEGACY_MAGIC:
        raise RecordError("neither a zip archive nor a legacy PyTorch file (no magic number)")
    version = unpickle(stream, no_storage)
    if version != LEGACY_PROTOCOL:
        raise RecordError(f"legacy protocol version {version!r}, expected {LEGACY_PROTOCOL}")
    info = unpickle(stream, no_storage)
    little = info.get("little_endian", True) if isinstance(info, dict) else True
    storages: dict[str, tuple[StorageType, Storage]] = {}

    def load_storage(kind: StorageType, key: str, numel: int) -> Storage:
        if numel * kind.dtype.itemsize > len(data):
            raise RecordError(f"storage {key!r} claims {numel} values, more than the file holds")
        storage = Storage(kind.dtype, numel, [])
        storages[key] = (kind, storage)
        return storage

    tree = unpickle(stream, load_storage)
    keys = unpickle(stream, no_storage)
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise RecordError("the list of storage keys is malformed")
    # The values follow in the listed order, each as an int64 count and the raw bytes.
    order = "little" if little else "big"
    for key in keys:
        if key not in storages:
            raise RecordError(f"the file lists storage {key!r}, which no tensor uses")
        kind, storage = storages[key]
        header = stream.read(8)
        if len(header) != 8:
            raise RecordError(f"the file ends before storage {key!r}")
        (numel,) = struct.unpack("<q" if little else ">q", header)
        if numel != storage.numel:
            raise RecordError(f"storage {key!r} holds {numel} values, the pickle says "
                              f"{storage.numel}")
        raw = stream.read(numel * kind.dtype.itemsize)
        if len(raw) != numel * kind.dtype.itemsize:
            raise RecordError(f"the file ends inside storage {key!r}")
        storage.filled.append(_values(raw, kind, order))
    return tree


def _values(raw: bytes, kind: StorageType, order: str) -> np.ndarray:
    dtype = kind.dtype.numpy.newbyteorder("<" if order == "little" else ">")
    values = np.frombuffer(raw, dtype=dtype).astype(kind.dtype.numpy)
    if kind.dtype.is_bool and values.view(np.uint8).max(initial=0) > 1:
        raise RecordError(f"a {kind.name} holds bytes other than 0 and 1")
    return values


class _Flattener:
    """Every tensor of a saved object by dotted path, within budgets set by the file's size."""

    def __init__(self, file_size: int):
        self.flat: dict[str, TensorData] = {}
        self.visits_left = max(file_size, 1)
        self.bytes_left = MAX_EXPANSION * file_size

    def visit(self, node: Any, path: str) -> None:
        self.visits_left -= 1
        if self.visits_left < 0:
            raise RecordError(
                f"entry {path!r}: the saved object refers to its containers so many times over "
                f"that flattening it visits more entries than the file has bytes (shared "
                f"references nested in each other)")
        if isinstance(node, Rebuilt):
            self.leaf(node, path)
        elif isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str | int):
                    self.visit(value, join(path, _key_text(key)))
        elif isinstance(node, list | tuple):
            for i, value in enumerate(node):
                self.visit(value, join(path, str(i)))

    def leaf(self, tensor: Rebuilt, path: str) -> None:
        if path in self.flat:
            raise RecordError(f"two entries have the dotted path {path!r}")
        tensor.check(path)
        self.bytes_left -= tensor.numel * tensor.storage.dtype.itemsize
        if self.bytes_left < 0:
            raise RecordError(
                f"entry {path!r}: the tensors would take more than {MAX_EXPANSION} times the "
                f"file's size once copied out (views sharing one storage many times over)")
        self.flat[path] = tensor.into_data(path)


def _key_text(key: Any) -> str:
    """A dict key as a path level; RecordError for an int too long to be a real key."""
    try:
        return str(key)
    except ValueError:
        raise RecordError("a dict key is an integer with thousands of digits") from None
