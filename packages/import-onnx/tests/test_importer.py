"""The importer's promises: layers and parameters a module trains and records, the errors that
name the node, converters as plugins, and the command line."""

from __future__ import annotations

import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from burnish import Tensor, nn, optim
from burnish.onnx import (
    Converter,
    MalformedModelError,
    UnsupportedOperatorError,
    convert,
    import_model,
)
from burnish.plugins import hookimpl, register

FIXTURES = Path(__file__).with_name("fixtures")


def small_model(op: str = "Relu", opset: int = 18, **attrs) -> onnx.ModelProto:
    """x [2, 4] -> MatMul(W) + b -> op -> y."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.normal(size=(4, 3)).astype(np.float32), "fc.weight")
    bias = numpy_helper.from_array(rng.normal(size=(3,)).astype(np.float32), "fc.bias")
    nodes = [helper.make_node("MatMul", ["x", "fc.weight"], ["h"], name="fc_matmul"),
             helper.make_node("Add", ["h", "fc.bias"], ["a"], name="fc_add"),
             helper.make_node(op, ["a"], ["y"], name="act", **attrs)]
    graph = helper.make_graph(nodes, "small",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [weight, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_matmul_add_becomes_a_linear_layer_with_params():
    imported = convert(small_model())
    assert "nn.LinearConfig(4, 3, bias=True)" in imported.source
    model = imported.build("ndarray")
    assert isinstance(model.fc, nn.Linear)
    assert [name for name, _ in model.named_params()] == ["fc.weight", "fc.bias"]


def test_trains_through_autodiff():
    model = import_model(FIXTURES / "cnn.onnx", "autodiff+ndarray")
    x = Tensor.from_data(np.load(FIXTURES / "cnn.input.npy"), device="autodiff+ndarray")
    target = Tensor.from_data([3, 7], device="autodiff+ndarray")
    optimizer = optim.Sgd()
    losses = []
    for _ in range(5):
        # The CNN ends in a softmax: its outputs are probabilities.
        loss = nn.CrossEntropyLoss(logits=False)(model(x), target)
        grads = loss.backward()
        assert all(p.val().grad(grads) is not None for p in model.params())
        model = optimizer.step(0.5, model, grads)
        losses.append(loss.item())
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("extension", ["safetensors", "mpk", "json", "bin"])
def test_saves_and_loads_in_every_record_format(tmp_path, extension):
    model = import_model(FIXTURES / "resnet18.onnx", "ndarray")
    path = model.save(tmp_path / f"model.{extension}")
    fresh = convert(FIXTURES / "resnet18.onnx").python_module().Model.init("ndarray")
    loaded = fresh.load(path)
    x = Tensor.from_data(np.load(FIXTURES / "resnet18.input.npy"))
    np.testing.assert_allclose(loaded(x).to_numpy(), model(x).to_numpy(), rtol=1e-6)


def test_unsupported_operator_names_node_operator_and_reason():
    graph = helper.make_graph(
        [helper.make_node("StringNormalizer", ["x"], ["y"], name="normalize_text")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(UnsupportedOperatorError) as error:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            convert(model)
    message = str(error.value)
    assert "normalize_text" in message and "StringNormalizer" in message
    assert "no converter" in message


def test_unsupported_attribute_names_the_node():
    model = small_model("Pad")
    node = model.graph.node[2]
    node.input.append("pads")
    node.attribute.append(helper.make_attribute("mode", "no-such-mode"))
    model.graph.initializer.append(numpy_helper.from_array(np.zeros(4, np.int64), "pads"))
    with pytest.raises((UnsupportedOperatorError, MalformedModelError)) as error:
        convert(model)
    assert "act" in str(error.value)


def test_malformed_files_are_reported(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not protobuf")
    with pytest.raises(MalformedModelError) as error:
        convert(bad)
    assert "bad.onnx" in str(error.value)
    with pytest.raises(MalformedModelError):
        convert(tmp_path / "missing.onnx")


def test_unsupported_dtype_is_reported():
    graph = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["y"], name="abs")], "g",
        [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(UnsupportedOperatorError, match="COMPLEX64"):
        convert(model)


def test_old_opsets_are_upgraded():
    model = small_model("Relu", opset=11)
    x = np.ones((2, 4), np.float32)
    assert import_model(model, "ndarray")(Tensor.from_data(x)).shape == [2, 3]


def test_a_third_party_converter_replaces_the_first_party_one():
    def convert_relu(node, out):
        out.assign(f"{out.input(0)} * 0.0 + 7.0")

    plugin = types.SimpleNamespace(burnish_onnx_converters=hookimpl(
        lambda: [Converter("Relu", convert_relu)]))
    register(plugin, name="relu-as-seven")
    try:
        model = import_model(small_model("Relu"), "ndarray")
        y = model(Tensor.ones([2, 4]))
        assert y.tolist() == [[7.0] * 3] * 2
    finally:
        from burnish.plugins import plugin_manager

        plugin_manager().unregister(name="relu-as-seven")


def test_command_line_writes_the_module_and_reports(tmp_path):
    result = subprocess.run([sys.executable, "-m", "burnish.onnx", str(FIXTURES / "mlp.onnx"),
                             "--out", str(tmp_path)], capture_output=True, text=True, check=True)
    assert (tmp_path / "mlp.py").is_file() and (tmp_path / "mlp.safetensors").is_file()
    assert "Gemm" in result.stdout and "unsupported operators: none" in result.stdout


def test_command_line_lists_unsupported_operators(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Frobnicate", ["r"], ["y"], name="frob", domain="com.example")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19),
                                                      helper.make_opsetid("com.example", 1)]),
              path)
    result = subprocess.run([sys.executable, "-m", "burnish.onnx", str(path), "--out",
                             str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 1
    assert "Frobnicate" in result.stdout and "'frob'" in result.stderr


@pytest.mark.parametrize("content", [b"", b"this is not protobuf\n", bytes(range(256)) * 2,
                                     "truncated"])
def test_command_line_reports_a_corrupt_file_in_one_line(tmp_path, content):
    path = tmp_path / "corrupt.onnx"
    if content == "truncated":
        content = (FIXTURES / "mlp.onnx").read_bytes()[:1000]
    path.write_bytes(content)
    result = subprocess.run([sys.executable, "-m", "burnish.onnx", str(path), "--out",
                             str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {path}: not an ONNX model")
    assert lines[0].count(str(path)) == 1 and "PosixPath" not in lines[0]


def test_control_flow_subgraphs_become_nested_functions():
    """Loop with an If inside: the subgraphs read the outer graph's weight and input by name
    (closure variables of the nested functions), and the weight stays a parameter."""
    weight = np.arange(9, dtype=np.float32).reshape(3, 3) / 10
    scalar = helper.make_tensor_value_info
    then_branch = helper.make_graph(
        [helper.make_node("MatMul", ["h", "w"], ["t"])], "then", [],
        [scalar("t", TensorProto.FLOAT, [2, 3])])
    else_branch = helper.make_graph(
        [helper.make_node("Add", ["h", "x"], ["e"])], "else", [],
        [scalar("e", TensorProto.FLOAT, [2, 3])])
    body = helper.make_graph(
        [helper.make_node("Less", ["i", "one"], ["first"]),
         helper.make_node("If", ["first"], ["next"], then_branch=then_branch,
                          else_branch=else_branch),
         helper.make_node("Identity", ["cond"], ["cond_out"]),
         helper.make_node("Identity", ["next"], ["h_out"])],
        "body", [scalar("i", TensorProto.INT64, []), scalar("cond", TensorProto.BOOL, []),
                 scalar("h", TensorProto.FLOAT, [2, 3])],
        [scalar("cond_out", TensorProto.BOOL, []), scalar("h_out", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.array(1, np.int64), "one")])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)], "loop",
        [scalar("x", TensorProto.FLOAT, [2, 3])], [scalar("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.array(3, np.int64),
                                                                       "trips")])
    imported = convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    assert "def loop_body(" in imported.source and "def if_then_branch(" in imported.source
    model = imported.build("ndarray")
    assert [name for name, _ in model.named_params()] == ["w"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = x @ weight + x + x  # iteration 0 multiplies, 1 and 2 add x
    np.testing.assert_allclose(model(Tensor.from_data(x)).to_numpy(), expected, rtol=1e-6)
