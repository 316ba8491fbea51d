"""Pretty JSON: a record a person can read, diff and edit; exact in every dtype.

The file is ``{"metadata": {...}, "tensors": tree}``, indented by two spaces. Each tensor is
``{"dtype": "float32", "shape": [2, 2], "values": [[1.0, 2.0], [3.0, "nan"]]}``: nested lists of
the values (a bare value for a 0-d tensor), innermost lists on one line. Floats are written as the
shortest decimal of their exact float64 value, so float32, float16 and bfloat16 read back bit for
bit; JSON has no NaN or infinity, so those are the strings ``"nan"``, ``"inf"`` and ``"-inf"``
(a NaN's sign and payload bits are not kept). Ints are exact at any width; bools are true/false.
"""

from __future__ import annotations

import json
import math
from typing import Any

import ml_dtypes
import numpy as np

from burnish.errors import RecordError
from burnish.record.format import RecordFormat
from burnish.record.record import RecordMetadata
from burnish.record.tensor_bytes import check_dtype, check_shape
from burnish.record.tree import decode_nested, encode_nested
from burnish.tensor_data import TensorData

_SPECIAL_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class PrettyJsonFormat(RecordFormat):
    name = "json"
    extension = ".json"
    description = "pretty JSON: indented, human-readable, exact values"

    def dumps(self, tree: dict[str, Any], metadata: RecordMetadata) -> bytes:
        document = {"metadata": metadata.to_dict(), "tensors": encode_nested(tree, _encode)}
        return (_pretty(document, "") + "\n").encode("utf-8")

    def loads(self, data: bytes) -> tuple[dict[str, Any], RecordMetadata]:
        try:
            document = json.loads(bytes(data).decode("utf-8"))
        except UnicodeDecodeError as error:
            raise RecordError(f"JSON record is not valid UTF-8: {error}") from None
        except json.JSONDecodeError as error:
            raise RecordError(f"JSON record is truncated or corrupt: {error}") from None
        except RecursionError:
            raise RecordError("JSON record nests too deeply to be real") from None
        if not isinstance(document, dict) or "tensors" not in document:
            raise RecordError("not a JSON record (no top-level 'tensors' object)")
        metadata = RecordMetadata.from_dict(document.get("metadata"))
        return decode_nested(document["tensors"], _decode), metadata


def _encode(data: TensorData) -> dict[str, Any]:
    array = data.to_numpy()
    if data.dtype.is_float:
        # float64 holds every float32/float16/bfloat16/float8 value exactly, and Python writes a
        # float64 as the shortest decimal that reads back to the same bits.
        array = array.astype(np.float64)
        values = array.tolist()
        if not np.isfinite(array).all():
            values = _name_special(values)
    else:
        values = array.tolist()
    return {"dtype": data.dtype.name, "shape": list(data.shape), "values": values}


def _name_special(values: Any) -> Any:
    if isinstance(values, list):
        return [_name_special(value) for value in values]
    if math.isnan(values):
        return "nan"
    if math.isinf(values):
        return "inf" if values > 0 else "-inf"
    return values


def _decode(leaf: dict, path: str) -> TensorData:
    dtype = check_dtype(leaf["dtype"], path)
    shape = check_shape(leaf.get("shape"), path)
    flat: list[Any] = []
    _collect(leaf.get("values"), shape, flat, path)
    if dtype.is_float:
        if not all(type(v) in (float, int) or _is_special(v) for v in flat):
            raise RecordError(f"tensor {path!r} ({dtype}) holds a value that is not a number")
        try:
            # Written floats are exact float64 values of the dtype, so the later cast is exact.
            numbers = [_SPECIAL_FLOATS[v] if type(v) is str else v for v in flat]
            array = np.array(numbers, dtype=np.float64)
        except OverflowError:
            raise RecordError(f"tensor {path!r} holds an integer too large for a float") from None
    elif dtype.is_bool:
        if not all(type(v) is bool for v in flat):
            raise RecordError(f"tensor {path!r} (bool) holds a value that is not true or false")
        array = np.array(flat, dtype=np.bool_)
    else:
        info = ml_dtypes.iinfo(dtype.numpy)
        if not all(type(v) is int and info.min <= v <= info.max for v in flat):
            raise RecordError(f"tensor {path!r} ({dtype}) holds a value that is not an {dtype}")
        array = np.array(flat, dtype=dtype.numpy)
    return TensorData(array.astype(dtype.numpy).reshape(shape), dtype)


def _is_special(value: Any) -> bool:
    return type(value) is str and value in _SPECIAL_FLOATS


def _collect(values: Any, shape: tuple[int, ...], out: list[Any], path: str) -> None:
    """Append the values of a nested list of ``shape`` to ``out``, checking every length."""
    if not shape:
        out.append(values)
        return
    if not isinstance(values, list) or len(values) != shape[0]:
        found = f"{len(values)} entries" if isinstance(values, list) else type(values).__name__
        raise RecordError(
            f"tensor {path!r} has shape {list(shape)} but its values have {found} "
            f"where {shape[0]} belong"
        )
    if len(shape) == 1:
        out.extend(values)
        return
    for value in values:
        _collect(value, shape[1:], out, path)


def _pretty(value: Any, indent: str) -> str:
    """JSON indented two spaces a level, with lists of plain values kept on one line."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {_pretty(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        items = [inner + _pretty(v, inner) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return json.dumps(value, allow_nan=False)
