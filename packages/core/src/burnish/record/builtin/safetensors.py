"""The safetensors format (the default): a file PyTorch, JAX and Hugging Face tools read as is.

Tensors are stored under their dotted paths (``encoder.layers.0.weight``) with safetensors'
own dtype codes (``F32``, ``BF16``...). burnish's metadata lives in the header's ``__metadata__``
(strings only): ``burnish.format_version``, ``burnish.version``, ``burnish.precision``,
``burnish.structure`` (the tree's skeleton as JSON: key order, lists, empty dicts) and
``burnish.metadata`` (the user's metadata as JSON) and, where there are tensors of dtypes narrower
than a byte (stored one value per byte as ``U8``: safetensors has no code for them),
``burnish.narrow``. A file without them (written elsewhere) loads
as nested dicts split at the dots, its ``__metadata__`` strings becoming the user metadata.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import safetensors
import safetensors.numpy

from burnish.dtype import SUB_BYTE_DTYPES
from burnish.errors import RecordError
from burnish.record.format import RecordFormat
from burnish.record.record import RecordMetadata
from burnish.record.tensor_bytes import decode_tensor
from burnish.record.tree import flatten, skeleton, unflatten, unflatten_dotted
from burnish.tensor_data import TensorData

#: safetensors dtype codes and the burnish dtypes they hold.
DTYPE_NAMES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
    "U64": "uint64", "U32": "uint32", "U16": "uint16",
    "F8_E4M3": "float8_e4m3fn", "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2": "float8_e5m2", "F8_E5M2FNUZ": "float8_e5m2fnuz", "F8_E8M0": "float8_e8m0fnu",
}
#: dtypes narrower than a byte, which safetensors has no one-value-per-byte code for: stored as
#: ``U8`` holding each value's bits (as ml_dtypes holds them in memory), their names kept in the
#: header's ``burnish.narrow`` (path -> dtype name).
NARROW = {dtype.name: dtype for dtype in SUB_BYTE_DTYPES}

_PREFIX = "burnish."
# The safetensors library refuses larger headers too; checked here before json.loads sees it.
_MAX_HEADER = 100_000_000


class SafetensorsFormat(RecordFormat):
    name = "safetensors"
    extension = ".safetensors"
    description = "safetensors: the default; readable by PyTorch, JAX, Hugging Face (dotted keys)"

    def dumps(self, tree: dict[str, Any], metadata: RecordMetadata) -> bytes:
        flat = flatten(tree)
        if "__metadata__" in flat:
            raise RecordError("'__metadata__' is reserved by safetensors and cannot name a tensor")
        header = {
            _PREFIX + "format_version": str(metadata.format_version),
            _PREFIX + "version": str(metadata.burnish_version),
            _PREFIX + "precision": str(metadata.precision),
            _PREFIX + "structure": json.dumps(skeleton(tree), separators=(",", ":")),
            _PREFIX + "metadata": json.dumps(metadata.user, separators=(",", ":")),
        }
        narrow = {path: t.dtype.name for path, t in flat.items() if t.dtype.name in NARROW}
        if narrow:
            header[_PREFIX + "narrow"] = json.dumps(narrow, separators=(",", ":"))
        # safetensors.numpy names ml_dtypes' bfloat16 "BF16" in the header, as torch does.
        # (np.require, not ascontiguousarray, which turns 0-d arrays into 1-d ones.)
        arrays = {path: np.require(t.to_numpy(), requirements="C") for path, t in flat.items()}
        for path in narrow:
            arrays[path] = arrays[path].view(np.uint8)
        return safetensors.numpy.save(arrays, metadata=header)

    def loads(self, data: bytes) -> tuple[dict[str, Any], RecordMetadata]:
        try:
            # The library checks the header and every offset against the buffer's real size.
            entries = safetensors.deserialize(data)
        except safetensors.SafetensorError as error:
            raise RecordError(f"not a valid safetensors file: {error}") from None
        flat = {}
        for path, entry in entries:
            code = entry["dtype"]
            if code not in DTYPE_NAMES:
                raise RecordError(
                    f"tensor {path!r} has safetensors dtype {code}, which burnish does not support"
                )
            flat[path] = decode_tensor(DTYPE_NAMES[code], entry["shape"], entry["data"], path)
        strings = _header_metadata(data)
        if _PREFIX + "narrow" in strings:
            for path, name in _json(strings, "narrow").items():
                flat[path] = _narrow(flat, path, name)
        if _PREFIX + "format_version" not in strings:
            return unflatten_dotted(flat), RecordMetadata(None, None, None, dict(strings))
        return unflatten(_json(strings, "structure"), flat), _metadata(strings)


def _narrow(flat: dict[str, TensorData], path: Any, name: Any) -> TensorData:
    """Tensor ``path``, stored one value per byte, as the sub-byte dtype the header names."""
    if name not in NARROW or path not in flat:
        raise RecordError(f"the header names tensor {path!r} as {name!r}: no such tensor of "
                          "a dtype narrower than a byte")
    stored, dtype = flat[path], NARROW[name]
    codes = stored.to_numpy()
    if stored.dtype.name != "uint8" or codes.max(initial=0) >= 2**dtype.bits:
        raise RecordError(f"tensor {path!r} is {name} but holds {stored.dtype} values that are "
                          f"not {dtype.bits}-bit codes")
    return TensorData(codes.view(dtype.numpy), dtype)


def _header_metadata(data: bytes) -> dict[str, str]:
    (length,) = struct.unpack_from("<Q", data)
    if length > min(_MAX_HEADER, len(data) - 8):
        raise RecordError(f"safetensors header claims {length} bytes")
    try:
        header = json.loads(bytes(data[8 : 8 + length]))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RecordError(f"safetensors header is not valid JSON: {error}") from None
    strings = (header.get("__metadata__") or {}) if isinstance(header, dict) else None
    if not isinstance(strings, dict) or not all(isinstance(v, str) for v in strings.values()):
        raise RecordError("safetensors __metadata__ must map strings to strings")
    return strings


def _metadata(strings: dict[str, str]) -> RecordMetadata:
    version = strings[_PREFIX + "format_version"]
    if not version.isdecimal() or len(version) > 9:
        raise RecordError(f"{_PREFIX}format_version is {version!r}, not a version number")
    return RecordMetadata.from_dict({
        "format_version": int(version),
        "burnish_version": strings.get(_PREFIX + "version"),
        "precision": strings.get(_PREFIX + "precision"),
        "user": _json(strings, "metadata"),
    })


def _json(strings: dict[str, str], key: str) -> Any:
    text = strings.get(_PREFIX + key)
    if text is None:
        raise RecordError(f"safetensors __metadata__ lacks {_PREFIX}{key}")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise RecordError(f"{_PREFIX}{key} in __metadata__ is not valid JSON: {error}") from None
