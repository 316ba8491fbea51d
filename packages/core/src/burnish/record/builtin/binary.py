"""The compact binary format: raw tensor bytes behind a small header, with a checksum.

Layout (integers little-endian)::

    offset     size  field
    0          8     magic b"\\x89BURNISH" (the high first byte marks it as binary, as PNG's does)
    8          4     u32 layout version, 1
    12         8     u64 header length H
    20         H     header: MessagePack {"metadata": {...}, "tensors": tree}; each tensor is
                     {"dtype": "float32", "shape": [2, 3], "offset": int}, offset into the data;
                     no two tensors' bytes overlap
    20+H       P     zero bytes up to a multiple of 8: the data section starts aligned
    D          N     tensor bytes, little-endian, C order, each starting at a multiple of 8
    end-32     32    BLAKE2b-256 digest of every byte before it

The digest is checked before anything else is parsed, so truncation, a flipped bit anywhere and a
half-copied file are all reported as such.
"""

from __future__ import annotations

import bisect
import hashlib
import struct
from typing import Any

import msgpack

from burnish.errors import RecordError
from burnish.record.builtin.named_msgpack import unpack
from burnish.record.format import RecordFormat
from burnish.record.record import RecordMetadata
from burnish.record.tensor_bytes import check_dtype, check_shape, decode_tensor, nbytes
from burnish.record.tree import decode_nested, encode_nested
from burnish.tensor_data import TensorData

MAGIC = b"\x89BURNISH"
LAYOUT_VERSION = 1
_PREAMBLE = struct.Struct("<8sIQ")
_DIGEST_SIZE = 32
_ALIGN = 8


class BinaryFormat(RecordFormat):
    name = "binary"
    extension = ".bin"
    description = "compact binary: raw little-endian bytes, msgpack header, BLAKE2b checksum"

    def dumps(self, tree: dict[str, Any], metadata: RecordMetadata) -> bytes:
        chunks: list[bytes] = []
        size = 0

        def place(data: TensorData) -> dict[str, Any]:
            nonlocal size
            raw = data.as_bytes()
            entry = {"dtype": data.dtype.name, "shape": list(data.shape), "offset": size}
            chunks.append(raw + bytes(_padding(len(raw))))
            size += len(raw) + _padding(len(raw))
            return entry

        header = {"metadata": metadata.to_dict(), "tensors": encode_nested(tree, place)}
        try:
            packed = msgpack.packb(header, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as error:
            raise RecordError(f"cannot encode the record's header: {error}") from None
        start = _PREAMBLE.pack(MAGIC, LAYOUT_VERSION, len(packed)) + packed
        body = b"".join([start, bytes(_padding(len(start))), *chunks])
        return body + hashlib.blake2b(body, digest_size=_DIGEST_SIZE).digest()

    def loads(self, data: bytes) -> tuple[dict[str, Any], RecordMetadata]:
        view = memoryview(data)
        if len(view) < _PREAMBLE.size + _DIGEST_SIZE:
            raise RecordError(f"binary record is truncated: {len(view)} bytes is too short")
        magic, version, header_length = _PREAMBLE.unpack_from(view)
        if magic != MAGIC:
            raise RecordError(f"not a burnish binary record (starts {bytes(magic)!r})")
        body, digest = view[:-_DIGEST_SIZE], view[-_DIGEST_SIZE:]
        if hashlib.blake2b(body, digest_size=_DIGEST_SIZE).digest() != digest:
            raise RecordError("binary record is corrupt or truncated: its checksum does not match")
        if version != LAYOUT_VERSION:
            raise RecordError(
                f"binary record layout version {version} is not one this burnish reads "
                f"({LAYOUT_VERSION}); upgrade burnish-core"
            )
        end = _PREAMBLE.size + header_length
        if end > len(body):
            raise RecordError(f"binary record header claims {header_length} bytes, beyond the file")
        header = unpack(view[_PREAMBLE.size : end], "binary record header")
        if not isinstance(header, dict) or "tensors" not in header:
            raise RecordError("binary record header has no 'tensors' map")
        metadata = RecordMetadata.from_dict(header.get("metadata"))
        tensors = body[end + _padding(end) :]
        # Every tensor's byte range, sorted by start: ranges must not overlap, or a header of a
        # few bytes per tensor could make each one a copy of the whole data section.
        placed: list[tuple[int, int, str]] = []

        def read(leaf: dict, path: str) -> TensorData:
            dtype = check_dtype(leaf["dtype"], path)
            shape = check_shape(leaf.get("shape"), path)
            offset = leaf.get("offset")
            length = nbytes(dtype, shape)
            if type(offset) is not int or offset < 0 or offset + length > len(tensors):
                raise RecordError(
                    f"tensor {path!r} claims {length} bytes at offset {offset!r}, "
                    f"outside the {len(tensors)}-byte data section"
                )
            if length:
                _claim(placed, offset, length, path)
            return decode_tensor(dtype.name, list(shape), tensors[offset : offset + length], path)

        return decode_nested(header["tensors"], read), metadata


def _claim(placed: list[tuple[int, int, str]], offset: int, length: int, path: str) -> None:
    """Add ``path``'s byte range to ``placed`` (sorted by start); RecordError naming both
    tensors when it overlaps one already placed."""
    index = bisect.bisect(placed, (offset,))
    for neighbour in placed[max(index - 1, 0) : index + 1]:
        start, size, other = neighbour
        if start < offset + length and offset < start + size:
            raise RecordError(
                f"tensor {path!r} (bytes {offset} to {offset + length}) overlaps tensor "
                f"{other!r} (bytes {start} to {start + size}) in the data section"
            )
    placed.insert(index, (offset, length, path))


def _padding(size: int) -> int:
    return -size % _ALIGN
