"""Reductions: ReduceSum, ReduceMean, ReduceMax... (axes as an input or an attribute)."""

from __future__ import annotations

from burnish.onnx.codegen import Emitter
from burnish.onnx.converter import Converter
from burnish.onnx.converters.registry import collector
from burnish.onnx.converters.shape import axes
from burnish.onnx.graph import Node

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)

#: Each Reduce operator's name in ``ops.reduce``.
REDUCTIONS = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
              "ReduceProd": "prod", "ReduceL1": "l1", "ReduceL2": "l2", "ReduceLogSum": "log_sum",
              "ReduceLogSumExp": "log_sum_exp", "ReduceSumSquare": "sum_square"}


@converts(*REDUCTIONS)
def convert_reduce(node: Node, out: Emitter) -> None:
    out.assign(f"ops.reduce({out.input(0)}, {REDUCTIONS[node.op_type]!r}, "
               f"{axes(node, out, 1)}, keepdims={node.attr('keepdims', 1)}, "
               f"noop_with_empty_axes={node.attr('noop_with_empty_axes', 0)})")
