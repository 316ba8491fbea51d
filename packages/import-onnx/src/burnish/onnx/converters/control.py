"""Control flow: If, Loop and Scan, whose subgraphs become functions nested in forward."""

from __future__ import annotations

from burnish.onnx.codegen import Emitter, literal
from burnish.onnx.converter import Converter
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import Node

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)


@converts("If")
def convert_if(node: Node, out: Emitter) -> None:
    then_branch, else_branch = out.function("then_branch"), out.function("else_branch")
    out.assign_all(f"{then_branch}() if ops.truth({out.input(0)}) else {else_branch}()")


@converts("Loop")
def convert_loop(node: Node, out: Emitter) -> None:
    body = out.function("body")
    carried = [out.input(i) for i in range(2, len(node.inputs))]
    scan_outputs = len(node.outputs) - len(carried)
    out.assign_all(f"ops.loop({body}, {out.input(0)}, {out.input(1)}, "
                   f"[{', '.join(carried)}], {scan_outputs})")


@converts("Scan")
def convert_scan(node: Node, out: Emitter) -> None:
    if node.opset < 9:
        raise out.unsupported("Scan before opset 9 (sequence lengths and a batch axis)")
    count = node.attr("num_scan_inputs")
    inputs = out.inputs()
    states, scanned = inputs[:len(inputs) - count], inputs[len(inputs) - count:]
    body = out.function("body")
    keys = ("scan_input_axes", "scan_input_directions", "scan_output_axes",
            "scan_output_directions")
    kwargs = "".join(f", {key.removeprefix('scan_')}={literal(node.attr(key))}" for key in keys
                     if node.attr(key) is not None)
    out.assign_all(f"ops.scan({body}, [{', '.join(states)}], [{', '.join(scanned)}]{kwargs})")


@converts("OptionalHasElement")
def convert_optional_has_element(node: Node, out: Emitter) -> None:
    # Optionals are not values burnish holds: a graph input or value is a tensor, so the
    # element is there exactly when the input is named.
    present = node.input(0) is not None
    out.assign(f"ops.const({present!r}, 'bool', device, [])")


@converts("OptionalGetElement")
def convert_optional_get_element(node: Node, out: Emitter) -> None:
    # A tensor input is its own element (ONNX: "if the input is a tensor, it is returned").
    if node.input(0) is None:
        raise out.unsupported("OptionalGetElement of an empty optional")
    out.assign(out.input(0))
