"""Named MessagePack (Burn's NamedMpk): the record's nesting as MessagePack maps, compact and fast.

The file is one map: ``{"metadata": {...}, "tensors": tree}``. The tree keeps the record's dicts
and lists; each tensor is a map ``{"dtype": "float32", "shape": [2, 3], "bytes": <bin>}`` whose
bytes are little-endian, C order. ``metadata`` holds ``format_version``, ``burnish_version``,
``precision`` and ``user``.
"""

from __future__ import annotations

from typing import Any

import msgpack

from burnish.errors import RecordError
from burnish.record.format import RecordFormat
from burnish.record.record import RecordMetadata
from burnish.record.tensor_bytes import decode_tensor, encode_tensor
from burnish.record.tree import decode_nested, encode_nested


class NamedMsgpackFormat(RecordFormat):
    name = "msgpack"
    extension = ".mpk"
    description = "named MessagePack (Burn's NamedMpk): nested maps, raw tensor bytes"

    def dumps(self, tree: dict[str, Any], metadata: RecordMetadata) -> bytes:
        document = {"metadata": metadata.to_dict(), "tensors": encode_nested(tree, _encode)}
        try:
            return msgpack.packb(document, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as error:
            raise RecordError(f"cannot encode the record as MessagePack: {error}") from None

    def loads(self, data: bytes) -> tuple[dict[str, Any], RecordMetadata]:
        document = unpack(data, "MessagePack record")
        if not isinstance(document, dict) or "tensors" not in document:
            raise RecordError("not a named MessagePack record (no top-level 'tensors' map)")
        metadata = RecordMetadata.from_dict(document.get("metadata"))
        return decode_nested(document["tensors"], _decode), metadata


def unpack(data: bytes | memoryview, what: str) -> Any:
    """One MessagePack value filling all of ``data``; RecordError when it is not that.

    Lengths a hostile file claims cannot exceed the buffer: msgpack bounds every string, bin,
    array and map by the input's size. Extension types are refused, so nothing but plain data
    comes out.
    """
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, ext_hook=_refuse_ext)
    except msgpack.ExtraData:
        raise RecordError(f"{what} has trailing bytes after its end") from None
    except (ValueError, TypeError, RecordError) as error:
        # msgpack reports truncation, bad UTF-8, nesting past its stack and bad map keys as
        # ValueError (or subclasses); the message is kept, the type is ours.
        reason = str(error) or type(error).__name__
        raise RecordError(f"{what} is truncated or corrupt: {reason}") from None


def _refuse_ext(code: int, data: bytes) -> Any:
    raise RecordError(f"unexpected MessagePack extension type {code}")


def _encode(data: Any) -> dict[str, Any]:
    dtype, shape, raw = encode_tensor(data)
    return {"dtype": dtype, "shape": shape, "bytes": raw}


def _decode(leaf: dict, path: str) -> Any:
    return decode_tensor(leaf["dtype"], leaf.get("shape"), leaf.get("bytes"), path)
