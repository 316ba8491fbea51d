"""Quantization operators: QuantizeLinear, DequantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv (integer element types of 16 bits or fewer; QuantizeLinear and
DequantizeLinear also to and from float8 and float4)."""

from __future__ import annotations

import numpy as np

from burnish.onnx.codegen import Emitter, literal
from burnish.onnx.converter import Converter
from burnish.onnx.converters.layers import window_kwargs
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import Node, type_name
from burnish.onnx.ops.quantize import FLOAT_TYPES, RANGES

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)


def quantized_type(node: Node, out: Emitter, value_index: int, output: bool = False,
                   floats: bool = False, int32: bool = False) -> str:
    """The integer dtype (or, with ``floats``, float8/float4 dtype; with ``int32``, int32 too:
    DequantizeLinear's biases) of a quantized input (or of the output), refused when it is
    one burnish has no quantization for."""
    value = node.outputs[value_index] if output else node.input(value_index)
    name = None if value is None else value.dtype
    if name not in RANGES and not (floats and name in FLOAT_TYPES) \
            and not (int32 and name == "int32"):
        kind = type_name(value.elem_type) if value is not None and value.elem_type else "unknown"
        raise out.unsupported(f"quantization to element type {kind}")
    return name


@converts("QuantizeLinear")
def convert_quantize_linear(node: Node, out: Emitter) -> None:
    target = quantized_type(node, out, 0, output=True, floats=True)
    saturate = "" if node.attr("saturate", 1) else ", saturate=False"
    out.assign(f"ops.quantize_linear({out.input(0)}, {out.input(1)}, {out.input(2)}, "
               f"{target!r}, axis={node.attr('axis', 1)}, "
               f"block_size={node.attr('block_size', 0)}{saturate})")


@converts("DequantizeLinear")
def convert_dequantize_linear(node: Node, out: Emitter) -> None:
    quantized_type(node, out, 0, floats=True, int32=True)
    result = node.outputs[0].dtype if node.outputs[0] is not None else None
    out.assign(f"ops.dequantize_linear({out.input(0)}, {out.input(1)}, {out.input(2)}, "
               f"axis={node.attr('axis', 1)}, block_size={node.attr('block_size', 0)}, "
               f"dtype_name={result!r})")


@converts("MatMulInteger")
def convert_matmul_integer(node: Node, out: Emitter) -> None:
    out.assign(f"ops.matmul_integer({', '.join(out.inputs())})")


@converts("ConvInteger")
def convert_conv_integer(node: Node, out: Emitter) -> None:
    kwargs = window_kwargs(node, "strides", "pads", "dilations", "group", "auto_pad")
    args = ", ".join(out.input(i) for i in range(4))
    out.assign(f"ops.conv_integer({args}" + (f", {kwargs})" if kwargs else ")"))


@converts("QLinearMatMul")
def convert_qlinear_matmul(node: Node, out: Emitter) -> None:
    quantized_type(node, out, 0)
    quantized_type(node, out, 0, output=True)
    out.assign(f"ops.qlinear_matmul({', '.join(out.input(i) for i in range(8))})")


@converts("QLinearConv")
def convert_qlinear_conv(node: Node, out: Emitter) -> None:
    quantized_type(node, out, 0)
    quantized_type(node, out, 0, output=True)
    kwargs = window_kwargs(node, "strides", "pads", "dilations", "group", "auto_pad")
    args = ", ".join(out.input(i) for i in range(9))
    out.assign(f"ops.qlinear_conv({args}" + (f", {kwargs})" if kwargs else ")"))


def integer_weight(out: Emitter, transpose: bool = False, axis: int = 0) -> str:
    """The fused node's constant 8-bit weight (inputs 3-5: values, scales, zero points) as a
    ``QuantizedTensor`` field of the model: one buffer across calls (backends keep their packed
    copy of it), its bytes in the record. ``transpose``: a Gemm's ``[N, K]`` weight stored as
    ``[K, N]``; ``axis``: the output channel's axis as stored."""
    values, scales, points = (out.node.input(i) for i in (3, 4, 5))
    assert values is not None and values.const is not None and scales is not None
    array = np.ascontiguousarray(values.const.T if transpose else values.const)
    scale = np.asarray(scales.const, np.float32)
    point = None if points is None else np.asarray(points.const)
    if array.dtype == np.int8 and (point is None or not point.any()):
        point = None  # int8 about zero: the symmetric scheme
    elif point is None:
        point = np.zeros(scale.shape, array.dtype)
    per_tensor = scale.size == 1
    shape = [] if per_tensor else [array.shape[axis]]
    parts = {"values": array, "scales": scale.reshape(shape)}
    if point is not None:
        parts["zero_points"] = point.reshape(shape).astype(array.dtype)
    hint = values.name or f"{out.node.name}_weight"
    name = out.builder.field(
        hint, "bn.quantization.QuantizedTensor",
        f"ops.quantized_weight({literal(list(array.shape))}, {str(array.dtype)!r}, "
        f"{None if per_tensor else axis}, {point is not None}, device)", parts)
    return f"self.{name}"


def activation_zero_point(out: Emitter) -> str:
    """Input 2 (the activation's zero point); None for an int8 zero, as symmetric."""
    point = out.node.const(2)
    value = out.node.input(0)
    if value is not None and value.dtype == "int8" and (point is None or not np.any(point)):
        return "None"
    return out.input(2)


@converts("QdqMatMul", domain="burnish")
def convert_qdq_matmul(node: Node, out: Emitter) -> None:
    """The importer's own fused DequantizeLinear products (``simplify.fuse_qdq``): MatMul
    or Gemm (and a bias) on the 8-bit values."""
    trans_b = bool(node.attr("trans_b", 0))
    args = [out.input(0), out.input(1), activation_zero_point(out),
            integer_weight(out, trans_b, axis=1), out.input(6)]
    out.assign(f"ops.qdq_matmul({', '.join(args)})")


@converts("QdqConv", domain="burnish")
def convert_qdq_conv(node: Node, out: Emitter) -> None:
    """A fused DequantizeLinear convolution (``simplify.fuse_qdq``) on the 8-bit values; the
    activation's zero point pads it where the padding is asymmetric."""
    kwargs = window_kwargs(node, "strides", "pads", "dilations", "group", "auto_pad")
    point = node.const(2)
    pad = int(np.asarray(point).reshape(-1)[0]) if point is not None else 0
    args = [out.input(0), out.input(1), activation_zero_point(out), integer_weight(out),
            out.input(6)]
    out.assign(f"ops.qdq_conv({', '.join(args)}" + (f", {kwargs}" if kwargs else "")
               + (f", pad_value={pad}" if pad else "") + ")")
