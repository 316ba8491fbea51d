"""int64 as int32 for the browser: WebGPU has no 64-bit integers, and burnish's indices are
int64 (``argmax``, ``sort``, ``gather``, an embedding's ids). An export rewrites each kernel that
uses int64 from its IR with int32 in its place (buffers, values, variables, workgroup memory),
and the launch list to match (the bytes of copies and host writes of int64 data halved). Indices
and ids fit in 32 bits for any model a page runs; constants beyond int32's range (the sentinels
of a search for the smallest index) are clamped to it, which keeps their order."""

from __future__ import annotations

import copy
from typing import Any

from burnish.jit import ir

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def uses_int64(kernel: ir.Kernel) -> bool:
    """Whether ``kernel`` binds int64 buffers or computes in i64."""
    if any(b.dtype == "int64" for b in kernel.buffers) or \
            any(s.ty == "i64" for s in kernel.shared):
        return True
    found = False

    def visit(node: Any) -> None:
        nonlocal found
        if getattr(node, "ty", None) == "i64":
            found = True

    _walk(kernel.body, visit)
    return found


def as_int32(kernel: ir.Kernel) -> ir.Kernel:
    """A copy of ``kernel`` with every int64 buffer, value, variable and workgroup array made
    int32 (the runtime's cached kernel is left as it is)."""
    narrowed = copy.deepcopy(kernel)
    for b in narrowed.buffers:
        if b.dtype == "int64":
            b.dtype = "int32"
    for s in narrowed.shared:
        if s.ty == "i64":
            s.ty = "i32"

    def visit(node: Any) -> None:
        if isinstance(node, ir.Binary) and node.ty == "i64" and node.op in ("<<", ">>") and \
                isinstance(node.b, ir.Const) and int(node.b.value) >= 32:
            # An int64 made of two words (``hi << 32 | lo``, how int64 scalars travel in the
            # metadata): for a value that fits in 32 bits, ``hi << 32`` adds nothing to the low
            # word, and ``x >> 32`` is the sign, ``x >> 31`` in 32 bits.
            if node.op == "<<":
                node.op, node.a = "&", ir.Const(0, "i32")
                node.b = ir.Const(0, "i32")
            else:
                node.b = ir.Const(31, "u32" if node.b.ty == "u32" else "i32")
        if isinstance(node, ir.Expr) and node.ty == "i64":
            node.ty = "i32"
            if isinstance(node, ir.Const):
                node.value = min(max(int(node.value), _I32_MIN), _I32_MAX)
        if isinstance(node, ir.Cast) and node.narrow == "int64":
            node.narrow = None
        if isinstance(node, ir.Load):  # its type follows its buffer's dtype
            node.ty = ir.compute_type(node.buffer.dtype)

    _walk(narrowed.body, visit)
    return narrowed


def _walk(stmts: list, visit: Any) -> None:
    """Calls ``visit`` on every expression of ``stmts`` (each node once, children first)."""
    seen: set[int] = set()

    def expr(e: Any) -> None:
        if id(e) in seen:
            return
        seen.add(id(e))
        for name in ("a", "b", "cond", "index", "value"):
            child = getattr(e, name, None)
            if isinstance(child, ir.Expr):
                expr(child)
        for child in getattr(e, "args", None) or ():
            expr(child)
        visit(e)

    def block(body: list) -> None:
        for s in body:
            for name in ("var", "value", "index", "cond", "start", "stop", "step"):
                child = getattr(s, name, None)
                if isinstance(child, ir.Expr):
                    expr(child)
            for name in ("then", "orelse", "body"):
                inner = getattr(s, name, None)
                if isinstance(inner, list):
                    block(inner)

    block(stmts)
