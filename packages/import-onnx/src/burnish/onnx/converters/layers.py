"""Operators with weights or windows: Conv, Gemm and MatMul (Linear when the weights are
constants), pools, normalizations, softmax, Einsum."""

from __future__ import annotations

import numpy as np

from burnish.onnx.codegen import Emitter, literal
from burnish.onnx.converter import Converter
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import Node

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)


def weights(node: Node, *indices: int) -> list[np.ndarray | None] | None:
    """The constant float32 inputs at ``indices`` (None for one left out), or None when one of
    them is given but not a float32 constant: then no layer can hold them."""
    found = []
    for i in indices:
        value = node.input(i)
        if value is None:
            found.append(None)
        elif value.const is None or value.const.dtype != np.float32:
            return None
        else:
            found.append(value.const)
    return found


def window_kwargs(node: Node, *names: str) -> str:
    parts = []
    for name in names:
        value = node.attr(name)
        if value is not None:
            parts.append(f"{name}={literal(value)}")
    return ", ".join(parts)


@converts("Conv")
def convert_conv(node: Node, out: Emitter) -> None:
    found = weights(node, 1, 2)
    auto_pad = node.attr("auto_pad", "NOTSET")
    pads = node.attr("pads")
    spatial = None if found is None else found[0].ndim - 2
    symmetric = pads is None or pads[:len(pads) // 2] == pads[len(pads) // 2:]
    if found is not None and 1 <= spatial <= 3 and auto_pad in ("NOTSET", "VALID") \
            and symmetric:
        weight, bias = found
        groups = node.attr("group", 1)
        padding = [0] * spatial if pads is None or auto_pad == "VALID" else pads[:spatial]
        config = (f"nn.Conv{spatial}dConfig({weight.shape[1] * groups}, {weight.shape[0]}, "
                  f"{literal(list(weight.shape[2:]))}, "
                  f"stride={literal(node.attr('strides', [1] * spatial))}, "
                  f"dilation={literal(node.attr('dilations', [1] * spatial))}, "
                  f"groups={groups}, padding={literal(padding)}, bias={bias is not None})")
        layer = out.layer(f"nn.Conv{spatial}d", f"{config}.init(device)",
                          {"weight": weight, **({"bias": bias} if bias is not None else {})})
        out.assign(f"{layer}({out.input(0)})")
        return
    kwargs = window_kwargs(node, "strides", "pads", "dilations", "group", "auto_pad")
    out.assign(f"ops.conv({out.input(0)}, {out.input(1)}, {out.input(2)}"
               + (f", {kwargs})" if kwargs else ")"))


@converts("ConvTranspose")
def convert_conv_transpose(node: Node, out: Emitter) -> None:
    kwargs = window_kwargs(node, "strides", "pads", "dilations", "group", "auto_pad",
                           "output_padding", "output_shape")
    out.assign(f"ops.conv_transpose({out.input(0)}, {out.input(1)}, {out.input(2)}"
               + (f", {kwargs})" if kwargs else ")"))


@converts("MaxPool")
def convert_max_pool(node: Node, out: Emitter) -> None:
    kwargs = window_kwargs(node, "kernel_shape", "strides", "pads", "dilations", "ceil_mode",
                           "auto_pad", "storage_order")
    if out.used(1):
        out.assign_all(f"ops.max_pool({out.input(0)}, {kwargs}, with_indices=True)", 2)
    else:
        out.assign(f"ops.max_pool({out.input(0)}, {kwargs})")


@converts("AveragePool")
def convert_avg_pool(node: Node, out: Emitter) -> None:
    kwargs = window_kwargs(node, "kernel_shape", "strides", "pads", "dilations", "ceil_mode",
                           "auto_pad", "count_include_pad")
    out.assign(f"ops.avg_pool({out.input(0)}, {kwargs})")


@converts("LpPool")
def convert_lp_pool(node: Node, out: Emitter) -> None:
    kwargs = window_kwargs(node, "kernel_shape", "strides", "pads", "dilations", "ceil_mode",
                           "auto_pad", "p")
    out.assign(f"ops.lp_pool({out.input(0)}, {kwargs})")


@converts("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def convert_global_pool(node: Node, out: Emitter) -> None:
    op = {"GlobalAveragePool": "mean", "GlobalMaxPool": "max", "GlobalLpPool": "lp"}[node.op_type]
    extra = f", p={node.attr('p', 2)}" if op == "lp" else ""
    out.assign(f"ops.global_pool({out.input(0)}, {op!r}{extra})")


@converts("BatchNormalization")
def convert_batch_norm(node: Node, out: Emitter) -> None:
    training = node.attr("training_mode", 0)
    epsilon = node.attr("epsilon", 1e-5)
    found = weights(node, 1, 2, 3, 4)
    if found is not None and not training and not out.used(1):
        scale, bias, mean, var = found
        layer = out.layer("nn.BatchNorm",
                          f"nn.BatchNormConfig({scale.shape[0]}, epsilon={epsilon!r}, "
                          f"momentum={1 - node.attr('momentum', 0.9)!r}).init(device)",
                          {"gamma": scale, "beta": bias, "running_mean": mean,
                           "running_var": var})
        out.assign(f"{layer}({out.input(0)})")
        return
    args = ", ".join(out.inputs())
    call = f"ops.batch_norm({args}, epsilon={epsilon!r}, momentum={node.attr('momentum', 0.9)!r}"
    if training:
        out.assign_all(call + ", training_mode=1)", 3)
    else:
        out.assign(call + ")")


@converts("InstanceNormalization")
def convert_instance_norm(node: Node, out: Emitter) -> None:
    out.assign(f"ops.instance_norm({out.input(0)}, {out.input(1)}, {out.input(2)}, "
               f"epsilon={node.attr('epsilon', 1e-5)!r})")


@converts("LayerNormalization")
def convert_layer_norm(node: Node, out: Emitter) -> None:
    if node.attr("stash_type", 1) != 1:
        raise out.decline("stash_type other than float32")
    x = node.input(0)
    axis = node.attr("axis", -1)
    epsilon = node.attr("epsilon", 1e-5)
    found = weights(node, 1, 2)
    last = axis == -1 or (x is not None and x.rank is not None and axis == x.rank - 1)
    outputs = sum(1 for v in node.outputs if v is not None)
    if found is not None and found[0].ndim == 1 and found[1] is not None and last \
            and outputs == 1:
        scale, bias = found
        layer = out.layer("nn.LayerNorm",
                          f"nn.LayerNormConfig({scale.shape[0]}, epsilon={epsilon!r})"
                          ".init(device)", {"gamma": scale, "beta": bias})
        out.assign(f"{layer}({out.input(0)})")
        return
    count = len(node.outputs)
    call = (f"ops.layer_norm({out.input(0)}, {out.input(1)}, {out.input(2)}, axis={axis}, "
            f"epsilon={epsilon!r}, outputs={3 if count > 1 else 1})")
    if count > 1:
        out.assign_all(call, 3)
    else:
        out.assign(call)


@converts("LRN")
def convert_lrn(node: Node, out: Emitter) -> None:
    out.assign(f"ops.lrn({out.input(0)}, {node.attr('size')}, {node.attr('alpha', 1e-4)!r}, "
               f"{node.attr('beta', 0.75)!r}, {node.attr('bias', 1.0)!r})")


@converts("Softmax", "LogSoftmax")
def convert_softmax(node: Node, out: Emitter) -> None:
    function = "softmax" if node.op_type == "Softmax" else "log_softmax"
    x = node.input(0)
    if x is not None and x.dtype is not None and not x.dtype.startswith(("float", "bfloat")):
        raise out.unsupported(f"{node.op_type} of {x.dtype}")
    prefix = "ops" if function == "softmax" and x is not None and x.dtype in (
        "float16", "bfloat16") else "F"
    out.assign(f"{prefix}.{function}({out.input(0)}, {node.attr('axis', -1)})")


@converts("MatMul")
def convert_matmul(node: Node, out: Emitter) -> None:
    a, b = node.input(0), node.input(1)
    if a is not None and b is not None and (a.rank or 0) >= 2 and (b.rank or 0) >= 2:
        out.assign(f"{out.input(0)} @ {out.input(1)}")
    else:
        out.assign(f"ops.matmul({out.input(0)}, {out.input(1)})")


def linear(out: Emitter, weight: np.ndarray, bias: np.ndarray | None, x: str) -> None:
    d_input, d_output = weight.shape
    layer = out.layer("nn.Linear",
                      f"nn.LinearConfig({d_input}, {d_output}, bias={bias is not None})"
                      ".init(device)",
                      {"weight": weight, **({"bias": bias} if bias is not None else {})})
    out.assign(f"{layer}({x})")


@converts("Linear", domain="burnish")
def convert_linear(node: Node, out: Emitter) -> None:
    """The importer's own fused MatMul (+ Add): ``x @ weight + bias``."""
    found = weights(node, 1, 2)
    if found is None:
        args = ", ".join(out.inputs())
        out.assign(f"ops.gemm({args})" if len(node.inputs) == 3 else f"{args.replace(', ', ' @ ')}")
        return
    linear(out, found[0], found[1], out.input(0))


@converts("Attention", domain="burnish")
def convert_fused_attention(node: Node, out: Emitter) -> None:
    """The importer's own fused attention: ``softmax(scale * q @ kt) @ v`` (``kt``: the keys
    transposed, as the graph multiplied them)."""
    out.assign(f"F.scaled_dot_product_attention({out.input(0)}, {out.input(1)}.transpose(), "
               f"{out.input(2)}, scale={node.attr('scale')!r})")


@converts("Gemm")
def convert_gemm(node: Node, out: Emitter) -> None:
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    trans_a, trans_b = node.attr("transA", 0), node.attr("transB", 0)
    found = weights(node, 1, 2)
    if found is not None and not trans_a and alpha == 1.0 and beta == 1.0 \
            and node.input(0) is not None and node.input(0).const is None:
        weight, bias = found
        weight = weight.T if trans_b else weight
        if bias is None or (bias.ndim == 1 and bias.shape[0] == weight.shape[1]):
            linear(out, np.ascontiguousarray(weight), bias, out.input(0))
            return
    out.assign(f"ops.gemm({out.input(0)}, {out.input(1)}, {out.input(2)}, alpha={alpha!r}, "
               f"beta={beta!r}, trans_a={trans_a}, trans_b={trans_b})")


@converts("Einsum")
def convert_einsum(node: Node, out: Emitter) -> None:
    out.assign(f"ops.einsum({node.attr('equation')!r}, {', '.join(out.inputs())})")


@converts("LpNormalization")
def convert_lp_normalization(node: Node, out: Emitter) -> None:
    out.assign(f"ops.lp_normalization({out.input(0)}, {node.attr('axis', -1)}, "
               f"{node.attr('p', 2)})")


@converts("Det")
def convert_det(node: Node, out: Emitter) -> None:
    out.assign(f"ops.det({out.input(0)})")


def packable(node: Node) -> bool:
    """A recurrent node ``packed_recurrent`` computes: an LSTM with default activations and no
    peepholes, clip, forget coupling or sequence lengths, or a GRU as PyTorch's
    (``linear_before_reset``, default activations, no clip or sequence lengths), with constant
    float32 weights."""
    defaults = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"]}.get(node.op_type)
    if defaults is None or weights(node, 1, 2, 3) is None or node.input(1) is None \
            or node.input(1).const is None or node.input(2).const is None:
        return False
    activations = node.attr("activations")
    return (not out_given(node, 4) and not (node.op_type == "LSTM" and out_given(node, 7))
            and (activations is None or [a.lower() for a in activations] in (
                defaults, defaults * 2))
            and node.attr("activation_alpha") is None and node.attr("activation_beta") is None
            and node.attr("clip") is None and not node.attr("input_forget", 0)
            and (node.op_type == "LSTM" or node.attr("linear_before_reset", 0))
            and node.attr("direction", "forward") in ("forward", "reverse", "bidirectional"))


def out_given(node: Node, i: int) -> bool:
    return node.input(i) is not None


#: Where ``functional.lstm_sequence``'s and ``gru_sequence``'s gates (i, f, g, o; r, z, n) are
#: in ONNX's (i, o, f, c; z, r, h).
_GATE_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2)}


def packed_gates(kind: str, w: np.ndarray, r: np.ndarray, b: np.ndarray | None
                 ) -> dict[str, np.ndarray]:
    """ONNX's weights ``W`` ``[dirs, gates * hidden, d_input]``, ``R`` and ``B`` packed as
    ``packed_recurrent`` reads them: ``weight`` ``[d_input, dirs * gates * hidden]`` and
    ``bias`` ``[dirs * gates * hidden]`` (every direction's input part: one product; the LSTM's
    two biases summed, its cell only reads their sum), ``hidden_weight`` ``[dirs, hidden, gates
    * hidden]`` and, for a GRU, ``hidden_bias`` ``[dirs, gates * hidden]``."""
    order = _GATE_ORDER[kind]
    hidden = r.shape[-1]

    def gates(a: np.ndarray) -> np.ndarray:  # [dirs, gates * hidden, ...] reordered
        return np.concatenate([a[:, k * hidden:(k + 1) * hidden] for k in order], axis=1)

    directions, rows = w.shape[0], len(order) * hidden
    b = np.zeros((directions, 2 * rows), np.float32) if b is None else b
    wb, rb = gates(b[:, :rows]), gates(b[:, rows:])
    packed = {"weight": np.ascontiguousarray(gates(w).transpose(2, 0, 1).reshape(
        w.shape[-1], directions * rows)),
              "hidden_weight": np.ascontiguousarray(gates(r).transpose(0, 2, 1))}
    if kind == "LSTM":
        packed["bias"] = np.ascontiguousarray((wb + rb).reshape(-1))
    else:
        packed["bias"] = np.ascontiguousarray(wb.reshape(-1))
        packed["hidden_bias"] = np.ascontiguousarray(rb)
    return packed


@converts("LSTM", "GRU", "RNN")
def convert_recurrent(node: Node, out: Emitter) -> None:
    hidden = node.attr("hidden_size")
    layout = node.attr("layout", 0)
    count = 3 if node.op_type == "LSTM" else 2
    if packable(node):
        w, r, b = weights(node, 1, 2, 3)
        hint = node.name or node.op_type.lower()
        packed = {k: out.param(v, f"{hint}_{k}")
                  for k, v in packed_gates(node.op_type, w, r, b).items()}
        states = f"{out.input(5)}, {out.input(6)}" if node.op_type == "LSTM" else out.input(5)
        out.assign_all(f"ops.packed_recurrent({node.op_type!r}, {out.input(0)}, "
                       f"{packed['weight']}, {packed['hidden_weight']}, {packed['bias']}, "
                       f"{packed.get('hidden_bias', 'None')}, {states}, "
                       f"direction={node.attr('direction', 'forward')!r}, layout={layout})",
                       count)
        return
    keys = ["direction", "activations", "activation_alpha", "activation_beta", "clip",
            "input_forget", "linear_before_reset"]
    kwargs = "".join(f", {k}={literal(node.attr(k))}" for k in keys if node.attr(k) is not None)
    args = ", ".join(out.input(i) for i in range(min(len(node.inputs), 8)))
    out.assign_all(f"ops.recurrent({node.op_type!r}, {args}, hidden_size={hidden}, "
                   f"layout={layout}{kwargs})", count)


@converts("NonMaxSuppression")
def convert_non_max_suppression(node: Node, out: Emitter) -> None:
    def number(i: int, default: str) -> str:
        value = node.const(i)
        if value is not None:
            return default if value.size == 0 else literal(value.reshape(-1)[0].item())
        return f"ops.scalar({out.input(i)})" if out.has(i) else default

    out.assign(f"ops.non_max_suppression({out.input(0)}, {out.input(1)}, {number(2, '0')}, "
               f"{number(3, '0.0')}, {number(4, 'None')}, "
               f"center_point_box={node.attr('center_point_box', 0)})")


@converts("LinearAttention")
def convert_linear_attention(node: Node, out: Emitter) -> None:
    args = ", ".join(out.input(i) for i in range(6))
    out.assign_all(f"ops.linear_attention({args}, q_num_heads={node.attr('q_num_heads')}, "
                   f"kv_num_heads={node.attr('kv_num_heads')}, "
                   f"scale={node.attr('scale', 0.0)!r}, "
                   f"update_rule={node.attr('update_rule', 'gated_delta')!r})", 2)


@converts("DeformConv")
def convert_deform_conv(node: Node, out: Emitter) -> None:
    x = node.input(0)
    if x is not None and x.rank is not None and x.rank != 4:
        raise out.unsupported(f"DeformConv over {x.rank - 2} spatial dims (2 are supported)")
    kwargs = window_kwargs(node, "dilations", "group", "offset_group", "pads", "strides")
    args = ", ".join(out.input(i) for i in range(5))
    out.assign(f"ops.deform_conv({args}" + (f", {kwargs})" if kwargs else ")"))


@converts("RoiAlign")
def convert_roi_align(node: Node, out: Emitter) -> None:
    mode = node.attr("coordinate_transformation_mode",
                     "half_pixel" if node.opset >= 16 else "output_half_pixel")
    out.assign(f"ops.roi_align({out.input(0)}, {out.input(1)}, {out.input(2)}, "
               f"{node.attr('output_height', 1)}, {node.attr('output_width', 1)}, "
               f"{node.attr('sampling_ratio', 0)}, {node.attr('spatial_scale', 1.0)!r}, "
               f"{node.attr('mode', 'avg')!r}, {mode!r})")
