"""The importer's view of an ONNX graph: values (typed, shaped, maybe constant) and nodes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import onnx
import onnx.inliner
from burnish.onnx.errors import MalformedModelError, UnsupportedOperatorError
from onnx import helper, numpy_helper, shape_inference, version_converter

#: Opsets older than this are upgraded with onnx's version converter first.
MIN_OPSET = 16

#: ONNX element types burnish has a dtype for, by the dtype's name.
DTYPES = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.INT16: "int16",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.UINT32: "uint32",
    onnx.TensorProto.UINT64: "uint64",
    onnx.TensorProto.FLOAT8E4M3FN: "float8_e4m3fn",
    onnx.TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    onnx.TensorProto.FLOAT8E5M2: "float8_e5m2",
    onnx.TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    onnx.TensorProto.INT4: "int4",
    onnx.TensorProto.UINT4: "uint4",
    onnx.TensorProto.INT2: "int2",
    onnx.TensorProto.UINT2: "uint2",
    onnx.TensorProto.FLOAT4E2M1: "float4_e2m1fn",
    onnx.TensorProto.FLOAT8E8M0: "float8_e8m0fnu",
}


def type_name(elem_type: int) -> str:
    """``FLOAT``, ``UINT16``...: an element type as ONNX names it."""
    return onnx.TensorProto.DataType.Name(elem_type)


@dataclass(eq=False)
class Value:
    """A tensor of the graph: its name, element type and shape when known (a dim is an int, a
    symbol or None), and its contents when it is a constant."""

    name: str
    elem_type: int = 0
    shape: tuple[int | str | None, ...] | None = None
    const: np.ndarray | None = None

    @property
    def dtype(self) -> str | None:
        """burnish's name of the dtype, or None when unknown or without a burnish dtype."""
        return DTYPES.get(self.elem_type)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def static_shape(self) -> list[int] | None:
        """The shape when every dim is a known int."""
        if self.shape is None or not all(isinstance(d, int) for d in self.shape):
            return None
        return list(self.shape)  # type: ignore[arg-type]


@dataclass(eq=False)
class Node:
    """One operation: inputs and outputs are Values (None where an optional one is left out)."""

    name: str
    op_type: str
    domain: str
    inputs: list[Value | None]
    outputs: list[Value | None]
    attrs: dict[str, Any]
    opset: int
    proto: onnx.NodeProto = field(repr=False, default_factory=onnx.NodeProto)

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def input(self, i: int) -> Value | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def const(self, i: int) -> np.ndarray | None:
        """Input ``i``'s value when it is a constant."""
        value = self.input(i)
        return None if value is None else value.const

    def ints(self, i: int) -> list[int] | None:
        """Input ``i`` as a list of ints when it is a constant."""
        array = self.const(i)
        return None if array is None else [int(v) for v in np.asarray(array).reshape(-1)]


@dataclass(eq=False)
class Graph:
    """A model's main graph: inputs (constants excluded), outputs and nodes in order."""

    name: str
    inputs: list[Value]
    outputs: list[Value]
    nodes: list[Node]
    opsets: dict[str, int]
    source: str = ""
    producer: str = ""
    table: ValueTable | None = field(default=None, repr=False)


def attribute_value(attr: onnx.AttributeProto) -> Any:
    """An attribute as a Python value: tensors as arrays, strings as str, graphs as protos."""
    value = helper.get_attribute_value(attr)
    if attr.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(value)
    if attr.type == onnx.AttributeProto.STRING:
        return value.decode("utf-8", "replace")
    if attr.type == onnx.AttributeProto.STRINGS:
        return [v.decode("utf-8", "replace") for v in value]
    if attr.type == onnx.AttributeProto.INTS:
        return [int(v) for v in value]
    if attr.type == onnx.AttributeProto.FLOATS:
        return [float(v) for v in value]
    return value


def read_model(source: str | os.PathLike[str] | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """The model from a path, serialized bytes or a ModelProto; MalformedModelError when it
    cannot be read or fails onnx's checker (naming the file, as a plain path, when it is one)."""
    file = None
    if isinstance(source, onnx.ModelProto):
        model = source
    elif isinstance(source, bytes):
        try:
            model = onnx.load_from_string(source)
        except Exception as error:
            raise MalformedModelError(f"not an ONNX model: {_one_line(error)}") from None
    else:
        path = Path(source)
        file = str(path)
        if not path.is_file():
            reason = "not a file" if path.exists() else "no such file"
            raise MalformedModelError(reason, file=file)
        try:
            model = onnx.load(file)
        except Exception as error:
            raise MalformedModelError(f"not an ONNX model: {_one_line(error)}",
                                      file=file) from None
    if not model.graph.node and not model.graph.output:
        raise MalformedModelError("not an ONNX model: it holds no graph", file=file)
    try:
        onnx.checker.check_model(model)
    except Exception as error:
        raise MalformedModelError(f"onnx's checker rejects the model: {_one_line(error)}",
                                  file=file) from None
    return model


def _one_line(error: Exception) -> str:
    """An error's message on one line (onnx's checker writes its context on several)."""
    return " ".join(str(error).split()) or type(error).__name__


def default_opset(model: onnx.ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return opset.version
    return 0  # only other domains' operators


def prepare(model: onnx.ModelProto) -> onnx.ModelProto:
    """Local functions inlined, an opset older than MIN_OPSET upgraded, shapes inferred."""
    if model.functions:
        model = onnx.inliner.inline_local_functions(model)
    version = default_opset(model)
    if 0 < version < 9 and any(n.op_type == "Scan" and n.domain in ("", "ai.onnx")
                               for n in model.graph.node):
        # Scan-8 has a batch axis and sequence lengths; the version converter drops the
        # batch axis from the graph's inputs, which would silently change the model.
        raise UnsupportedOperatorError(
            f"Scan of opset {version} (a batch axis and sequence lengths), which onnx's "
            "version converter cannot upgrade faithfully")
    if 0 < version < MIN_OPSET:
        try:
            model = version_converter.convert_version(model, MIN_OPSET)
        except Exception as error:
            raise UnsupportedOperatorError(
                f"opset {version} is older than {MIN_OPSET} and onnx's version converter could "
                f"not upgrade it: {str(error).strip().splitlines()[0]}") from None
    return infer(model)


def infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx's shape inference with data propagation; the model as it was if inference fails."""
    try:
        return shape_inference.infer_shapes(model, check_type=False, strict_mode=False,
                                            data_prop=True)
    except Exception:
        return model


def _type_of(value_info: onnx.ValueInfoProto) -> tuple[int, tuple | None]:
    t = value_info.type
    if not t.HasField("tensor_type"):
        return -1, None  # sequences, maps, optionals: no tensor type
    elem = t.tensor_type.elem_type
    if not t.tensor_type.HasField("shape"):
        return elem, None
    dims = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return elem, tuple(dims)


def value_types(graph: onnx.GraphProto) -> dict[str, onnx.ValueInfoProto]:
    infos = {}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        infos[info.name] = info
    return infos


class ValueTable:
    """Values by name: made once, so that every node sees the same Value object. A
    subgraph's table has its enclosing graph's as ``parent``: names it does not make itself
    (``local``) are the enclosing graph's values."""

    def __init__(self, infos: dict[str, onnx.ValueInfoProto],
                 parent: ValueTable | None = None, local: set[str] | None = None):
        self.infos = infos
        self.values: dict[str, Value] = {}
        self.parent = parent
        self.local = local

    def get(self, name: str) -> Value:
        value = self.values.get(name)
        if value is None:
            if self.parent is not None and self.local is not None and name not in self.local:
                return self.parent.get(name)
            value = Value(name)
            if name in self.infos:
                value.elem_type, value.shape = _type_of(self.infos[name])
            self.values[name] = value
        return value

    def constant(self, name: str, array: np.ndarray, elem_type: int) -> Value:
        value = self.get(name)
        value.const = array
        value.elem_type = elem_type
        value.shape = tuple(array.shape)
        return value


def make_node(proto: onnx.NodeProto, table: ValueTable, opsets: dict[str, int],
              index: int) -> Node:
    domain = "" if proto.domain == "ai.onnx" else proto.domain
    inputs = [table.get(name) if name else None for name in proto.input]
    outputs = [table.get(name) if name else None for name in proto.output]
    attrs = {a.name: attribute_value(a) for a in proto.attribute}
    name = proto.name or f"{proto.op_type}_{index}"
    return Node(name, proto.op_type, domain, inputs, outputs, attrs, opsets.get(domain, 1), proto)


def build_graph(model: onnx.ModelProto, source: str = "") -> Graph:
    """The importer's graph of a prepared model: initializers and graph inputs with an
    initializer become constants."""
    graph = model.graph
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    table = ValueTable(value_types(graph))
    for tensor in graph.initializer:
        table.constant(tensor.name, numpy_helper.to_array(tensor), tensor.data_type)
    if graph.sparse_initializer:
        raise UnsupportedOperatorError("sparse initializers are not supported")
    inputs = [table.get(i.name) for i in graph.input if table.get(i.name).const is None]
    nodes = [make_node(p, table, opsets, i) for i, p in enumerate(graph.node)]
    outputs = [table.get(o.name) for o in graph.output]
    return Graph(graph.name or "model", inputs, outputs, nodes, opsets, source,
                 f"{model.producer_name} {model.producer_version}".strip(), table)


def build_subgraph(proto: onnx.GraphProto, parent: ValueTable, opsets: dict[str, int]
                   ) -> Graph:
    """A subgraph (If's branches, Loop's and Scan's bodies): its inputs, outputs and nodes;
    the names it reads without making them are values of the enclosing graphs."""
    local = {i.name for i in proto.input} | {t.name for t in proto.initializer}
    local |= {name for node in proto.node for name in node.output if name}
    table = ValueTable(value_types(proto), parent, local)
    for tensor in proto.initializer:
        table.constant(tensor.name, numpy_helper.to_array(tensor), tensor.data_type)
    inputs = [table.get(i.name) for i in proto.input]
    nodes = [make_node(p, table, opsets, i) for i, p in enumerate(proto.node)]
    outputs = [table.get(o.name) for o in proto.output]
    return Graph(proto.name or "body", inputs, outputs, nodes, opsets, table=table)


def type_proto(value: Value) -> onnx.TypeProto:
    """A TypeProto for a value (for context-dependent function bodies and inference)."""
    shape = None if value.shape is None else [d if d is not None else None for d in value.shape]
    return helper.make_tensor_type_proto(value.elem_type or onnx.TensorProto.FLOAT, shape)
