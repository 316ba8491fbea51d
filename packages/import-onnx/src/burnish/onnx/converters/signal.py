"""Signal operators: DFT, STFT and MelWeightMatrix."""

from __future__ import annotations

import onnx
from burnish.onnx.codegen import Emitter, literal
from burnish.onnx.converter import Converter
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import DTYPES, Node

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)


def scalar_input(node: Node, out: Emitter, i: int) -> str:
    """A one-element input as a Python number: a literal when constant, else read at run
    time; ``None`` when left out."""
    array = node.const(i)
    if array is not None:
        return literal(array.reshape(-1)[0].item())
    return f"ops.scalar({out.input(i)})" if out.has(i) else "None"


@converts("DFT")
def convert_dft(node: Node, out: Emitter) -> None:
    if node.opset >= 20:
        axis = scalar_input(node, out, 2) if out.has(2) else "-2"
    else:
        axis = str(node.attr("axis", 1))
    out.assign(f"ops.dft({out.input(0)}, {scalar_input(node, out, 1)}, {axis}, "
               f"inverse={node.attr('inverse', 0)}, onesided={node.attr('onesided', 0)})")


@converts("STFT")
def convert_stft(node: Node, out: Emitter) -> None:
    out.assign(f"ops.stft({out.input(0)}, {scalar_input(node, out, 1)}, {out.input(2)}, "
               f"{scalar_input(node, out, 3)}, onesided={node.attr('onesided', 1)})")


@converts("MelWeightMatrix")
def convert_mel_weight_matrix(node: Node, out: Emitter) -> None:
    dtype = DTYPES.get(node.attr("output_datatype", onnx.TensorProto.FLOAT))
    if dtype is None:
        raise out.unsupported(f"output_datatype {node.attr('output_datatype')}")
    args = ", ".join(scalar_input(node, out, i) for i in range(5))
    out.assign(f"ops.mel_weight_matrix({args}, {dtype!r}, device)")
