"""Gradient checkpointing: which forward values the graph keeps, and which it recomputes.

Two strategies, chosen when wrapping a backend (Burn's checkpointing strategies), so a model
picks one by the backend its tensors live on:

- ``"none"``: every op keeps what its backward rule needs (inputs or output) until backward.
- ``"balanced"``: memory-bound ops (elementwise math, activations, reshapes and other views)
  keep only a recipe (the op and its inputs' states) and their outputs are recomputed during
  backward when a rule needs them; compute-bound ops (matmul, conv, reductions, sorts, pools)
  keep what they need. A run of cheap ops then keeps the buffer it started from instead of one
  buffer per op, for one extra pass over those ops during backward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from burnish.autodiff.graph import OUT, AutodiffPrimitive, Node

if TYPE_CHECKING:
    from burnish import Tensor

STRATEGIES = ("none", "balanced")


def state(value: Any, balanced: bool) -> Any:
    """What a node keeps for ``value``, a rule's saved input or a recipe's input: an autodiff
    primitive becomes its inner primitive, or under ``balanced`` checkpointing the node that can
    recompute it; anything else (dims, shapes, inner primitives) is kept as it is."""
    if type(value) is AutodiffPrimitive:
        node = value.node
        if balanced and node is not None and node.recipe is not None:
            return node
        return value.inner
    return value


def saved_buffers(tensor: Tensor) -> int:
    """How many distinct inner buffers the graph behind ``tensor`` (of an autodiff backend)
    keeps for backward, saved values and recipe inputs: a measure of what checkpointing
    saves."""
    node = tensor.primitive.node
    found: set[int] = set()
    seen: set[int] = set()
    stack = [node] if node is not None else []
    keep = []  # holds the buffers while counting, so that ids stay unique
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for value in (*node.saved, *(node.recipe or ())[1:]):
            if value is OUT or type(value) is Node or not hasattr(value, "shape"):
                continue
            if id(value) not in found:
                found.add(id(value))
                keep.append(value)
        stack.extend(p for p in node.parents if p is not None)
    return len(found)
