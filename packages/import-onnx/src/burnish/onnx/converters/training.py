"""Training operators of ``ai.onnx.preview.training``: Adagrad, Adam, Momentum."""

from __future__ import annotations

from burnish.onnx.codegen import Emitter
from burnish.onnx.converter import Converter
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import Node

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)
DOMAIN = "ai.onnx.preview.training"

#: Each optimizer's attributes and their defaults (None: required).
ATTRIBUTES = {
    "Adagrad": {"decay_factor": 0.0, "epsilon": 0.0, "norm_coefficient": 0.0},
    "Adam": {"alpha": 0.9, "beta": 0.999, "epsilon": 0.0, "norm_coefficient": 0.0,
             "norm_coefficient_post": 0.0},
    "Momentum": {"alpha": None, "beta": None, "mode": None, "norm_coefficient": None},
}


@converts(*ATTRIBUTES, domain=DOMAIN)
def convert_optimizer(node: Node, out: Emitter) -> None:
    kwargs = ", ".join(f"{key}={node.attr(key, default)!r}"
                       for key, default in ATTRIBUTES[node.op_type].items())
    out.assign_all(f"ops.{node.op_type.lower()}({', '.join(out.inputs())}, {kwargs})")
