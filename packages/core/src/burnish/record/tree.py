"""The nested structure of a record: checking it, and flattening it to dotted paths and back.

A tree is a dict with str keys whose values are dicts, lists or ``TensorData`` leaves, to any
depth. A leaf's path joins the keys and list indices leading to it with dots
(``"encoder.layers.0.weight"``), the naming PyTorch and Burn use, so keys may not contain dots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from burnish.errors import BurnishError, RecordError
from burnish.tensor_data import TensorData


def normalize(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record as plain dicts, lists and TensorData leaves.

    Leaves may be ``TensorData``, anything with an ``into_data()`` method returning TensorData (a
    burnish ``Tensor``) or a NumPy array; tuples become lists. Raises RecordError naming the path
    of the first key or value that is not allowed.
    """
    if not isinstance(record, Mapping):
        raise RecordError(f"a record must be a mapping of names to tensors, got {_kind(record)}")
    return _normalize(record, "")


def _normalize(node: Any, path: str) -> Any:
    if isinstance(node, TensorData):
        return node
    into_data = getattr(node, "into_data", None)
    if callable(into_data):
        data = into_data()
        if not isinstance(data, TensorData):
            raise RecordError(f"{_where(path)}: into_data() returned {_kind(data)}, not TensorData")
        return data
    if isinstance(node, Mapping):
        result = {}
        for key, value in node.items():
            check_key(key, path)
            result[key] = _normalize(value, join(path, key))
        return result
    if isinstance(node, list | tuple):
        return [_normalize(value, join(path, str(i))) for i, value in enumerate(node)]
    if isinstance(node, np.ndarray):
        try:
            return TensorData(node)
        except BurnishError as error:
            raise RecordError(f"{_where(path)}: {error}") from None
    raise RecordError(
        f"{_where(path)} is {_kind(node)}; leaves must be TensorData, a Tensor or a NumPy array"
    )


def check_key(key: Any, parent: str) -> None:
    """Raise RecordError unless ``key`` can name an entry under ``parent``."""
    if not isinstance(key, str):
        raise RecordError(f"record keys must be strings; {_where(parent)} has key {key!r}")
    if not key or "." in key:
        raise RecordError(
            f"record key {key!r} under {_where(parent)} must be non-empty and free of '.', "
            f"which separates the levels of a tensor's path"
        )


def join(path: str, key: str) -> str:
    """The path of ``key`` below ``path`` (the root's path is the empty string)."""
    return f"{path}.{key}" if path else key


def flatten(tree: Mapping[str, Any]) -> dict[str, TensorData]:
    """Every leaf of a normalized tree by its dotted path, in the tree's order."""
    flat: dict[str, TensorData] = {}

    def visit(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                visit(value, join(path, key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                visit(value, join(path, str(i)))
        else:
            flat[path] = node

    visit(tree, "")
    return flat


def skeleton(tree: Any) -> Any:
    """The tree's shape without its tensors (leaves become ``None``): JSON-compatible, it keeps
    what dotted paths lose: key order, lists versus dicts, and empty dicts and lists."""
    if isinstance(tree, dict):
        return {key: skeleton(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [skeleton(value) for value in tree]
    return None


def unflatten(shape: Any, flat: Mapping[str, TensorData]) -> dict[str, Any]:
    """The tree described by a ``skeleton`` with its leaves taken from ``flat`` by path.

    Raises RecordError when the skeleton is malformed, names a tensor ``flat`` lacks, or ``flat``
    holds tensors the skeleton does not place.
    """
    remaining = dict(flat)

    def build(node: Any, path: str) -> Any:
        if node is None:
            if path not in remaining:
                raise RecordError(f"the structure names tensor {path!r}, which the file lacks")
            return remaining.pop(path)
        if isinstance(node, dict):
            result = {}
            for key, value in node.items():
                check_key(key, path)
                result[key] = build(value, join(path, key))
            return result
        if isinstance(node, list):
            return [build(value, join(path, str(i))) for i, value in enumerate(node)]
        raise RecordError(f"the structure holds {_kind(node)} at {_where(path)}")

    if not isinstance(shape, dict):
        raise RecordError(f"the structure's root must be a mapping, found {_kind(shape)}")
    try:
        tree = build(shape, "")
    except RecursionError:
        raise RecordError("the structure nests too deeply to be real") from None
    if remaining:
        extra = ", ".join(sorted(remaining)[:5])
        raise RecordError(f"the file holds tensors its structure does not place: {extra}")
    return tree


def unflatten_dotted(flat: Mapping[str, TensorData]) -> dict[str, Any]:
    """Nested dicts from dotted paths alone (files written by other frameworks): every level is
    a dict, list indices stay string keys. Raises RecordError when a path is both a tensor and a
    prefix of another path, or has an empty level."""
    tree: dict[str, Any] = {}
    for path, data in flat.items():
        *parents, last = path.split(".")
        node = tree
        for depth, key in enumerate(parents):
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                prefix = ".".join(parents[: depth + 1])
                raise RecordError(f"{prefix!r} is a tensor and also a prefix of {path!r}")
        if last in node or not all(parents + [last]):
            raise RecordError(f"tensor name {path!r} collides with another or has an empty level")
        node[last] = data
    return tree


def encode_nested(tree: Any, encode_leaf: Callable[[TensorData], Any]) -> Any:
    """The tree with each leaf replaced by ``encode_leaf(leaf)``: the form of formats that nest
    natively (MessagePack, JSON), where a leaf is a map holding a string under "dtype"."""
    if isinstance(tree, dict):
        return {key: encode_nested(value, encode_leaf) for key, value in tree.items()}
    if isinstance(tree, list):
        return [encode_nested(value, encode_leaf) for value in tree]
    return encode_leaf(tree)


def decode_nested(node: Any, decode_leaf: Callable[[dict, str], TensorData]) -> dict[str, Any]:
    """The tree an ``encode_nested`` form holds, ``decode_leaf(leaf_map, path)`` making each leaf.

    A map is a leaf when its "dtype" is a string; a node's values are maps or lists, never
    strings, so no record is mistaken for a leaf. Raises RecordError for anything else.
    """
    if not isinstance(node, dict) or _is_leaf(node):
        raise RecordError(f"the tensors' root must be a mapping of names, found {_kind(node)}")
    try:
        return _decode(node, decode_leaf, "")
    except RecursionError:
        raise RecordError("the record nests too deeply to be real") from None


def _decode(node: Any, decode_leaf: Callable[[dict, str], TensorData], path: str) -> Any:
    if isinstance(node, dict):
        if _is_leaf(node):
            return decode_leaf(node, path)
        result = {}
        for key, value in node.items():
            check_key(key, path)
            result[key] = _decode(value, decode_leaf, join(path, key))
        return result
    if isinstance(node, list):
        return [_decode(value, decode_leaf, join(path, str(i))) for i, value in enumerate(node)]
    raise RecordError(f"{_where(path)} is {_kind(node)}, neither a tensor nor a mapping or list")


def _is_leaf(node: dict) -> bool:
    return isinstance(node.get("dtype"), str)


def _where(path: str) -> str:
    return f"entry {path!r}" if path else "the record's root"


def _kind(value: Any) -> str:
    return f"a value of type {type(value).__name__}"
