"""The import pipeline: read, upgrade, infer shapes, simplify, convert node by node into the
source of a burnish module and its weights; then write them out or build the module."""

from __future__ import annotations

import os
import sys
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import onnx
import onnx.defs
import onnx.inliner  # noqa: F401 (graph.prepare uses it)
from burnish.onnx import simplify
from burnish.onnx.codegen import Decline, Emitter, ModuleBuilder, identifier, module_source
from burnish.onnx.converter import Converter, registered_converters
from burnish.onnx.errors import MalformedModelError, OnnxImportError, UnsupportedOperatorError
from burnish.onnx.graph import (
    DTYPES,
    Graph,
    Node,
    Value,
    ValueTable,
    build_graph,
    build_subgraph,
    infer,
    make_node,
    prepare,
    read_model,
    type_name,
    type_proto,
    value_types,
)
from onnx import helper

#: How deep ONNX function bodies may nest before the importer gives up.
MAX_DEPTH = 8


@dataclass
class Report:
    """What an import used: each operator's node count, and how each was converted."""

    operators: Counter = field(default_factory=Counter)
    converted: dict[str, str] = field(default_factory=dict)

    def note(self, op: str, how: str) -> None:
        self.operators[op] += 1
        self.converted.setdefault(op, how)

    def table(self) -> str:
        lines = [f"{'operator':28} {'nodes':>5}  conversion"]
        for op, count in sorted(self.operators.items()):
            lines.append(f"{op:28} {count:>5}  {self.converted[op]}")
        return "\n".join(lines)


@dataclass
class Imported:
    """An imported model: the generated module's source, its weights by parameter name, and
    what the import used."""

    source: str
    weights: dict[str, np.ndarray]
    graph: Graph
    report: Report
    class_name: str = "Model"

    def build(self, device: Any = None) -> Any:
        """The module, built in memory on ``device`` from the generated source and weights
        (exactly what ``load`` of the written files gives)."""
        module = self.python_module()
        return module.Model.init(device).load_record(nested(self.weights))

    def python_module(self) -> types.ModuleType:
        """The generated source as a (fresh, in-memory) Python module."""
        name = f"burnish_onnx_generated_{id(self):x}"
        module = types.ModuleType(name)
        module.__file__ = f"<{name}>"
        sys.modules[name] = module  # dataclasses look the module up by name
        exec(compile(self.source, module.__file__, "exec"), module.__dict__)
        return module

    def write(self, folder: str | os.PathLike[str], name: str = "model",
              format: str | None = None) -> tuple[Path, Path]:
        """Write ``NAME.py`` and its weights (``NAME.safetensors``, or another record format's
        extension) into ``folder``; returns both paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        extension = {None: "safetensors"}.get(format, format)
        weights_path = folder / f"{name}.{extension}"
        source = self.source.replace("'model.safetensors'", repr(weights_path.name)).replace(
            "model.safetensors, beside", f"{weights_path.name}, beside")
        module_path = folder / f"{name}.py"
        module_path.write_text(source, encoding="utf-8")
        module = self.build("ndarray")
        module.save(weights_path, format=None if format is None else format)
        return module_path, weights_path


def nested(weights: dict[str, np.ndarray]) -> dict[str, Any]:
    """``{"conv.weight": w}`` as the nested record ``{"conv": {"weight": w}}``."""
    tree: dict[str, Any] = {}
    for name, array in weights.items():
        *path, last = name.split(".")
        node = tree
        for key in path:
            node = node.setdefault(key, {})
        node[last] = array
    return tree


def convert(source: str | os.PathLike[str] | bytes | onnx.ModelProto,
            converters: dict[tuple[str, str], Converter] | None = None) -> Imported:
    """Import a model: the generated source and weights (see ``Imported``). Raises
    ``UnsupportedOperatorError`` or ``MalformedModelError`` naming the node at fault."""
    label = source if isinstance(source, str | os.PathLike) else "an in-memory model"
    model = prepare(read_model(source))
    graph = build_graph(model, str(label))
    check_types(graph)
    simplify.fuse_qdq(graph)
    simplify.remove_dead(graph)
    graph.nodes = simplify.fold(graph.nodes)
    simplify.remove_dead(graph)
    simplify.fuse(graph)
    builder = ModuleBuilder()
    report = Report()
    inputs = [builder.variable(v) for v in graph.inputs]
    state = _State(builder, report, converters or registered_converters(), graph)
    for node in graph.nodes:
        state.convert(node, 0)
    outputs = [state.result(value) for value in graph.outputs]
    title = f"{graph.name}: an ONNX model (opset {graph.opsets.get('', '?')}"
    title += f", made by {graph.producer})" if graph.producer else ")"
    text = module_source(builder, inputs, outputs, title, Path(str(label)).name,
                         "model.safetensors")
    return Imported(text, builder.weights, graph, report)


def check_types(graph: Graph) -> None:
    """Graph inputs, outputs and constants of element types burnish has no dtype for are
    reported at once."""
    for kind, values in (("input", graph.inputs), ("output", graph.outputs)):
        for value in values:
            if value.elem_type == -1:
                raise UnsupportedOperatorError(f"graph {kind} {value.name!r} is not a tensor "
                                               "(sequences, maps and optionals are not supported)")
            if value.elem_type and value.elem_type not in DTYPES:
                raise UnsupportedOperatorError(
                    f"graph {kind} {value.name!r} has element type "
                    f"{type_name(value.elem_type)}, which burnish has no dtype for")


class _State:
    def __init__(self, builder: ModuleBuilder, report: Report,
                 converters: dict[tuple[str, str], Converter], graph: Graph):
        self.builder = builder
        self.report = report
        self.converters = converters
        self.counter = 0
        self.opsets = graph.opsets
        self.tables = [graph.table]  # the main graph's, then each subgraph's being converted

    def result(self, value: Value) -> str:
        """The expression of a graph's output."""
        if value.const is not None:
            return self.builder.constant(value)
        if value.name in self.builder.names:
            return self.builder.names[value.name]
        raise MalformedModelError(f"graph output {value.name!r} is made by no node")

    def function(self, proto: onnx.GraphProto, hint: str, depth: int) -> str:
        """A function nested in forward that computes the subgraph ``proto``: its inputs are
        the parameters, it returns the tuple of its outputs, and it reads values of the
        enclosing graphs as closure variables. Returns the function's name."""
        graph = build_subgraph(proto, self.tables[-1], self.opsets)
        check_types(graph)
        builder = self.builder
        name = identifier(hint, builder.taken)
        parameters = [builder.variable(v) for v in graph.inputs]
        outer_lines, outer_constants = builder.lines, dict(builder.constants)
        builder.lines = []
        self.tables.append(graph.table)
        try:
            for node in simplify.fold(graph.nodes):
                self.convert(node, depth)
            results = [self.result(value) for value in graph.outputs]
            body = builder.lines
        finally:
            self.tables.pop()
            builder.lines, builder.constants = outer_lines, outer_constants
        builder.lines.append(f"def {name}({', '.join(parameters)}):")
        builder.lines.extend("    " + line for line in body)
        builder.lines.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
        return name

    def convert(self, node: Node, depth: int) -> None:
        if all(v is None or v.const is not None for v in node.outputs):
            return  # folded
        self._check_node_types(node)
        converter = self.converters.get((node.domain, node.op_type))
        reason = f"no converter for operator {node.op_type!r}"
        if converter is not None:
            mark = (len(self.builder.lines), dict(self.builder.fields),
                    dict(self.builder.weights))
            try:
                converter.convert(node, Emitter(self.builder, node, self, depth))
                if depth == 0:
                    self.report.note(_op_name(node), "converter")
                return
            except Decline as decline:
                del self.builder.lines[mark[0]:]
                self.builder.fields, self.builder.weights = mark[1], mark[2]
                reason = decline.reason
            except OnnxImportError as error:
                if error.node is None:
                    error.node = node
                    error.args = (f"{_where(node)}: {error.reason}",)
                raise
        body = self.function_body(node, depth, reason)
        if depth == 0:
            self.report.note(_op_name(node), "ONNX function body")
        for inner in simplify.fold(body):
            self.convert(inner, depth + 1)

    def _check_node_types(self, node: Node) -> None:
        for value in [*node.inputs, *node.outputs]:
            if value is None:
                continue
            if value.elem_type == -1:
                raise UnsupportedOperatorError(
                    f"value {value.name!r} is not a tensor (sequences, maps and optionals are "
                    "not supported)", node)
            if value.elem_type and value.elem_type not in DTYPES:
                raise UnsupportedOperatorError(
                    f"value {value.name!r} has element type {type_name(value.elem_type)}, "
                    "which burnish has no dtype for", node)

    def function_body(self, node: Node, depth: int, reason: str) -> list[Node]:
        """The node replaced by its operator's ONNX function body, with types inferred."""
        if depth >= MAX_DEPTH:
            raise UnsupportedOperatorError(f"{reason}; function bodies nest too deep", node)
        function = _function_proto(node)
        if function is None:
            raise UnsupportedOperatorError(reason, node)
        self.counter += 1
        prefix = f"{node.op_type.lower()}{self.counter}_"
        protos = _expand(node, function, prefix)
        opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version
                  for o in function.opset_import}
        # A body that does not import the default domain uses the model's version of it (not
        # the node's own domain's: a preview operator's version 1 is not ONNX's opset 1).
        opsets.setdefault("", self.opsets.get("", node.opset))
        infos = _infer_body(node, protos, opsets)
        table = ValueTable(infos)
        for value in [*node.inputs, *node.outputs]:
            if value is not None:
                table.values[value.name] = value
        return [make_node(p, table, opsets, i) for i, p in enumerate(protos)]


def _op_name(node: Node) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _where(node: Node) -> str:
    from burnish.onnx.errors import where

    return where(node)


def _function_proto(node: Node) -> onnx.FunctionProto | None:
    try:
        schema = onnx.defs.get_schema(node.op_type, node.opset, node.domain)
    except Exception:
        return None
    try:
        if schema.has_context_dependent_function:
            types_ = [type_proto(v).SerializeToString() if v is not None
                      else onnx.TypeProto().SerializeToString() for v in node.inputs]
            versions = [v for v in schema.context_dependent_function_opset_versions
                        if v <= node.opset]
            proto = node.proto
            if versions:
                data = schema.get_context_dependent_function_with_opset_version(
                    max(versions), proto.SerializeToString(), types_)
            else:
                data = schema.get_context_dependent_function(proto.SerializeToString(), types_)
            return onnx.FunctionProto.FromString(data) if data else None
        if schema.has_function:
            versions = [v for v in schema.function_opset_versions if v <= node.opset]
            if versions:
                return onnx.FunctionProto.FromString(
                    schema.get_function_with_opset_version(max(versions)))
            return schema.function_body
    except Exception:
        return None
    return None


def _expand(node: Node, function: onnx.FunctionProto, prefix: str) -> list[onnx.NodeProto]:
    """The function's nodes with its formal inputs and outputs renamed to the node's, other
    names prefixed, and attribute references replaced by the node's attributes."""
    names: dict[str, str] = {}
    for i, formal in enumerate(function.input):
        value = node.input(i)
        names[formal] = value.name if value is not None else ""
    for i, formal in enumerate(function.output):
        value = node.outputs[i] if i < len(node.outputs) else None
        if value is not None:
            names[formal] = value.name
    attributes = {a.name: a for a in node.proto.attribute}
    # A reference to an attribute the node leaves out takes the schema's default.
    try:
        schema = onnx.defs.get_schema(node.op_type, node.opset, node.domain)
        for name, attr in schema.attributes.items():
            if name not in attributes and attr.default_value.type:
                attributes[name] = attr.default_value
    except Exception:
        pass

    def rename(name: str) -> str:
        if name == "":
            return ""
        return names.get(name, prefix + name)

    out = []
    for inner in function.node:
        proto = onnx.NodeProto()
        proto.CopyFrom(inner)
        del proto.input[:]
        del proto.output[:]
        del proto.attribute[:]
        proto.input.extend(rename(n) for n in inner.input)
        proto.output.extend(rename(n) for n in inner.output)
        for attr in inner.attribute:
            if attr.ref_attr_name:
                if attr.ref_attr_name in attributes:
                    new = onnx.AttributeProto()
                    new.CopyFrom(attributes[attr.ref_attr_name])
                    new.name = attr.name
                    proto.attribute.append(new)
            else:
                if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                    raise UnsupportedOperatorError(
                        "its function body holds a subgraph, which is not supported", node)
                proto.attribute.append(attr)
        proto.name = prefix + (inner.name or f"{inner.op_type}_{len(out)}")
        out.append(proto)
    return out


def _infer_body(node: Node, protos: list[onnx.NodeProto],
                opsets: dict[str, int]) -> dict[str, onnx.ValueInfoProto]:
    inputs, initializers = [], []
    for value in node.inputs:
        if value is None:
            continue
        if value.const is not None:
            initializers.append(onnx.numpy_helper.from_array(value.const, value.name))
        inputs.append(helper.make_value_info(value.name, type_proto(value)))
    outputs = [helper.make_value_info(v.name, onnx.TypeProto()) for v in node.outputs
               if v is not None]
    graph = helper.make_graph(protos, "body", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v)
                                                    for d, v in opsets.items()])
    model.ir_version = onnx.IR_VERSION
    try:
        inferred = infer(model)
    except Exception:
        return {}
    infos = value_types(inferred.graph)
    for value in node.outputs:
        if value is not None:
            infos.pop(value.name, None)
    return infos


def survey(source: str | os.PathLike[str] | bytes | onnx.ModelProto,
           converters: dict[tuple[str, str], Converter] | None = None
           ) -> tuple[Counter, dict[str, str]]:
    """Every operator of the model's graph with its node count, and those with neither a
    converter nor an ONNX function body, each with the first node that uses it."""
    converters = converters or registered_converters()
    model = prepare(read_model(source))
    graph = build_graph(model)
    counts: Counter = Counter()
    missing: dict[str, str] = {}
    for node in graph.nodes:
        name = _op_name(node)
        counts[name] += 1
        if (node.domain, node.op_type) not in converters and _function_proto(node) is None:
            missing.setdefault(name, node.name)
    return counts, missing


def import_model(source: str | os.PathLike[str] | bytes | onnx.ModelProto,
                 device: Any = None) -> Any:
    """The ONNX model as a burnish module on ``device``, built in memory (the same module as
    ``generate`` writes). Raises ``UnsupportedOperatorError`` or ``MalformedModelError`` naming
    the node, its operator and the reason."""
    return convert(source).build(device)


def generate(source: str | os.PathLike[str] | bytes | onnx.ModelProto,
             folder: str | os.PathLike[str], name: str = "model",
             format: str | None = None) -> Imported:
    """Write ``folder/NAME.py`` (a burnish module with ``Model`` and ``load``) and its weights
    record; returns the ``Imported`` (source, weights, report)."""
    imported = convert(source)
    imported.write(folder, name, format)
    return imported

