"""QDQ models (each product's inputs through DequantizeLinear) run their MatMul, Gemm and Conv
on the 8-bit integers (``simplify.fuse_qdq``), against onnx's reference evaluator of the same
file; patterns outside what the integer products take keep the float path."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import burnish as bn
from burnish import Tensor
from burnish.onnx import convert

RNG = np.random.default_rng(0)


def init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def mlp(activation: str = "uint8", per_channel: bool = True) -> onnx.ModelProto:
    """x [3, 5, 8] -> Q/DQ -> MatMul(DQ(W1 int8 [8, 6])) + b1 -> Relu -> Q/DQ ->
    Gemm(DQ(W2 int8 [4, 6]), transB) + c -> y [15, 4] (after a reshape)."""
    zero = {"uint8": np.uint8(131), "int8": np.int8(-3)}[activation]
    w1 = RNG.integers(-127, 128, (8, 6)).astype(np.int8)
    w2 = RNG.integers(-127, 128, (4, 6)).astype(np.int8)
    s1 = (RNG.random(6) * 0.02 + 0.005).astype(np.float32) if per_channel \
        else np.float32(0.01)
    s2 = (RNG.random(4) * 0.02 + 0.005).astype(np.float32) if per_channel \
        else np.float32(0.02)
    inits = [init("sx", np.float32(0.03)), init("zx", zero), init("w1", w1), init("s1", s1),
             init("b1", RNG.normal(size=6).astype(np.float32)), init("sh", np.float32(0.05)),
             init("zh", zero), init("w2", w2), init("s2", s2),
             init("c", RNG.normal(size=4).astype(np.float32)),
             init("shape", np.array([15, 6], np.int64))]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w1", "s1"], ["w1d"], axis=1),
        helper.make_node("MatMul", ["xd", "w1d"], ["m"]),
        helper.make_node("Add", ["m", "b1"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["flat"]),
        helper.make_node("QuantizeLinear", ["flat", "sh", "zh"], ["hq"]),
        helper.make_node("DequantizeLinear", ["hq", "sh", "zh"], ["hd"]),
        helper.make_node("DequantizeLinear", ["w2", "s2"], ["w2d"], axis=0),
        helper.make_node("Gemm", ["hd", "w2d", "c"], ["y"], transB=1),
    ]
    graph = helper.make_graph(nodes, "qdq_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [15, 4])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def cnn(pads: list[int]) -> onnx.ModelProto:
    """x [2, 3, 7, 7] -> Q/DQ (int8, zero point 5) -> Conv(DQ(W int8 [4, 3, 3, 3] per output
    channel), bias, stride 2, ``pads``) -> y."""
    w = RNG.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    inits = [init("sx", np.float32(0.04)), init("zx", np.int8(5)), init("w", w),
             init("sw", (RNG.random(4) * 0.01 + 0.002).astype(np.float32)),
             init("zw", np.zeros(4, np.int8)), init("b", RNG.normal(size=4).astype(np.float32))]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=0),
        helper.make_node("Conv", ["xd", "wd", "b"], ["y"], strides=[2, 2], pads=pads,
                         kernel_shape=[3, 3]),
    ]
    graph = helper.make_graph(nodes, "qdq_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [2, 3, 7, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             ["n", "c", "h", "w"])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def check(model: onnx.ModelProto, x: np.ndarray, backend: str = "ndarray") -> str:
    imported = convert(model)
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
    module = imported.build(backend)
    got = module(Tensor.from_data(x, bn.backend(backend).default_device())).to_numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    return imported.source


@pytest.mark.parametrize("activation", ["uint8", "int8"])
@pytest.mark.parametrize("per_channel", [True, False])
def test_matmul_and_gemm_of_dequantized_inputs_run_on_the_integers(activation, per_channel):
    x = RNG.normal(size=(3, 5, 8)).astype(np.float32)
    source = check(mlp(activation, per_channel), x)
    assert source.count("ops.qdq_matmul(") == 2
    assert "DequantizeLinear" not in source and "dequantize_linear" not in source


@pytest.mark.parametrize("pads", [[1, 1, 1, 1], [0, 0, 1, 1]])
def test_conv_of_dequantized_inputs_runs_on_the_integers(pads):
    x = RNG.normal(size=(2, 3, 7, 7)).astype(np.float32)
    source = check(cnn(pads), x)
    assert "ops.qdq_conv(" in source
    assert ("pad_value=5" in source) == (pads != [1, 1, 1, 1]) or "pad_value=5" in source


def test_the_integer_products_are_the_backends_quantized_ones(monkeypatch):
    calls = []
    backend = bn.backend("ndarray")
    original = type(backend).quantized_matmul

    def counting(self, *args, **kwargs):
        calls.append(args[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(backend), "quantized_matmul", counting)
    check(mlp(), RNG.normal(size=(3, 5, 8)).astype(np.float32))
    assert len(calls) == 2


def test_the_record_holds_the_weights_as_bytes(tmp_path):
    imported = convert(mlp())
    module = imported.build("ndarray")
    path = module.save(tmp_path / "model.safetensors")
    stored = bn.record.flatten(bn.record.load(path).tensors)
    assert sorted(name for name, t in stored.items() if t.dtype is bn.int8) == \
        ["w1.values", "w2.values"]
    loaded = imported.python_module().Model.init("ndarray").load(path)
    x = Tensor.from_data(RNG.normal(size=(3, 5, 8)).astype(np.float32))
    np.testing.assert_array_equal(loaded(x).to_numpy(), module(x).to_numpy())


def test_other_patterns_keep_the_float_path():
    """A weight that is not a constant of the file (here made by a node) is not one the
    integer products take: that MatMul stays in float, the Gemm still qualifies."""
    model = mlp()
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] == "w1":
            node.input[0] = "w1_made"
    model.graph.node.insert(0, helper.make_node("Identity", ["w1"], ["w1_made"]))
    x = RNG.normal(size=(3, 5, 8)).astype(np.float32)
    source = check(model, x)
    assert source.count("ops.qdq_matmul(") == 1


def test_on_cpu_the_integer_kernels_run_eagerly_and_captured():
    """The cpu backend's int8 product and convolution (its own patch rows, padded with the
    zero point) against onnx's reference, then replayed by burnish.capture."""
    pytest.importorskip("burnish.cpu", reason="needs burnish-backend-cpu")
    try:
        device = bn.backend("cpu").default_device()
    except bn.errors.UnsupportedError as error:
        pytest.skip(f"the cpu backend cannot run here ({error})")
    for model, shape in ((cnn([0, 0, 1, 1]), (2, 3, 7, 7)), (mlp(), (3, 5, 8))):
        x = RNG.normal(size=shape).astype(np.float32)
        check(model, x, "cpu")
        module = convert(model).build("cpu")

        @bn.capture
        def infer(m, t):
            return m(t)

        eager = module(Tensor.from_data(x, device)).to_numpy()
        for _ in range(4):
            np.testing.assert_array_equal(infer(module, Tensor.from_data(x, device)).to_numpy(),
                                          eager)
        assert infer.stats()[0]["replays"] >= 1
