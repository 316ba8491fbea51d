"""Operators of ``ai.onnx.ml`` that are tensor arithmetic: Binarizer, ArrayFeatureExtractor."""

from __future__ import annotations

from burnish.onnx.codegen import Emitter
from burnish.onnx.converter import Converter
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import Node

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)
DOMAIN = "ai.onnx.ml"


@converts("Binarizer", domain=DOMAIN)
def convert_binarizer(node: Node, out: Emitter) -> None:
    x = out.input(0)
    out.assign(f"({x} > {node.attr('threshold', 0.0)!r}).cast({x}.dtype)")


@converts("ArrayFeatureExtractor", domain=DOMAIN)
def convert_array_feature_extractor(node: Node, out: Emitter) -> None:
    out.assign(f"ops.array_feature_extractor({out.input(0)}, {out.input(1)})")
