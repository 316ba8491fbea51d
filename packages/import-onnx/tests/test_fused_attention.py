"""Attention as PyTorch exports it (q, k and v gathered off one projection, the heads split off by
Reshape, Transpose, Reshape, scaled products and a softmax) imports as one attention op and
views, and computes what the graph does."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from burnish import Tensor
from burnish.onnx import convert

SHAPE = [2, 3, 5, 4]  # [batch, heads, seq, dim]


def attention_model(mask: bool = False) -> onnx.ModelProto:
    """``qkv [3, 2, 3, 5, 4]`` -> q, k, v by Gather at 0, 1, 2 -> ``softmax(q s @ (k^T s)
    [+ mask]) @ v`` with ``s = dim ** -0.25`` on each side."""
    root = numpy_helper.from_array(np.array([SHAPE[3] ** -0.25], np.float32), "root")
    nodes = [helper.make_node("Constant", [], [f"i{j}"], value=numpy_helper.from_array(
        np.array(j, np.int64))) for j in range(3)]
    nodes += [helper.make_node("Gather", ["qkv", f"i{j}"], [name], axis=0)
              for j, name in enumerate(("q", "k", "v"))]
    nodes += [helper.make_node("Mul", ["q", "root"], ["qs"]),
              helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("Mul", ["kt", "root"], ["kts"]),
              helper.make_node("MatMul", ["qs", "kts"], ["scores"])]
    inputs = [helper.make_tensor_value_info("qkv", TensorProto.FLOAT, [3, *SHAPE])]
    weights = "scores"
    if mask:
        nodes.append(helper.make_node("Add", ["scores", "mask"], ["masked"]))
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT,
                                                    [SHAPE[2], SHAPE[2]]))
        weights = "masked"
    nodes += [helper.make_node("Softmax", [weights], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)],
                              [root])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model)


@pytest.mark.parametrize("backend", ["ndarray", "cpu"])
def test_scaled_products_and_softmax_become_one_attention_op(backend):
    if backend == "cpu":
        pytest.importorskip("burnish.cpu", reason="needs burnish-backend-cpu")
    model = attention_model()
    imported = convert(model)
    assert "F.scaled_dot_product_attention(" in imported.source
    assert "burnish.Attention" in imported.report.table()
    assert "Softmax" not in imported.report.table() and "ops.gather(" not in imported.source
    qkv = np.random.default_rng(0).standard_normal([3, *SHAPE]).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"qkv": qkv})[0]
    got = imported.build(backend)(Tensor.from_data(qkv, device=backend)).to_numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_a_mask_between_product_and_softmax_keeps_the_graph():
    model = attention_model(mask=True)
    imported = convert(model)
    assert "scaled_dot_product_attention" not in imported.source
    rng = np.random.default_rng(1)
    feeds = {"qkv": rng.standard_normal([3, *SHAPE]).astype(np.float32),
             "mask": np.triu(np.full([SHAPE[2]] * 2, -1e9, np.float32), 1)}
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    got = imported.build("ndarray")(*[Tensor.from_data(a, device="ndarray")
                                      for a in feeds.values()]).to_numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("index, index_shape", [(1, []), (-1, []), (2, [1]), (0, [1, 1])])
def test_a_constant_gather_index_is_a_slice(index, index_shape):
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    indices = numpy_helper.from_array(np.array(index, np.int64).reshape(index_shape), "i")
    out_shape = [2, *index_shape, 4]
    graph = helper.make_graph([node], "gather",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                              [indices])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = convert(model)
    assert "ops.gather_one(" in imported.source
    expected = ReferenceEvaluator(model).run(None, {"x": data})[0]
    got = imported.build("ndarray")(Tensor.from_data(data, device="ndarray")).to_numpy()
    np.testing.assert_array_equal(got, expected)


def test_a_constant_gather_index_out_of_range_names_it():
    from burnish.errors import ShapeError
    from burnish.onnx import ops

    x = Tensor.from_data(np.zeros([2, 3], np.float32), device="ndarray")
    with pytest.raises(ShapeError, match="index 3 is out of range for axis 1 of size 3"):
        ops.gather_one(x, 3, 1, [])


def relayout_model(shape: list[int], first: list[int], perm: list[int], to: list[int]
                   ) -> onnx.ModelProto:
    """``x`` -> Reshape(first) -> Transpose(perm) -> Reshape(to) -> y."""
    constants = [numpy_helper.from_array(np.array(v, np.int64), name)
                 for v, name in ((first, "first"), (to, "to"))]
    nodes = [helper.make_node("Reshape", ["x", "first"], ["a"]),
             helper.make_node("Transpose", ["a"], ["t"], perm=perm),
             helper.make_node("Reshape", ["t", "to"], ["y"])]
    graph = helper.make_graph(nodes, "relayout",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, to)],
                              constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("shape, first, perm, to", [
    ([6, 2, 8], [6, 4, 4], [1, 0, 2], [2, 2, 6, 4]),  # heads split off [seq, batch, d]
    ([4, 6], [2, 2, 3, 2], [2, 0, 1, 3], [3, 8]),
    ([3, 1, 4], [12], [0], [2, 6]),
    ([6, 5], [5, 6], [1, 0], [30]),  # no common refinement: the steps as they are
])
def test_reshape_transpose_reshape_is_one_relayout(shape, first, perm, to):
    model = relayout_model(shape, first, perm, to)
    imported = convert(model)
    assert "ops.relayout(" in imported.source
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    expected = ReferenceEvaluator(model).run(None, {"x": data})[0]
    for backend in ("ndarray", "cpu"):
        if backend == "cpu":
            pytest.importorskip("burnish.cpu", reason="needs burnish-backend-cpu")
        x = Tensor.from_data(data, device=backend)
        np.testing.assert_array_equal(imported.build(backend)(x).to_numpy(), expected)


def test_a_relayout_of_a_gap_in_the_layout_is_a_view():
    pytest.importorskip("burnish.cpu", reason="needs burnish-backend-cpu")
    import burnish as bn
    from burnish.onnx import ops

    data = np.arange(6 * 2 * 24, dtype=np.float32).reshape(6, 2, 24)
    x = Tensor.from_data(data, device="cpu")[:, :, 8:16]  # [6, 2, 8] of a wider projection
    backend = bn.backend("cpu")
    runtime = backend.runtime(backend.default_device())
    before = runtime.launches
    y = ops.relayout(x, [6, 4, 4], [1, 0, 2], [2, 2, 6, 4])
    assert runtime.launches == before  # the reshape alone would have copied
    expected = data[:, :, 8:16].reshape(6, 4, 4).transpose(1, 0, 2).reshape(2, 2, 6, 4)
    np.testing.assert_array_equal(y.to_numpy(), expected)


def row_product_model(shape: list[int], perm: list[int], op: str, order: list[int],
                      bias_shape: list[int] | None = None) -> onnx.ModelProto:
    """``x`` -> Transpose(perm) -> Reshape([rows, k]) -> MatMul or Gemm by a constant ``w``
    (Gemm with ``c`` of ``bias_shape``) -> Reshape(leading dims, n) -> Transpose(order) -> y,
    as PyTorch exports ``nn.MultiheadAttention``'s output projection (batch_first)."""
    moved = [shape[p] for p in perm]
    lead = len(order) - 1
    k, n = int(np.prod(moved[lead:])), 3
    rng = np.random.default_rng(2)
    constants = [numpy_helper.from_array(np.array(v, np.int64), name) for v, name in
                 (([int(np.prod(moved[:lead])), k], "rows"), ([*moved[:lead], n], "back"))]
    constants.append(numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32),
                                             "w"))
    product = helper.make_node("MatMul", ["r", "w"], ["p"])
    if op == "Gemm":
        constants.append(numpy_helper.from_array(
            rng.standard_normal(bias_shape).astype(np.float32), "c"))
        product = helper.make_node("Gemm", ["r", "w", "c"], ["p"], alpha=0.5)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=perm),
             helper.make_node("Reshape", ["t", "rows"], ["r"]), product,
             helper.make_node("Reshape", ["p", "back"], ["b"]),
             helper.make_node("Transpose", ["b"], ["y"], perm=order)]
    out = [[*moved[:lead], n][o] for o in order]
    graph = helper.make_graph(nodes, "rows",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                              constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model)


@pytest.mark.parametrize("shape, perm, op, order, bias_shape, moved", [
    # [batch, heads, seq, dim] -> [seq * batch, heads * dim] -> back to [batch, seq, n]
    ([2, 3, 4, 5], [2, 0, 1, 3], "MatMul", [1, 0, 2], None, True),
    ([2, 3, 4, 5], [2, 0, 1, 3], "Gemm", [1, 0, 2], [3], True),
    ([2, 3, 4, 5], [2, 0, 1, 3], "Gemm", [1, 0, 2], [1, 3], True),
    ([4, 2, 3, 5], [0, 2, 1, 3], "MatMul", [1, 0, 2], None, True),
    # A bias per row is no product of rows alone; a first reshape that is a view stays one.
    ([2, 3, 4, 5], [2, 0, 1, 3], "Gemm", [1, 0, 2], [8, 3], False),
    ([4, 2, 6], [0, 1, 2], "MatMul", [1, 0, 2], None, False),
])
def test_a_product_of_rows_between_two_transposes_loses_the_second(shape, perm, op, order,
                                                                     bias_shape, moved):
    model = row_product_model(shape, perm, op, order, bias_shape)
    imported = convert(model)
    permutes = imported.source.count(".permute(")
    assert permutes == (1 if moved else 2), imported.source
    data = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": data})[0]
    for backend in ("ndarray", "cpu"):
        if backend == "cpu":
            pytest.importorskip("burnish.cpu", reason="needs burnish-backend-cpu")
        got = imported.build(backend)(Tensor.from_data(data, device=backend))
        if backend == "cpu":  # plain where moved, else the second transpose's view
            assert got._prim.is_contiguous() == moved
        np.testing.assert_allclose(got.to_numpy(), expected, rtol=1e-5, atol=1e-5)
