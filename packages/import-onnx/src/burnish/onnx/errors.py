"""The importer's errors: each names the node, its operator and the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.errors import BurnishError, UnsupportedError

if TYPE_CHECKING:
    from burnish.onnx.graph import Node


def where(node: Node | None) -> str:
    """``node 'conv1' (Conv)``: how messages name a node."""
    if node is None:
        return "the model"
    return f"node {node.name!r} ({node.domain + '.' if node.domain else ''}{node.op_type})"


class OnnxImportError(BurnishError, ValueError):
    """A model that cannot be imported. ``node`` is the ONNX node at fault, when there is one;
    ``file`` the file that could not be read, when the fault is the file itself (the message
    then starts with the file's path instead of a node)."""

    def __init__(self, reason: str, node: Node | None = None, file: str | None = None):
        self.node = node
        self.reason = reason
        self.file = file
        place = file if file is not None and node is None else where(node)
        super().__init__(f"{place}: {reason}")


class FoldWarning(UserWarning):
    """A node computable from constants that could not be computed at import (onnx's reference
    evaluator failed on it): it stays a computation of ``forward``, which may fail the same way
    when it runs."""


class UnsupportedOperatorError(OnnxImportError, UnsupportedError):
    """An operator, attribute, dtype or dynamic shape the importer has no conversion for."""


class MalformedModelError(OnnxImportError):
    """A file that is not a valid ONNX model: unreadable, failing onnx's checker, or
    inconsistent (a value used before it is made, an input missing)."""
