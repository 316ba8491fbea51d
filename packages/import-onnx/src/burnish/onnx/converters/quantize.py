"""Quantization operators: QuantizeLinear, DequantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv (integer element types of 16 bits or fewer; QuantizeLinear and
DequantizeLinear also to and from float8 and float4)."""

from __future__ import annotations

from burnish.onnx.codegen import Emitter
from burnish.onnx.converter import Converter
from burnish.onnx.converters.layers import window_kwargs
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import Node, type_name
from burnish.onnx.ops.quantize import FLOAT_TYPES, RANGES

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)


def quantized_type(node: Node, out: Emitter, value_index: int, output: bool = False,
                   floats: bool = False) -> str:
    """The integer dtype (or, with ``floats``, float8/float4 dtype) of a quantized input (or of
    the output), refused when it is one burnish has no quantization for."""
    value = node.outputs[value_index] if output else node.input(value_index)
    name = None if value is None else value.dtype
    if name not in RANGES and not (floats and name in FLOAT_TYPES):
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
    quantized_type(node, out, 0, floats=True)
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
