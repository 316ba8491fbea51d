"""The graph: autodiff primitives, the nodes behind them, and the backward pass that consumes them.

A tracked primitive holds a ``Node``; a node holds its parents' nodes, the rule that turns the
gradient of its output into gradients of its inputs, and what that rule needs from the forward
pass. Nodes never point at their outputs and rules are plain functions, so the graph has no
reference cycles: once nothing references a tensor, its node and every ancestor that only it
kept alive are freed by reference counting. ``backward`` frees the nodes it ran through, so a
graph that is still referenced after backward no longer holds its saved values.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from burnish.dtype import DType
from burnish.errors import AutodiffError

#: ``rule(inner_backend, dtype, grad, *saved) -> one gradient (or None) per parent``; ``dtype``
#: is the output's (and so the gradient's) dtype, ``saved`` what the op kept (see ``Node``).
#: An op of several outputs is one node whose ``grad`` is a dict (output index -> gradient, for
#: the outputs that received one), fed by one node per output (``output_node``).
Rule = Callable[..., tuple[Any, ...]]

#: Leaf ids: what ``Gradients`` is keyed by. ``next`` on a count is atomic under the GIL.
_leaf_ids = itertools.count(1)
#: Every node's number, in the order nodes are made. A node's parents exist before it, so a
#: higher number means later in every graph: sorting by it orders a graph topologically.
_sequence = itertools.count()


class Node:
    """One recorded operation (or a leaf that requires grad).

    ``saved`` holds, for each value the rule needs, an inner primitive, a static value (a dim, a
    shape), ``OUT`` (this node's own output, recomputed when checkpointing dropped it) or the
    ``Node`` of an input whose output checkpointing dropped. ``recipe`` is ``(fn, *inputs)``,
    how to recompute the output, kept only by ops that checkpointing recomputes.
    """

    __slots__ = ("parents", "rule", "saved", "recipe", "dtype", "leaf_id", "cache", "order")

    def __init__(self, parents: tuple[Node | None, ...], rule: Rule | None, saved: tuple,
                 recipe: tuple | None, dtype: DType, leaf_id: int = 0):
        self.parents = parents
        self.rule = rule
        self.saved = saved
        self.recipe = recipe
        self.dtype = dtype
        self.leaf_id = leaf_id
        self.cache = None
        self.order = next(_sequence)

    @classmethod
    def leaf(cls, dtype: DType) -> Node:
        """A new leaf: a tensor whose gradient backward computes."""
        return cls((), None, (), None, dtype, next(_leaf_ids))

    @property
    def freed(self) -> bool:
        """Whether a backward pass already consumed this (non-leaf) node."""
        return self.rule is None and not self.leaf_id

    def free(self) -> None:
        """Drop everything this node keeps; it can no longer be differentiated through."""
        self.parents = ()
        self.rule = None
        self.saved = ()
        self.recipe = None
        self.cache = None

    def __repr__(self) -> str:
        if self.leaf_id:
            return f"Node(leaf {self.leaf_id}, {self.dtype})"
        name = getattr(self.rule, "__name__", "freed")
        return f"Node({name}, {len(self.parents)} parents, {self.dtype})"


def output_node(group: Node, index: int) -> Node:
    """The node of output ``index`` of an op of several outputs whose own node is ``group``:
    it hands its gradient to ``group`` as ``{index: grad}``; ``group``'s rule receives the dict
    of the outputs that got one."""
    return Node((group,), _output_backward, (index,), None, group.dtype)


def _output_backward(inner, dtype, grad, index):
    return ({index: grad},)


class AutodiffPrimitive:
    """An autodiff backend's primitive: the inner backend's primitive and, when gradients flow
    through it, the node that made it. ``shape`` is the inner primitive's."""

    __slots__ = ("inner", "node", "shape", "widened")

    def __init__(self, inner: Any, node: Node | None = None):
        self.inner = inner
        self.node = node
        self.shape = inner.shape
        #: For the output of a widening float cast (a 16-bit tensor cast to float32 under
        #: autocast): the ``Recast`` that gives it again from its narrow source.
        self.widened: Recast | None = None

    def __repr__(self) -> str:
        return f"AutodiffPrimitive({self.inner!r}, node={self.node!r})"


class Recast:
    """What a node keeps in ``saved`` for the output of a widening float cast: the narrow
    source and the cast, which backward runs again, instead of the wide copy (a rule that
    needs a float32 view of a 16-bit tensor keeps the 16-bit one: half the bytes)."""

    __slots__ = ("source", "from_dtype", "to_dtype")

    def __init__(self, source: Any, from_dtype: DType, to_dtype: DType):
        self.source = source
        self.from_dtype = from_dtype
        self.to_dtype = to_dtype


#: Whether a ``Recast`` was ever kept: until then, backward hands the saved values to the rules
#: as they are (a program that never widens a tracked tensor pays nothing).
recasts = False


def kept(value: AutodiffPrimitive) -> Any:
    """What a node keeps of the primitive ``value`` it saves: its inner primitive, or for a
    widened cast's output the ``Recast`` that gives it again."""
    global recasts
    widened = value.widened
    if widened is None:
        return value.inner
    recasts = True
    return widened


class _Out:
    """The sentinel ``OUT``: "this node's own output" in ``Node.saved``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OUT"


OUT = _Out()


#: ``callback(leaf_id, gradient)`` of ``on_gradient_ready``: called by ``backward`` as soon as a
#: leaf's gradient is final, while the rest of the graph is still being run backward.
GradientReady = Callable[[int, Any], None]
_ready_callback: contextvars.ContextVar[GradientReady | None] = contextvars.ContextVar(
    "burnish_autodiff_gradient_ready", default=None)


@contextlib.contextmanager
def on_gradient_ready(callback: GradientReady) -> Iterator[None]:
    """While the block runs, every ``backward()`` calls ``callback(leaf_id, gradient)`` for each
    leaf that gets a gradient, as soon as the last node consuming that leaf has run (the inner
    backend's primitive; the same value ``Gradients`` will hold), before the rest of the pass.

    Leaves are made before the ops that use them, so the plain traversal reaches them only at
    its end; with a callback, each leaf is reported when its consumers are done, so that a
    data-parallel trainer can start reducing the last layers' gradients while the first
    layers' are still being computed (what PyTorch's DDP does with its autograd hooks).
    Blocks nest: inside another, both callbacks are called, the outer one first."""
    outer = _ready_callback.get()
    if outer is not None:  # blocks nest: the outer callback still hears of every leaf
        inner_callback = callback

        def callback(leaf_id: int, grad: Any) -> None:
            outer(leaf_id, grad)
            inner_callback(leaf_id, grad)

    token = _ready_callback.set(callback)
    try:
        yield
    finally:
        _ready_callback.reset(token)


def backward(inner: Any, root: Node, seed: Any, recomputes: bool = False) -> dict[int, Any]:
    """Run the graph behind ``root`` backward from the gradient ``seed`` (an inner primitive of
    ``root``'s shape); return the gradient of every leaf reached, by leaf id. Every non-leaf
    node run through is freed. ``recomputes``: nodes may hold states to recompute (balanced
    checkpointing); without it their saved values are used as they are. Under
    ``on_gradient_ready`` each leaf's gradient is reported as soon as it is final."""
    pending: dict[Node, Any] = {root: seed}
    found: dict[int, Any] = {}
    order = _topological(root)
    callback = _ready_callback.get()
    # consumers[leaf]: the nodes left to run that feed it a gradient (only counted for a hook).
    consumers: dict[Node, int] = {}
    if callback is not None:
        for node in order:
            for parent in node.parents:
                if parent is not None and parent.leaf_id:
                    consumers[parent] = consumers.get(parent, 0) + 1
    for node in order:
        grad = pending.pop(node, None)
        if node.leaf_id:
            if grad is not None:
                found[node.leaf_id] = grad
                if callback is not None and node not in consumers:  # the root is a leaf
                    callback(node.leaf_id, grad)
            continue
        if grad is not None:
            saved = [_value(inner, s, node) for s in node.saved] if recomputes or recasts \
                else node.saved
            grads = node.rule(inner, node.dtype, grad, *saved)  # type: ignore[misc]  # not a leaf
            for parent, parent_grad in zip(node.parents, grads):
                if parent is None or parent_grad is None:
                    continue
                before = pending.get(parent)
                if before is None:
                    pending[parent] = parent_grad
                elif type(before) is dict:  # an op of several outputs: gradients by output
                    for index, grad_out in parent_grad.items():
                        found_out = before.get(index)
                        before[index] = grad_out if found_out is None else \
                            inner.add(found_out, grad_out)
                else:
                    pending[parent] = inner.add(before, parent_grad)
        if callback is not None:
            for parent in node.parents:
                if parent is not None and parent.leaf_id:
                    consumers[parent] -= 1
                    if not consumers[parent] and parent in pending:
                        callback(parent.leaf_id, pending[parent])
        node.free()
    return found


def _topological(root: Node) -> list[Node]:
    """Every node ``root`` depends on, each after all the nodes that consume it (root first)."""
    if root.freed:
        raise _freed_error()
    seen = {root}
    stack = [root]
    while stack:
        for parent in stack.pop().parents:
            if parent is not None and parent not in seen:
                if parent.freed:
                    raise _freed_error()
                seen.add(parent)
                stack.append(parent)
    return sorted(seen, key=_order, reverse=True)


def _order(node: Node) -> int:
    return node.order


def _freed_error() -> AutodiffError:
    return AutodiffError(
        "backward(): part of this graph was already consumed by an earlier backward(), which "
        "frees the graph it runs through; compute the output again (or detach() what you keep "
        "across steps) before calling backward() once more"
    )


def _value(inner: Any, state: Any, node: Node) -> Any:
    """A saved state as the value the rule needs (recomputing dropped outputs and widened
    casts)."""
    if state is OUT:
        return recompute(node)
    if type(state) is Node:
        return recompute(state)
    if type(state) is Recast:
        return inner.cast(state.source, state.from_dtype, state.to_dtype)
    return state


def recompute(node: Node) -> Any:
    """``node``'s output, recomputed from its recipe (and its inputs' recipes, as needed); kept
    in ``node.cache`` until the node is freed, so each output is recomputed once per backward."""
    if node.cache is not None:
        return node.cache
    if node.recipe is None:
        raise _freed_error()
    # Iterative, not recursive: a long run of recomputed ops must not hit the recursion limit.
    stack = [node]
    while stack:
        current = stack[-1]
        if current.recipe is None:
            raise _freed_error()
        missing = [s for s in current.recipe[1:] if type(s) is Node and s.cache is None]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        if current.cache is None:
            fn, *inputs = current.recipe
            current.cache = fn(*[s.cache if type(s) is Node else s for s in inputs])
    return node.cache
