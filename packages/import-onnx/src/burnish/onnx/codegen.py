"""Writing the generated module: identifiers, constants, layers, and the Python source."""

from __future__ import annotations

import keyword
import math
import re
import textwrap
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
#: The width of generated lines (the project's style, ruff's line length).
WIDTH = 100
#: Identifiers longer than this keep only their last words (more when needed to be unique).
NAME_LENGTH = 40
#: Float constants with more elements than this become parameters (weights), not literals.
LITERAL_FLOATS = 1
#: Int and bool constants with more elements than this become frozen parameters, not literals.
LITERAL_ELEMENTS = 16


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
    ``layer1_conv``, and a scope PyTorch's exporter repeats is said once
    (``/layer2/layer2.0/conv1/Conv`` becomes ``layer2_0_conv1_conv``). A name longer than
    ``NAME_LENGTH`` keeps its last whole words, as many more as make it unique; a name taken
    even in full gets a numeric suffix."""
    words = [w for w in re.sub(r"\W+", "_", _unrepeated(name)).lower().split("_") if w]
    if len(words) > 1 and words[-1] == "output":
        words.pop()
    elif len(words) > 2 and words[-2:] == ["output", "0"]:
        del words[-2:]
    words = words or ["v"]
    # Where the name may start: a word that is not a number (it would need a prefix), or
    # the first word; the longest tail within NAME_LENGTH first, then longer ones.
    starts = [i for i, word in enumerate(words) if i == 0 or not word[0].isdigit()]
    short = [i for i in starts if len("_".join(words[i:])) <= NAME_LENGTH]
    first = short[0] if short else starts[-1]
    candidates = [_valid("_".join(words[i:])) for i in reversed(starts) if i <= first]
    for candidate in candidates:
        if candidate not in taken:
            taken.add(candidate)
            return candidate
    base, n = candidates[0], 2
    while f"{base}_{n}" in taken:
        n += 1
    taken.add(f"{base}_{n}")
    return f"{base}_{n}"


def _unrepeated(name: str) -> str:
    """The ONNX name without the scopes that the next one repeats: PyTorch names a submodule
    of a container by its path (``/layer2/layer2.0/``), which already holds the container's."""
    scopes = name.split("/")
    kept = [scope for scope, after in zip(scopes, scopes[1:])
            if not (scope and after.startswith(scope + "."))]
    return "/".join([*kept, scopes[-1]])


def _valid(base: str) -> str:
    """``base`` made a usable identifier: not starting with a digit, not a keyword or a name
    the generated module uses."""
    if base[0].isdigit():
        base = "v" + base
    if keyword.iskeyword(base) or base in RESERVED:
        base += "_"
    return base


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
        element, a frozen float32 parameter cast back to the constant's dtype for int and bool
        tensors of more than ``LITERAL_ELEMENTS`` (when float32 holds every value exactly),
        otherwise a literal tensor made once in forward."""
        known = self.constants.get(value.name)
        if known is not None:
            return known
        array = np.asarray(value.const)
        dtype = value.dtype
        if dtype is None:
            raise UnsupportedOperatorError(
                f"constant {value.name!r} has element type {type_name(value.elem_type)}, "
                f"which burnish has no dtype for")
        shape = literal(list(array.shape))
        if array.dtype.kind == "f" and array.size > LITERAL_FLOATS:
            name = self.field(value.name, "nn.Param", f"ops.param({shape}, {dtype!r}, device)",
                              {"": array})
            expression = f"self.{name}.val()"
        elif array.size > LITERAL_ELEMENTS and _exact_in_float32(array):
            name = self.field(value.name, "nn.Param",
                              f"ops.param({shape}, 'float32', device, frozen=True)",
                              {"": array.astype(np.float32)})
            expression = f"ops.cast(self.{name}.val(), {dtype!r})"
        else:
            name = identifier(value.name, self.taken)
            values = array.reshape(-1).tolist() if array.ndim != 0 else array.item()
            shape = "" if array.ndim == 1 else f", shape={shape}"
            self.lines.append(f"{name} = ops.const({literal(values)}, {dtype!r}, device{shape})")
            expression = name
        self.constants[value.name] = expression
        return expression


def _exact_in_float32(array: np.ndarray) -> bool:
    """Whether every value of an int or bool array comes back unchanged from float32."""
    if array.dtype.kind == "b":
        return True
    return array.dtype.kind in "iu" and bool(
        np.array_equal(array.astype(np.float32).astype(array.dtype), array))


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


def wrap(line: str, indent: str, width: int = WIDTH) -> list[str]:
    """A line of generated code at ``indent``, split over several lines when it is longer than
    ``width``: its longest bracketed part (a call's arguments, a list) puts its items on
    indented continuation lines, as many as fit on each; an item still too long is split the
    same way, and so is what follows the closing bracket. An assignment or a return that
    still does not fit has its value put in parentheses, inside which it breaks between
    words (``a = (`` / ``b * c`` / ``)``)."""
    nested = len(line) - len(line.lstrip(" "))  # a line of a nested function
    return _split(line[nested:], indent + line[:nested], "", width, enclosed=False)


def _split(text: str, indent: str, suffix: str, width: int, enclosed: bool = True
           ) -> list[str]:
    """``text`` followed by ``suffix`` at ``indent``, split as ``wrap`` says; ``enclosed``
    when the text is inside brackets, where a line may break anywhere between words."""
    if len(indent) + len(text) + len(suffix) <= width:
        return [indent + text + suffix]
    lines = _split_brackets(text, indent, suffix, width, enclosed)
    if lines is not None and all(len(line) <= width for line in lines):
        return lines
    statement = re.match(r"(return |[\w, ]+ = )(?!\($)", text) if not enclosed else None
    if statement is not None:
        head, value = statement.group(1), text[statement.end():]
        if len(indent) + len(head) + 1 > width:
            # Too many targets for a line: they go in parentheses too.
            targets = _split_words(head.removesuffix(" = ") + ",", indent + "    ", "", width)
            lines = [indent + "(", *targets]
            if len(indent) + len(") = ") + len(value) + len(suffix) <= width:
                return [*lines, indent + ") = " + value + suffix]
            head = ") = "
        else:
            lines = []
        value_lines = _split(value, indent + "    ", "", width)
        return [*lines, indent + head + "(", *value_lines, indent + ")" + suffix]
    if enclosed and lines is None:
        return _split_words(text, indent, suffix, width)
    return lines or [indent + text + suffix]  # nothing to split at: a long name or string


def _split_brackets(text: str, indent: str, suffix: str, width: int, enclosed: bool
                    ) -> list[str] | None:
    """``text`` split at its longest bracketed part (None when it has none)."""
    pairs = [(a, b) for a, b in _outer_brackets(text) if text[a + 1:b].strip()]
    if not pairs:
        return None
    open_at, close_at = max(pairs, key=lambda pair: pair[1] - pair[0])
    content = text[open_at + 1:close_at]
    items = split_arguments(content)
    # A trailing comma makes a bare parenthesis a tuple and changes a subscript's index: it
    # is added only where it means nothing (a call, a list), or kept where it was.
    before = text[:open_at].rstrip()[-1:]
    grouping = text[open_at] == "(" and not (before.isalnum() or before in "_)]")
    subscript = text[open_at] == "[" and (before.isalnum() or before in "_)]\"'")
    comma = len(items) > 1 or content.rstrip().endswith(",") or not (grouping or subscript)
    inner = indent + "    "
    lines = [indent + text[:open_at + 1]]
    current = ""
    for k, item in enumerate(items):
        piece = item + ("," if k < len(items) - 1 or comma else "")
        if current and len(inner) + len(current) + 1 + len(piece) <= width:
            current += " " + piece
            continue
        if current:
            lines.append(inner + current)
            current = ""
        if len(inner) + len(piece) <= width:
            current = piece
        else:
            lines.extend(_split(item, inner, piece[len(item):], width))
    if current:
        lines.append(inner + current)
    lines.extend(_split(text[close_at:], indent, suffix, width, enclosed))
    return lines


def _split_words(text: str, indent: str, suffix: str, width: int) -> list[str]:
    """Text inside brackets broken at its spaces outside strings, as many words a line as
    fit."""
    words, start, quote = [], 0, None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == " ":
            words.append(text[start:i])
            start = i + 1
    words.append(text[start:] + suffix)
    lines, current = [], ""
    for word in filter(None, words):
        if current and len(indent) + len(current) + 1 + len(word) > width:
            lines.append(indent + current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return [*lines, indent + current]


def _outer_brackets(text: str) -> list[tuple[int, int]]:
    """The positions of each outermost bracket pair of ``text`` (strings skipped; a closing
    bracket with no opening one, as what follows a split part starts with, is passed over)."""
    pairs, depth, start, quote = [], 0, 0, None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            if depth == 0:
                start = i
            depth += 1
        elif ch in ")]}" and depth > 0:
            depth -= 1
            if depth == 0:
                pairs.append((start, i))
    return pairs


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


def docstring_text(text: str) -> str:
    """Text from the model file (its graph's name, its producer) made safe inside a generated
    docstring: one line of printable characters, with no quote or backslash that could end
    the docstring or start an escape."""
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text.replace("\\", "/").replace('"', "'")


HEADER = '''"""{title}

{generated}
{weights}, beside this file.
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
    # The weights' name starts a line of its own: ``Imported.write`` puts in the file's name.
    generated = (f"Generated by burnish.onnx from {source}; regenerate rather than edit. "
                 "``load(device)`` gives the model with its imported weights:")
    header = HEADER.format(title=textwrap.fill(docstring_text(title), WIDTH - len('"""')),
                           generated=textwrap.fill(docstring_text(generated), WIDTH),
                           weights=weights)
    out = [header, "", "class Model(nn.Module):"]
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
    results = ", ".join(outputs)
    out.extend(wrap(f"return {results}" if len(results) < WIDTH // 2 else f"return ({results})",
                    "        "))
    out.append("")
    out.append("")
    out.append("def load(device: bn.Device | str | None = None,")
    out.append("         path: str | Path = WEIGHTS) -> Model:")
    out.append('    """The imported model on ``device``, its weights read from ``path``."""')
    out.append("    return Model.init(device).load(path)")
    return "\n".join(out) + "\n"
