"""The generated source reads well and keeps to the project's style: names cut at word
boundaries, lines within 100 columns, large constants as parameters, not literals; constants
computed at import, and a warning naming the node where they cannot be."""

from __future__ import annotations

import importlib.util
import re
import warnings
from math import erf, sqrt

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from burnish import Tensor
from burnish.onnx import FoldWarning, convert

WIDTH = 100


def model(nodes, inputs, outputs, initializers=(), opset=18, name="g") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, elem_type, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def forward_variables(source: str) -> list[str]:
    """The names forward assigns, in order."""
    body = source.split("def forward", 1)[1]
    return [name for name in re.findall(r"^ {8}(\w+) = ", body, flags=re.MULTILINE)
            if name != "device"]


def test_long_names_are_shortened_at_word_boundaries_and_stay_unique():
    # The names PyTorch's TorchScript exporter gives: scopes, with a container's repeated.
    names = ["/features/denseblock1/denselayer1/norm1/Relu_output_0",
             "/features/denseblock2/denselayer1/norm1/Relu_output_0",
             "/layer2/layer2.0/downsample/downsample.1/Relu_output_0",
             "/encoder/layer.0/attention/output/dense/Relu_output_0",
             "/decoder/layer.0/attention/output/dense/Relu_output_0"]
    nodes = [helper.make_node("Relu", [a], [b]) for a, b in zip(["x", *names], names)]
    imported = convert(model(nodes, [tensor("x", TensorProto.FLOAT, [2])],
                             [tensor(names[-1], TensorProto.FLOAT, [2])]))
    assert forward_variables(imported.source) == [
        "denseblock1_denselayer1_norm1_relu", "denseblock2_denselayer1_norm1_relu",
        "layer2_0_downsample_1_relu", "layer_0_attention_output_dense_relu",
        "decoder_layer_0_attention_output_dense_relu"]
    built = imported.build("ndarray")
    assert built(Tensor.from_data([-1.0, 2.0])).tolist() == [0.0, 2.0]


def test_generated_lines_fit_in_100_columns():
    """A Concat of many long-named inputs, a long int constant float32 cannot hold (it stays
    a literal), a graph name and a call chain longer than a line."""
    count = 40
    relus = [helper.make_node("Relu", ["x"], [f"/encoder/block{i}/feed_forward/activation"])
             for i in range(count)]
    big = (np.arange(60, dtype=np.int64) + 2**40).reshape(3, 20)
    nodes = [*relus,
             helper.make_node("Concat", [n.output[0] for n in relus], ["cat"], axis=0),
             helper.make_node("Add", ["big", "offsets"], ["sum"])]
    imported = convert(model(
        nodes, [tensor("x", TensorProto.FLOAT, [2]), tensor("offsets", TensorProto.INT64, [3, 20])],
        [tensor("cat", TensorProto.FLOAT, [2 * count]), tensor("sum", TensorProto.INT64, [3, 20])],
        [numpy_helper.from_array(big, "big")], name="a graph whose name is long " * 8))
    long_lines = [line for line in imported.source.splitlines() if len(line) > WIDTH]
    assert not long_lines, "\n".join(long_lines)
    built = imported.build("ndarray")
    x = np.array([-1.0, 3.0], np.float32)
    offsets = np.ones((3, 20), np.int64)
    cat, total = built(Tensor.from_data(x), Tensor.from_data(offsets))
    np.testing.assert_array_equal(cat.to_numpy(), np.tile(np.maximum(x, 0), count))
    np.testing.assert_array_equal(total.to_numpy(), big + 1)


def test_long_expressions_and_many_targets_fit_in_100_columns():
    """Names of one long word each, which no shortening makes short: a product of two, and a
    Split into six (the targets alone pass 100 columns)."""
    word = "activationsofthefirstencoderblockfeedforward{}"
    parts = [word.format(i) for i in range(6)]
    nodes = [helper.make_node("Mul", ["x", "x"], [word.format("a")]),
             helper.make_node("Mul", [word.format("a"), "x"], [word.format("b")]),
             helper.make_node("Mul", [word.format("a"), word.format("b")], [word.format("c")]),
             helper.make_node("Split", [word.format("c")], parts, axis=0, num_outputs=6),
             helper.make_node("Concat", parts[::-1], ["y"], axis=0)]
    imported = convert(model(nodes, [tensor("x", TensorProto.FLOAT, [6])],
                             [tensor("y", TensorProto.FLOAT, [6])]))
    long_lines = [line for line in imported.source.splitlines() if len(line) > WIDTH]
    assert not long_lines, "\n".join(long_lines)
    x = np.arange(6, dtype=np.float32)
    got = imported.build("ndarray")(Tensor.from_data(x)).to_numpy()
    np.testing.assert_array_equal(got, (x**5)[::-1])


def test_large_int_and_bool_constants_become_frozen_parameters(tmp_path):
    """BERT's token type ids ([1, 512] zeros) and a mask: recorded with the weights, never
    trained, and given back their dtype in forward."""
    token_types = np.zeros((1, 512), np.int64)
    token_types[0, 256:] = 1
    mask = np.arange(32).reshape(4, 8) % 3 == 0
    nodes = [helper.make_node("Add", ["ids", "embeddings.token_type_ids"], ["sum"]),
             helper.make_node("And", ["flags", "mask"], ["both"])]
    imported = convert(model(
        nodes,
        [tensor("ids", TensorProto.INT64, [1, 512]), tensor("flags", TensorProto.BOOL, [4, 8])],
        [tensor("sum", TensorProto.INT64, [1, 512]), tensor("both", TensorProto.BOOL, [4, 8])],
        [numpy_helper.from_array(token_types, "embeddings.token_type_ids"),
         numpy_helper.from_array(mask, "mask")]))
    assert max(len(line) for line in imported.source.splitlines()) <= WIDTH
    assert "0, 0, 0, 0" not in imported.source and "True, False" not in imported.source
    path, _ = imported.write(tmp_path, "bert")
    spec = importlib.util.spec_from_file_location("bert_generated", path)
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    for built in (imported.build("ndarray"), generated.load("ndarray")):
        params = dict(built.named_params())
        assert set(params) == {"embeddings_token_type_ids", "mask"}
        assert not any(p.require_grad for p in params.values())
        ids = np.arange(512, dtype=np.int64).reshape(1, 512)
        flags = np.ones((4, 8), bool)
        total, both = built(Tensor.from_data(ids), Tensor.from_data(flags))
        assert total.dtype.name == "int64" and both.dtype.name == "bool"
        np.testing.assert_array_equal(total.to_numpy(), ids + token_types)
        np.testing.assert_array_equal(both.to_numpy(), mask)


def test_constants_of_function_operators_are_computed_at_import():
    """Gelu (opset 20) is defined by a function body: onnx's reference evaluator computes it
    only from typed inputs."""
    data = np.linspace(-2, 2, 6, dtype=np.float32)
    nodes = [helper.make_node("Gelu", ["c"], ["g"], name="constant_gelu"),
             helper.make_node("Add", ["x", "g"], ["y"])]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FoldWarning)
        imported = convert(model(nodes, [tensor("x", TensorProto.FLOAT, [6])],
                                 [tensor("y", TensorProto.FLOAT, [6])],
                                 [numpy_helper.from_array(data, "c")], opset=20))
    assert "Gelu" not in imported.report.operators
    assert "gelu" not in imported.source.split("def forward")[1]
    expected = np.array([v * 0.5 * (1 + erf(v / sqrt(2))) for v in data.astype(float)])
    got = imported.build("ndarray")(Tensor.from_data(np.zeros(6, np.float32))).to_numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_a_constant_that_cannot_be_computed_warns_naming_the_node():
    nodes = [helper.make_node("Reshape", ["c", "shape"], ["r"], name="bad_reshape"),
             helper.make_node("Add", ["x", "r"], ["y"])]
    with pytest.warns(FoldWarning) as caught:
        imported = convert(model(
            nodes, [tensor("x", TensorProto.FLOAT, [4])], [tensor("y", TensorProto.FLOAT, [4])],
            [numpy_helper.from_array(np.ones(6, np.float32), "c"),
             numpy_helper.from_array(np.array([4], np.int64), "shape")]))
    message = str(caught[0].message)
    assert "'bad_reshape' (Reshape)" in message and "not computed at import" in message
    assert "size 6" in message  # the reference evaluator's own words
    assert "ops.reshape" in imported.source or ".reshape(" in imported.source


def test_text_from_the_file_cannot_end_the_generated_docstring():
    name = 'net"""\nimport sys; sys.exit(3)\nr"""\\N'
    imported = convert(model([helper.make_node("Relu", ["x"], ["y"])],
                             [tensor("x", TensorProto.FLOAT, [2])],
                             [tensor("y", TensorProto.FLOAT, [2])], name=name))
    assert imported.source.splitlines()[0] == "\"\"\"net''' import sys; sys.exit(3) r'''/N: " \
        "an ONNX model (opset 18)"
    assert imported.build("ndarray")(Tensor.from_data([-1.0, 1.0])).tolist() == [0.0, 1.0]
