"""Graph simplification before conversion: constant folding, dead nodes, and fusing common
patterns (MatMul + Add into Linear, the erf form of GELU, attention's products and softmax)
into one node."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import numpy as np

import onnx
from burnish.onnx.errors import FoldWarning, where
from burnish.onnx.graph import Graph, Node, Value
from onnx import helper

#: Operators whose output is not a function of their inputs: never folded.
RANDOM = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
          "Bernoulli", "Dropout"}
#: A folded constant larger than this stays a computation (a model file should not grow).
FOLD_LIMIT = 1 << 20
#: How much of the reference evaluator's error a fold warning quotes.
MESSAGE_LENGTH = 300
#: The domain of the importer's own fused operators (``burnish.Linear``).
FUSED = "burnish"


def numpy_elem_type(array: np.ndarray) -> int:
    try:
        return helper.np_dtype_to_tensor_dtype(array.dtype)
    except Exception:
        return 0


def fold(nodes: Iterable[Node]) -> list[Node]:
    """The nodes left once every node computable from constants is computed (by onnx's
    reference implementation) and its outputs made constants."""
    kept = []
    for node in nodes:
        if not _fold_node(node):
            kept.append(node)
    return kept


def _fold_node(node: Node) -> bool:
    if node.domain not in ("", "ai.onnx") or node.op_type in RANDOM:
        return False
    if any(isinstance(v, onnx.GraphProto) for v in node.attrs.values()):
        return False
    if node.op_type in ("Shape", "Size") and node.inputs and node.inputs[0] is not None:
        shape = node.inputs[0].static_shape()
        if shape is None:
            return False
        if node.op_type == "Size":
            result = np.array(math.prod(shape), np.int64)
        else:
            rank = len(shape)
            start, end = node.attr("start", 0), node.attr("end", rank)
            start = min(max(start + rank if start < 0 else start, 0), rank)
            end = min(max(end + rank if end < 0 else end, 0), rank)
            result = np.array(shape[start:end], np.int64)
        _set_const(node.outputs[0], result)
        return True
    inputs = [v for v in node.inputs if v is not None]
    if any(v.const is None for v in inputs):
        return False
    if not inputs and node.op_type not in ("Constant",):
        return False
    if node.op_type in ("Identity",) and len(inputs) == 1:
        _set_const(node.outputs[0], inputs[0].const)
        return True
    if node.op_type == "DequantizeLinear":
        result = _dequantize(node)
        if result is not None:
            _set_const(node.outputs[0], result)
            return True
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            results = _evaluate(node, inputs)
    except Exception as error:
        message = " ".join(str(error).split())[:MESSAGE_LENGTH] or "no message"
        warnings.warn(f"{where(node)}: not computed at import, forward computes it: onnx's "
                      f"reference evaluator failed with {type(error).__name__}: {message}",
                      FoldWarning, stacklevel=2)
        return False
    if any(not isinstance(r, np.ndarray) or r.size > FOLD_LIMIT for r in results):
        return False
    for value, result in zip([v for v in node.outputs if v is not None], results):
        _set_const(value, result)
    return True


def _dequantize(node: Node) -> np.ndarray | None:
    """A DequantizeLinear of integer constants (a QDQ model's weights and int32 biases),
    ``(x - zero_point) * scale`` in float32, then the scale's dtype, as ONNX defines it at
    every opset (onnx's reference evaluator lacks the versions before 19); None for blocks and
    float8 inputs, which the evaluator computes."""
    x, scale, point = node.const(0), node.const(1), node.const(2)
    if x is None or scale is None or x.dtype.kind not in "iu" or node.attr("block_size", 0):
        return None
    axis = node.attr("axis", 1)

    def along(value: np.ndarray) -> np.ndarray:
        if value.size == 1:
            return value.reshape(())
        shape = [1] * x.ndim
        shape[axis] = value.size
        return value.reshape(shape)

    y = x.astype(np.float32)
    if point is not None:
        y = y - along(point).astype(np.float32)
    return (y * along(scale).astype(np.float32)).astype(scale.dtype)


def _evaluate(node: Node, inputs: list[Value]) -> list:
    """The node's outputs computed by onnx's reference evaluator from its constant inputs.

    The node is evaluated as a one-node model whose inputs are typed: operators defined by a
    context-dependent function body (Gelu, GroupNormalization...) cannot be evaluated
    without their inputs' types."""
    from onnx.reference import ReferenceEvaluator

    proto = helper.make_node(node.op_type, [v.name if v else "" for v in node.inputs],
                             [v.name if v else "" for v in node.outputs], domain=node.domain)
    proto.attribute.extend(node.proto.attribute)
    feeds = {v.name: v.const for v in inputs}
    typed = [helper.make_tensor_value_info(name, _elem_type(node, name, array), array.shape)
             for name, array in feeds.items()]
    outputs = [helper.make_value_info(v.name, onnx.TypeProto()) for v in node.outputs
               if v is not None]
    graph = helper.make_graph([proto], "fold", typed, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", node.opset)])
    return ReferenceEvaluator(model).run(None, feeds)


def _elem_type(node: Node, name: str, array: np.ndarray) -> int:
    for value in node.inputs:
        if value is not None and value.name == name and value.elem_type > 0:
            return value.elem_type
    return numpy_elem_type(array)


def _set_const(value: Value | None, array: np.ndarray) -> None:
    if value is None:
        return
    value.const = np.asarray(array)
    elem = numpy_elem_type(value.const)
    if elem:
        value.elem_type = elem
    value.shape = tuple(value.const.shape)


def remove_dead(graph: Graph) -> None:
    """Drop the nodes none of whose outputs reaches a graph output."""
    needed = {v.name for v in graph.outputs}
    kept = []
    for node in reversed(graph.nodes):
        if any(v is not None and v.name in needed for v in node.outputs):
            kept.append(node)
            needed.update(v.name for v in node.inputs if v is not None)
            for attr in node.attrs.values():
                if isinstance(attr, onnx.GraphProto):
                    needed.update(_outer_names(attr))
    graph.nodes = kept[::-1]


def _outer_names(graph: onnx.GraphProto) -> set[str]:
    names = set()
    for node in graph.node:
        names.update(node.input)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                names.update(_outer_names(attr.g))
    return names


def _consumers(graph: Graph) -> dict[str, list[Node]]:
    users: dict[str, list[Node]] = {}
    for node in graph.nodes:
        for v in node.inputs:
            if v is not None:
                users.setdefault(v.name, []).append(node)
        for attr in node.attrs.values():
            if isinstance(attr, onnx.GraphProto):  # read inside a subgraph: not fusable
                for name in _outer_names(attr):
                    users.setdefault(name, []).append(None)  # type: ignore[arg-type]
    for v in graph.outputs:
        users.setdefault(v.name, []).append(None)  # type: ignore[arg-type]
    return users


def _producers(graph: Graph) -> dict[str, Node]:
    """The node that makes each value, by the value's name."""
    return {v.name: n for n in graph.nodes for v in n.outputs if v is not None}


def _only_user(users: dict[str, list[Node]], value: Value, op_type: str) -> Node | None:
    found = users.get(value.name, [])
    if len(found) == 1 and found[0] is not None and found[0].op_type == op_type \
            and found[0].domain == "":
        return found[0]
    return None


def _scalar(value: Value | None) -> float | None:
    if value is None or value.const is None or value.const.size != 1:
        return None
    return float(np.asarray(value.const).reshape(-1)[0])


def fuse(graph: Graph) -> None:
    """Replace recognised patterns by one node: ``MatMul`` by a constant matrix (and the
    ``Add`` of a constant bias) becomes ``burnish.Linear``; ``x * 0.5 * (1 + erf(x / sqrt(2)))``
    becomes ``Gelu``; ``Softmax(q @ k^T, scaled) @ v`` becomes ``burnish.Attention``;
    ``Reshape``, ``Transpose``, ``Reshape`` becomes ``burnish.Relayout``; a product of rows
    between two transposes loses the second (``_move_row_transpose``)."""
    users = _consumers(graph)
    producers = _producers(graph)
    removed: set[int] = set()
    replaced: dict[int, Node] = {}
    for node in graph.nodes:
        if id(node) in removed or node.domain != "":
            continue
        if node.op_type == "MatMul":
            _fuse_linear(node, users, removed, replaced)
        elif node.op_type == "Erf":
            _fuse_gelu(node, producers, users, removed, replaced)
        elif node.op_type == "Softmax":
            _fuse_attention(node, producers, users, removed, replaced)
        elif node.op_type == "Reshape":
            _fuse_relayout(node, users, removed, replaced)
        elif node.op_type == "Transpose":
            _move_row_transpose(node, users, removed, replaced)
    graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed]


def _fuse_linear(node: Node, users, removed: set[int], replaced: dict[int, Node]) -> None:
    x, weight = node.input(0), node.input(1)
    if weight is None or weight.const is None or weight.const.ndim != 2 \
            or weight.const.dtype.kind != "f" or x is None or x.const is not None:
        return
    if x.rank is not None and x.rank < 2:
        return  # a vector times a matrix: no batch dim for Linear's output
    out = node.outputs[0]
    bias, last = None, node
    add = _only_user(users, out, "Add")
    if add is not None:
        other = add.input(1) if add.input(0) is out else add.input(0)
        if other is not None and other.const is not None and other.const.ndim == 1 \
                and other.const.shape[0] == weight.const.shape[1] and other.const.dtype.kind == "f":
            bias, last = other, add
    inputs = [x, weight] + ([bias] if bias is not None else [])
    fused = Node(node.name, "Linear", FUSED, inputs, [last.outputs[0]], {}, 1, node.proto)
    replaced[id(node)] = fused
    if last is not node:
        removed.add(id(last))


def _fuse_gelu(erf: Node, producers: dict[str, Node], users, removed: set[int],
               replaced: dict[int, Node]) -> None:
    div = producers.get(erf.inputs[0].name) if erf.inputs[0] is not None else None
    if div is None or div.op_type not in ("Div", "Mul"):
        return
    c = _scalar(div.input(1))
    if c is None or not (abs(c - math.sqrt(2)) < 1e-3 if div.op_type == "Div"
                         else abs(c - 1 / math.sqrt(2)) < 1e-3):
        return
    x = div.input(0)
    if len(users.get(div.outputs[0].name, [])) != 1:
        return
    add = _only_user(users, erf.outputs[0], "Add")
    if add is None or _scalar(add.input(1) if add.input(0) is erf.outputs[0]
                              else add.input(0)) != 1.0:
        return
    mul = _only_user(users, add.outputs[0], "Mul")
    if mul is None:
        return
    other = mul.input(1) if mul.input(0) is add.outputs[0] else mul.input(0)
    if other is x:
        half = _only_user(users, mul.outputs[0], "Mul")
        if half is None:
            return
        h = half.input(1) if half.input(0) is mul.outputs[0] else half.input(0)
        if _scalar(h) != 0.5:
            return
        chain, last = [div, erf, add, mul, half], half
    elif _scalar(other) == 0.5:
        # x * (0.5 * (1 + erf(x / sqrt(2)))), as PyTorch's exporter writes it
        outer = _only_user(users, mul.outputs[0], "Mul")
        if outer is None:
            return
        if (outer.input(1) if outer.input(0) is mul.outputs[0] else outer.input(0)) is not x:
            return
        chain, last = [div, erf, add, mul, outer], outer
    else:
        # 0.5 * x first: other = Mul(x, 0.5)
        half = producers.get(other.name) if other is not None else None
        if half is None or half.op_type != "Mul" or len(users.get(other.name, [])) != 1:
            return
        operands = half.inputs
        if not ((operands[0] is x and _scalar(operands[1]) == 0.5)
                or (operands[1] is x and _scalar(operands[0]) == 0.5)):
            return
        chain, last = [half, div, erf, add, mul], mul
    fused = Node(erf.name, "Gelu", "", [x], [last.outputs[0]], {}, 20, erf.proto)
    for n in chain:
        removed.add(id(n))
    removed.discard(id(last))
    replaced[id(last)] = fused


def _fuse_relayout(first: Node, users, removed: set[int], replaced: dict[int, Node]) -> None:
    """``Reshape(a)``, ``Transpose(perm)``, ``Reshape(b)`` with constant positive shapes, the
    intermediates read by nothing else (attention's heads split off a projection), becomes
    ``burnish.Relayout``: the three steps at once, which is a view where the first reshape
    alone would copy (``ops.relayout``)."""
    if id(first) in replaced or first.input(0) is None:
        return
    shape = first.ints(1)
    if shape is None or not all(d > 0 for d in shape):
        return
    transpose = _only_user(users, first.outputs[0], "Transpose")
    perm = None if transpose is None else transpose.attr("perm")
    if perm is None or sorted(perm) != list(range(len(shape))):
        return
    last = _only_user(users, transpose.outputs[0], "Reshape")  # type: ignore[union-attr]
    to = None if last is None else last.ints(1)
    if to is None or not all(d > 0 for d in to) or math.prod(to) != math.prod(shape):
        return
    if any(id(n) in removed or id(n) in replaced for n in (transpose, last)):
        return
    fused = Node(first.name, "Relayout", FUSED, [first.input(0)], [last.outputs[0]],  # type: ignore[union-attr]
                 {"shape": list(shape), "perm": list(perm), "to": list(to)}, 1, first.proto)
    removed.update((id(first), id(transpose)))
    replaced[id(last)] = fused


def _move_row_transpose(first: Node, users, removed: set[int], replaced: dict[int, Node]
                        ) -> None:
    """``Transpose(p)``, ``Reshape([m, k])``, a product of each row by one matrix (``MatMul``
    or ``Gemm`` by a 2-d ``b``), ``Reshape`` back to the leading dims, ``Transpose(q)`` of
    those (the intermediates read by nothing else: ``nn.MultiheadAttention``'s output
    projection, exported with batch_first) becomes ``Transpose(r)``, ``Reshape``, the
    product, ``Reshape``: the rows taken in the final order to begin with (``r``, ``p``'s
    leading dims in ``q``'s order), so the result is plain instead of a transposed view that
    every later op reads at a stride. Only where the first reshape copies anyway (for a
    plain input): there, the second transpose is all that changes."""
    x, perm = first.input(0), first.attr("perm")
    dims = None if x is None else x.static_shape()
    if dims is None or perm is None or sorted(perm) != list(range(len(dims))) \
            or id(first) in replaced:
        return
    flatten = _only_user(users, first.outputs[0], "Reshape")
    rows = None if flatten is None else flatten.ints(1)
    if flatten is None or rows is None or len(rows) != 2 or not all(d > 0 for d in rows):
        return
    product = (_only_user(users, flatten.outputs[0], "MatMul")
               or _only_user(users, flatten.outputs[0], "Gemm"))
    if product is None or product.input(0) is not flatten.outputs[0] or not _row_wise(product):
        return
    back = _only_user(users, product.outputs[0], "Reshape")
    restored = None if back is None else back.ints(1)
    moved = [dims[p] for p in perm]
    lead = len(restored) - 1 if restored else 0
    if back is None or restored is None or lead < 1 or restored[:lead] != moved[:lead] \
            or not all(d > 0 for d in restored) \
            or math.prod(moved[:lead]) != rows[0] or math.prod(moved[lead:]) != rows[1]:
        return
    last = _only_user(users, back.outputs[0], "Transpose")
    order = None if last is None else last.attr("perm")
    if last is None or order is None or sorted(order) != list(range(lead + 1)) \
            or order[lead] != lead:
        return
    if any(id(n) in removed or id(n) in replaced for n in (flatten, product, back, last)) \
            or _viewable(dims, perm, rows):
        return
    now = [perm[o] for o in order[:lead]] + list(perm[lead:])
    first.attrs = {**first.attrs, "perm": now}
    if first.outputs[0] is not None:
        first.outputs[0].shape = tuple(dims[p] for p in now)
    target = [restored[o] for o in order]
    shape = Value(f"{back.name}_rows_shape", onnx.TensorProto.INT64, (len(target),),
                  np.array(target, np.int64))
    back.inputs = [back.input(0), shape]
    back.outputs = [last.outputs[0]]
    removed.add(id(last))


def _row_wise(product: Node) -> bool:
    """Whether ``product`` (MatMul or Gemm of a 2-d ``a``) makes each output row from the
    same row of ``a`` alone: a 2-d ``b``, and Gemm's ``c`` (if any) the same for every row."""
    b = product.input(1)
    if b is None or b.rank != 2:
        return False
    if product.op_type == "MatMul":
        return True
    if product.attr("transA", 0):
        return False
    c = product.input(2)
    return c is None or (c.shape is not None and (len(c.shape) < 2 or c.shape[0] == 1))


def _viewable(dims: list[int], perm: list[int], rows: list[int]) -> bool:
    """Whether a plain tensor of ``dims``, transposed by ``perm``, reshapes to ``rows``
    without a copy."""
    strides = [0] * len(dims)
    step = 1
    for d in reversed(range(len(dims))):
        strides[d], step = step, step * dims[d]
    plain = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), dims, strides)
    try:
        np.reshape(plain.transpose(perm), rows, copy=False)
    except ValueError:
        return False
    return True


#: The dtypes of the attention ``_fuse_attention`` hands to one op (``ops.softmax`` rounds
#: half floats step by step as ONNX's reference does; the fused op would not).
ATTENTION_TYPES = ("float32", "float64")


def _scaled(value: Value, producers: dict[str, Node], users,
            chain: list[Node]) -> tuple[Value, float]:
    """``value`` with the scalings by constants that made it taken off (``Mul`` by a constant,
    ``Div`` by one; each read by nothing else, appended to ``chain``): what was scaled and by
    how much in all."""
    scale = 1.0
    while True:
        node = producers.get(value.name)
        if node is None or node.domain != "" or node.op_type not in ("Mul", "Div") \
                or len(users.get(value.name, [])) != 1:
            return value, scale
        x, c = node.input(0), _scalar(node.input(1))
        if c is None and node.op_type == "Mul":
            x, c = node.input(1), _scalar(node.input(0))
        constant = node.input(1) if x is node.input(0) else node.input(0)
        if x is None or c is None or c == 0.0 or constant is None \
                or (constant.rank or 0) > (x.rank or 0):
            return value, scale
        scale *= c if node.op_type == "Mul" else 1.0 / c
        chain.append(node)
        value = x


def _fuse_attention(softmax: Node, producers: dict[str, Node], users, removed: set[int],
                    replaced: dict[int, Node]) -> None:
    """``Softmax(s * (q @ kt), last axis) @ v`` (the scale ``s`` from constant factors on the
    scores or on either operand, as PyTorch exports ``nn.MultiheadAttention``) becomes
    ``burnish.Attention(q, kt, v)`` with ``scale``: one attention op for the backend, where the
    scores need never be stored. Only ``[batch, heads, seq, dim]`` operands of known shapes
    and float32/float64, every intermediate read by nothing else, no mask."""
    scores = softmax.input(0)
    axis = softmax.attr("axis", -1 if softmax.opset >= 13 else 1)
    if scores is None or scores.rank != 4 or axis not in (-1, 3):
        return
    after = _only_user(users, softmax.outputs[0], "MatMul")
    if after is None or after.input(0) is not softmax.outputs[0]:
        return
    chain = [softmax]
    scores, scale = _scaled(scores, producers, users, chain)
    product = producers.get(scores.name)
    if product is None or product.op_type != "MatMul" or product.domain != "" \
            or len(users.get(scores.name, [])) != 1:
        return
    chain.append(product)
    operands = []
    for operand in product.inputs[:2]:
        if operand is None:
            return
        operand, factor = _scaled(operand, producers, users, chain)
        operands.append(operand)
        scale *= factor
    (q, kt), v = operands, after.input(1)
    shapes = [x.static_shape() if x is not None else None for x in (q, kt, v)]
    if any(s is None or len(s) != 4 for s in shapes) or v is None:
        return
    (batch, heads, _, dim), k_shape, v_shape = shapes  # type: ignore[misc]
    if k_shape[:3] != [batch, heads, dim] or v_shape[:3] != [batch, heads, k_shape[3]] \
            or k_shape[3] == 0 or {q.dtype, kt.dtype, v.dtype} - set(ATTENTION_TYPES) \
            or len({q.dtype, kt.dtype, v.dtype}) != 1:
        return
    if any(id(n) in removed or id(n) in replaced for n in (*chain, after)):
        return
    fused = Node(softmax.name, "Attention", FUSED, [q, kt, v], [after.outputs[0]],
                 {"scale": scale}, 1, softmax.proto)
    removed.update(id(n) for n in chain)
    replaced[id(after)] = fused  # where the second product was: v is made by then


#: The 8-bit types whose DequantizeLinear products run on the integers (``fuse_qdq``).
QDQ_TYPES = ("int8", "uint8")


def fuse_qdq(graph: Graph) -> None:
    """QDQ models (ONNX's quantized form: each product's inputs come through
    DequantizeLinear) run their products on the integers: ``MatMul``, ``Gemm`` and ``Conv``
    of two DequantizeLinear outputs become ``burnish.QdqMatMul`` / ``burnish.QdqConv``, which
    take the 8-bit values, scales and zero points, where the pattern allows: the activation
    8-bit with one scale, the weight a constant 8-bit tensor with one scale or one per output
    channel, float32 scales, no blocks. Runs before constant folding, which would otherwise
    turn the weight's DequantizeLinear into a float constant; the rest is left as it was."""
    users = _consumers(graph)
    producers = _producers(graph)
    replaced: dict[int, Node] = {}
    removed: set[int] = set()
    for node in graph.nodes:
        if node.domain != "" or node.op_type not in ("MatMul", "Gemm", "Conv"):
            continue
        x = _dequantized(node.input(0), producers)
        w = _dequantized(node.input(1), producers, constant=True)
        if x is None or w is None or x.attr("block_size", 0) or w.attr("block_size", 0):
            continue
        weight = w.input(0).const  # type: ignore[union-attr]
        if node.op_type == "Conv":
            fused = _qdq_conv(node, x, w, weight)
        else:
            fused = _qdq_product(node, x, w, weight, users, removed)
        if fused is not None:
            replaced[id(node)] = fused
    graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed]


def _dequantized(value: Value | None, producers: dict[str, Node],
                 constant: bool = False) -> Node | None:
    """The DequantizeLinear making ``value`` when its input is 8-bit (a constant, with
    ``constant``) and its scale and zero point are float32 and 8-bit constants."""
    node = None if value is None else producers.get(value.name)
    if node is None or node.op_type != "DequantizeLinear" or node.domain != "":
        return None
    q, scale, point = node.input(0), node.input(1), node.input(2)
    if q is None or q.dtype not in QDQ_TYPES or (constant and q.const is None) \
            or scale is None or scale.const is None or scale.const.dtype != np.float32:
        return None
    if point is not None and (point.const is None or point.dtype != q.dtype
                              or point.const.shape != scale.const.shape):
        return None
    if scale.const.size != 1 and scale.const.ndim != 1:
        return None
    return node


def _per_channel_axis(w: Node, weight: np.ndarray, axis: int) -> bool:
    """Whether the weight's scale is one value, or one per index of ``axis``."""
    scale = w.input(1).const  # type: ignore[union-attr]
    if scale.size == 1:
        return True
    given = w.attr("axis", 1)
    given = given + weight.ndim if given < 0 else given
    return given == axis and scale.shape == (weight.shape[axis],)


def _qdq_product(node: Node, x: Node, w: Node, weight: np.ndarray, users,
                 removed: set[int]) -> Node | None:
    if weight.ndim != 2 or x.input(1).const.size != 1:  # type: ignore[union-attr]
        return None
    bias: Value | None = None
    last = node
    if node.op_type == "Gemm":
        if node.attr("transA", 0) or node.attr("alpha", 1.0) != 1.0 \
                or node.attr("beta", 1.0) != 1.0:
            return None
        axis = 0 if node.attr("transB", 0) else 1
        bias = node.input(2)
        if bias is not None and bias.rank not in (None, 1):
            return None  # a matrix C: broadcast rules beyond a bias row
    else:
        axis = 1
        add = _only_user(users, node.outputs[0], "Add")
        if add is not None:
            other = add.input(1) if add.input(0) is node.outputs[0] else add.input(0)
            if other is not None and other.rank == 1 and other.dtype == "float32":
                bias, last = other, add
                removed.add(id(add))
    if not _per_channel_axis(w, weight, axis):
        return None
    inputs = [x.input(0), x.input(1), x.input(2), w.input(0), w.input(1), w.input(2), bias]
    attrs = {"w_axis": axis, "trans_b": int(node.op_type == "Gemm" and axis == 0)}
    return Node(node.name, "QdqMatMul", FUSED, inputs, [last.outputs[0]], attrs, 1, node.proto)


def _qdq_conv(node: Node, x: Node, w: Node, weight: np.ndarray) -> Node | None:
    if not 3 <= weight.ndim <= 5 or x.input(1).const.size != 1:  # type: ignore[union-attr]
        return None
    if not _per_channel_axis(w, weight, 0):
        return None
    inputs = [x.input(0), x.input(1), x.input(2), w.input(0), w.input(1), w.input(2),
              node.input(2)]
    return Node(node.name, "QdqConv", FUSED, inputs, list(node.outputs), dict(node.attrs), 1,
                node.proto)
