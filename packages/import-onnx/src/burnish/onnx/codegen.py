"""Writing the generated module: identifiers, constants, layers, and the Python source."""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from burnish.onnx.errors import OnnxImportError, UnsupportedOperatorError
from burnish.onnx.graph import Node, Value, type_name

#: Names the generated module's forward uses for its own purposes.
RESERVED = {"self", "device", "ops", "nn", "F", "bn", "Tensor", "np", "Path", "WEIGHTS", "load",
            "Model", "input", "type", "len", "list", "range", "min", "max", "sum", "abs", "id",
            "slice", "all", "any", "pow", "round", "format", "print", "object", "float", "int",
            "bool", "tuple", "dict", "set", "str", "map", "zip", "filter", "iter", "next", "hash"}
#: Float constants with more elements than this become parameters (weights), not literals.
LITERAL_FLOATS = 1


class Decline(Exception):  # noqa: N818 (a signal, not an error)
    """Raised by a converter that leaves a node to the ONNX function body of its operator
    (an attribute combination it does not handle, when the schema has a function)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def literal(value: Any) -> str:
    """Python source for a number, bool, string or nested list of them (NaN and infinities
    included)."""
    if isinstance(value, bool | np.bool_):
        return "True" if value else "False"
    if isinstance(value, float | np.floating):
        value = float(value)
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
        return repr(value)
    if isinstance(value, int | np.integer):
        return repr(int(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, np.ndarray):
        return literal(value.tolist())
    return repr(value)


def identifier(name: str, taken: set[str]) -> str:
    """A fresh Python identifier readable as the ONNX name: ``/layer1/Conv_output_0`` becomes
    ``layer1_conv_output_0``; clashes get a numeric suffix."""
    base = re.sub(r"\W+", "_", name).strip("_").lower() or "v"
    base = re.sub(r"_output(_0)?$", "", base) or base
    if len(base) > 40:
        base = base[-40:].lstrip("_") or "v"
    if base[0].isdigit():
        base = "v" + base
    if keyword.iskeyword(base) or base in RESERVED:
        base += "_"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    taken.add(candidate)
    return candidate


class ModuleBuilder:
    """What the generated module is made of, gathered node by node: its fields (layers and
    parameters) with their init expressions, the weights to load into them, and the lines of
    ``forward``."""

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self.fields: dict[str, tuple[str, str]] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.lines: list[str] = []
        self.names: dict[str, str] = {}
        self.constants: dict[str, str] = {}

    def variable(self, value: Value) -> str:
        """The identifier holding ``value`` in forward (made on first use)."""
        name = self.names.get(value.name)
        if name is None:
            name = self.names[value.name] = identifier(value.name, self.taken)
        return name

    def field(self, hint: str, annotation: str, init: str,
              weights: dict[str, np.ndarray]) -> str:
        """A new field of the model (a layer or a parameter): ``weights`` are its parameters'
        values by their names below the field (``{"weight": ..., "bias": ...}``)."""
        name = identifier(hint, self.taken)
        self.fields[name] = (annotation, init)
        for key, array in weights.items():
            self.weights[f"{name}.{key}" if key else name] = array
        return name

    def constant(self, value: Value) -> str:
        """An expression for a constant input: a parameter for float tensors of more than one
        element, otherwise a literal tensor made once in forward."""
        known = self.constants.get(value.name)
        if known is not None:
            return known
        array = np.asarray(value.const)
        dtype = value.dtype
        if dtype is None:
            raise UnsupportedOperatorError(
                f"constant {value.name!r} has element type {type_name(value.elem_type)}, "
                f"which burnish has no dtype for")
        if array.dtype.kind == "f" and array.size > LITERAL_FLOATS:
            name = self.field(value.name, "nn.Param",
                              f"ops.param({literal(list(array.shape))}, {dtype!r}, device)",
                              {"": array})
            expression = f"self.{name}.val()"
        else:
            name = identifier(value.name, self.taken)
            values = array.reshape(-1).tolist() if array.ndim != 0 else array.item()
            shape = "" if array.ndim == 1 else f", shape={literal(list(array.shape))}"
            self.lines.append(f"{name} = ops.const({literal(values)}, {dtype!r}, device{shape})")
            expression = name
        self.constants[value.name] = expression
        return expression


class Emitter:
    """What a converter writes one node with: expressions for its inputs, variables for its
    outputs, lines of forward, and the layers and parameters it needs."""

    def __init__(self, builder: ModuleBuilder, node: Node, subgraphs: Any = None,
                 depth: int = 0):
        self.builder = builder
        self.node = node
        self.subgraphs = subgraphs
        self.depth = depth

    # -- inputs --------------------------------------------------------------------------------

    def has(self, i: int) -> bool:
        """Whether optional input ``i`` is given."""
        return self.node.input(i) is not None

    def input(self, i: int) -> str:
        """Input ``i`` as an expression (``None`` when left out)."""
        value = self.node.input(i)
        if value is None:
            return "None"
        if value.const is not None:
            return self.builder.constant(value)
        if value.name not in self.builder.names:
            raise OnnxImportError(f"input {value.name!r} is used before any node makes it",
                                  self.node)
        return self.builder.names[value.name]

    def inputs(self) -> list[str]:
        return [self.input(i) for i in range(len(self.node.inputs))]

    def scalar(self, i: int) -> str | None:
        """A rank-0 constant input as a Python literal (scalars are weak in burnish: they keep
        the other operand's dtype, as ONNX's same-type operands do); None otherwise."""
        array = self.node.const(i)
        if array is None or np.asarray(array).ndim != 0 or array.dtype.kind not in "fiub":
            return None
        return literal(np.asarray(array).item())

    def ints(self, i: int) -> str:
        """Input ``i`` (a 1-d int tensor such as a shape) as a Python list literal when it is
        a constant, otherwise an expression reading it at run time."""
        values = self.node.ints(i)
        if values is not None:
            return literal(values)
        if not self.has(i):
            return "None"
        if self.node.const(i) is not None and self.node.const(i).size == 0:
            return "None"
        return f"ops.ints({self.input(i)})"

    def floats(self, i: int) -> str:
        """Input ``i`` (a 1-d float tensor such as scales) as a list literal when constant,
        otherwise read at run time; ``None`` when left out or empty."""
        array = self.node.const(i)
        if array is not None:
            return "None" if array.size == 0 else literal(
                [float(v) for v in np.asarray(array).reshape(-1)])
        if not self.has(i):
            return "None"
        return f"ops.floats({self.input(i)})"

    # -- outputs -------------------------------------------------------------------------------

    def output(self, i: int = 0) -> str:
        value = self.node.outputs[i] if i < len(self.node.outputs) else None
        return "_" if value is None else self.builder.variable(value)

    def used(self, i: int) -> bool:
        """Whether optional output ``i`` is asked for."""
        return i < len(self.node.outputs) and self.node.outputs[i] is not None

    def assign(self, expression: str, i: int = 0) -> None:
        self.line(f"{self.output(i)} = {expression}")

    def assign_all(self, expression: str, count: int | None = None) -> None:
        """``a, b = expression`` for the node's outputs (``count`` of them, unused ones ``_``)."""
        count = len(self.node.outputs) if count is None else count
        names = [self.output(i) for i in range(count)]
        target = names[0] + "," if count == 1 else ", ".join(names)
        self.line(f"{target} = {expression}")

    def line(self, code: str) -> None:
        self.builder.lines.append(code)

    # -- layers and parameters -----------------------------------------------------------------

    def layer(self, annotation: str, init: str, weights: dict[str, np.ndarray],
              hint: str | None = None) -> str:
        """A layer field (``nn.Conv2d``...) and its weights; returns ``self.<name>``."""
        if hint is None:
            # Name the layer after its weight (``features.0.weight`` gives ``features_0``).
            consts = [v.name for v in self.node.inputs if v is not None and v.const is not None]
            named = [n for n in consts if n.endswith((".weight", ".gamma", ".scale"))]
            hint = named[0].rsplit(".", 1)[0] if named else self.node.name
        name = self.builder.field(hint, annotation, init, weights)
        return f"self.{name}"

    def param(self, array: np.ndarray, hint: str) -> str:
        """A parameter field holding ``array``; returns the expression of its tensor."""
        dtype = {"float16": "float16", "float64": "float64"}.get(str(array.dtype), "float32")
        name = self.builder.field(hint, "nn.Param",
                                  f"ops.param({literal(list(array.shape))}, {dtype!r}, device)",
                                  {"": array})
        return f"self.{name}.val()"

    # -- subgraphs -----------------------------------------------------------------------------

    def function(self, attribute: str) -> str:
        """The name of a function nested in forward that computes the node's subgraph
        attribute ``attribute`` (If's branches, Loop's and Scan's bodies): called with the
        subgraph's inputs, it returns the tuple of its outputs."""
        proto = self.node.attr(attribute)
        if self.subgraphs is None or proto is None:
            raise self.unsupported(f"subgraph {attribute!r} outside an import")
        return self.subgraphs.function(proto, f"{self.node.op_type}_{attribute}",
                                       self.depth)

    # -- refusing ------------------------------------------------------------------------------

    def unsupported(self, reason: str) -> UnsupportedOperatorError:
        """The error to raise for an attribute or input this converter cannot handle."""
        return UnsupportedOperatorError(reason, self.node)

    def decline(self, reason: str) -> Decline:
        """The signal to raise to leave the node to its ONNX function body, if it has one."""
        return Decline(reason)


def call(function: str, *args: str, **kwargs: Any) -> str:
    """``function(a, b, key=literal)``: keyword values are literals unless already str code
    wrapped in ``Code``."""
    parts = list(args)
    for key, value in kwargs.items():
        parts.append(f"{key}={value.code if isinstance(value, Code) else literal(value)}")
    return f"{function}({', '.join(parts)})"


class Code:
    """Source text to put in a call as it is (not as a literal)."""

    def __init__(self, code: str):
        self.code = code


def wrap(line: str, indent: str, width: int = 99) -> list[str]:
    """A long line split inside its first call's parentheses: the arguments on indented
    continuation lines, as many as fit on each."""
    nested = len(line) - len(line.lstrip(" "))  # a line of a nested function
    indent, line = indent + line[:nested], line[nested:]
    calls = [m.end() - 1 for m in re.finditer(r"\w\(", line)]
    if len(indent) + len(line) <= width or not calls:
        return [indent + line]
    open_at = calls[0]  # a call's parenthesis: a bare one would become a tuple
    depth, close_at = 0, -1
    for i in range(open_at, len(line)):
        if line[i] in "([{":
            depth += 1
        elif line[i] in ")]}":
            depth -= 1
            if depth == 0:
                close_at = i
                break
    if close_at < 0:
        return [indent + line]
    arguments = split_arguments(line[open_at + 1:close_at])
    inner = indent + "    "
    out = [indent + line[:open_at + 1]]
    current = inner
    for argument in arguments:
        piece = argument + ","
        if current != inner and len(current) + 1 + len(piece) > width:
            out.append(current.rstrip())
            current = inner
        current += piece if current == inner else " " + piece
    out.append(current.rstrip())
    out.append(indent + line[close_at:])
    return out


def split_arguments(text: str) -> list[str]:
    """Top-level comma-separated pieces of an argument list."""
    pieces, depth, start, quote = [], 0, 0, None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            pieces.append(text[start:i].strip())
            start = i + 1
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


HEADER = '''"""{title}

Generated by burnish.onnx from {source}; regenerate rather than edit. ``load(device)`` gives
the model with its imported weights ({weights}, beside this file).
"""

from __future__ import annotations

from pathlib import Path

import burnish as bn  # noqa: F401
import burnish.functional as F  # noqa: F401
from burnish import Tensor, nn
from burnish.onnx import ops

WEIGHTS = Path(__file__).with_name({weights!r})
'''


def module_source(builder: ModuleBuilder, inputs: Sequence[str], outputs: Sequence[str],
                  title: str, source: str, weights: str) -> str:
    """The whole generated file."""
    out = [HEADER.format(title=title, source=source, weights=weights), "",
           "class Model(nn.Module):"]
    out.append('    """The imported graph as a burnish module."""')
    out.append("")
    for name, (annotation, _) in builder.fields.items():
        out.append(f"    {name}: {annotation}")
    if builder.fields:
        out.append("")
    out.append("    @classmethod")
    out.append("    def init(cls, device: bn.Device | str | None = None) -> Model:")
    out.append('        """The model with placeholder parameters; ``load`` fills in the '
               'imported ones."""')
    if builder.fields:
        out.append("        return cls(")
        for name, (_, init) in builder.fields.items():
            out.extend(wrap(f"{name}={init},", "            "))
        out.append("        )")
    else:
        out.append("        return cls()")
    out.append("")
    signature = ", ".join(["self", *(f"{name}: Tensor" for name in inputs)])
    returns = "Tensor" if len(outputs) == 1 else f"tuple[{', '.join(['Tensor'] * len(outputs))}]"
    out.extend(wrap(f"def forward({signature}) -> {returns}:", "    "))
    out.extend(wrap(f"device = ops.device_of(self, {', '.join(inputs)})".replace(", )", ")"),
                    "        "))
    for line in builder.lines:
        out.extend(wrap(line, "        "))
    out.append(f"        return {', '.join(outputs)}")
    out.append("")
    out.append("")
    out.append("def load(device: bn.Device | str | None = None,")
    out.append("         path: str | Path = WEIGHTS) -> Model:")
    out.append('    """The imported model on ``device``, its weights read from ``path``."""')
    out.append("    return Model.init(device).load(path)")
    return "\n".join(out) + "\n"
