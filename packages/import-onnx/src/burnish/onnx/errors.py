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
    """A model that cannot be imported. ``node`` is the ONNX node at fault, when there is one."""

    def __init__(self, reason: str, node: Node | None = None):
        self.node = node
        self.reason = reason
        super().__init__(f"{where(node)}: {reason}")


class UnsupportedOperatorError(OnnxImportError, UnsupportedError):
    """An operator, attribute, dtype or dynamic shape the importer has no conversion for."""


class MalformedModelError(OnnxImportError):
    """A file that is not a valid ONNX model: unreadable, failing onnx's checker, or
    inconsistent (a value used before it is made, an input missing)."""
