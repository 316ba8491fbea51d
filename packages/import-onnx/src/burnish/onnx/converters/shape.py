"""Shape, indexing and joining operators: Reshape, Slice, Gather, Concat, Pad, scatters..."""

from __future__ import annotations

import numpy as np

from burnish.onnx.codegen import Emitter, literal
from burnish.onnx.converter import Converter
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import DTYPES, Node
from burnish.onnx.simplify import numpy_elem_type

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)


def axes(node: Node, out: Emitter, index: int, attribute: str = "axes") -> str:
    """Axes from input ``index`` (newer opsets) or the attribute (older ones)."""
    if out.has(index):
        return out.ints(index)
    value = node.attr(attribute)
    return "None" if value is None else literal(value)


@converts("Reshape")
def convert_reshape(node: Node, out: Emitter) -> None:
    shape = node.ints(1)
    allowzero = node.attr("allowzero", 0)
    if shape is not None and all(d > 0 for d in shape):
        out.assign(f"{out.input(0)}.reshape({literal(shape)})")
    else:
        out.assign(f"ops.reshape({out.input(0)}, {out.ints(1)}, allowzero={allowzero})")


@converts("Relayout", domain="burnish")
def convert_relayout(node: Node, out: Emitter) -> None:
    """The importer's own fused Reshape, Transpose, Reshape."""
    out.assign(f"ops.relayout({out.input(0)}, {literal(node.attr('shape'))}, "
               f"{literal(node.attr('perm'))}, {literal(node.attr('to'))})")


@converts("Flatten")
def convert_flatten(node: Node, out: Emitter) -> None:
    out.assign(f"ops.flatten({out.input(0)}, {node.attr('axis', 1)})")


@converts("Squeeze")
def convert_squeeze(node: Node, out: Emitter) -> None:
    out.assign(f"ops.squeeze({out.input(0)}, {axes(node, out, 1)})")


@converts("Unsqueeze")
def convert_unsqueeze(node: Node, out: Emitter) -> None:
    out.assign(f"ops.unsqueeze({out.input(0)}, {axes(node, out, 1)})")


@converts("Transpose")
def convert_transpose(node: Node, out: Emitter) -> None:
    perm = node.attr("perm")
    if perm is not None and len(perm) > 1:
        out.assign(f"{out.input(0)}.permute({literal(perm)})")
    else:
        out.assign(f"ops.transpose({out.input(0)})")


@converts("Concat")
def convert_concat(node: Node, out: Emitter) -> None:
    out.assign(f"bn.cat([{', '.join(out.inputs())}], {node.attr('axis')})")


@converts("Split")
def convert_split(node: Node, out: Emitter) -> None:
    sizes = out.ints(1) if out.has(1) else literal(node.attr("split")) if node.attr(
        "split") else "None"
    count = len(node.outputs)
    num_outputs = node.attr("num_outputs")
    out.assign_all(f"ops.split({out.input(0)}, {node.attr('axis', 0)}, {sizes}, {count}, "
                   f"num_outputs={literal(num_outputs)})")


@converts("Slice")
def convert_slice(node: Node, out: Emitter) -> None:
    out.assign(f"ops.slice_({out.input(0)}, {out.ints(1)}, {out.ints(2)}, {out.ints(3)}, "
               f"{out.ints(4)})")


@converts("Gather")
def convert_gather(node: Node, out: Emitter) -> None:
    index = node.const(1)
    if index is not None and index.size == 1 and index.dtype.kind in "iu":
        # One constant index (attention's q, k and v split off one projection): a view.
        out.assign(f"ops.gather_one({out.input(0)}, {int(index.reshape(-1)[0])}, "
                   f"{node.attr('axis', 0)}, {literal(list(index.shape))})")
        return
    out.assign(f"ops.gather({out.input(0)}, {out.input(1)}, {node.attr('axis', 0)})")


@converts("GatherElements")
def convert_gather_elements(node: Node, out: Emitter) -> None:
    out.assign(f"ops.gather_elements({out.input(0)}, {out.input(1)}, {node.attr('axis', 0)})")


@converts("GatherND")
def convert_gather_nd(node: Node, out: Emitter) -> None:
    out.assign(f"ops.gather_nd({out.input(0)}, {out.input(1)}, {node.attr('batch_dims', 0)})")


@converts("ScatterElements", "Scatter")
def convert_scatter_elements(node: Node, out: Emitter) -> None:
    out.assign(f"ops.scatter_elements({out.input(0)}, {out.input(1)}, {out.input(2)}, "
               f"{node.attr('axis', 0)}, {node.attr('reduction', 'none')!r})")


@converts("ScatterND")
def convert_scatter_nd(node: Node, out: Emitter) -> None:
    out.assign(f"ops.scatter_nd({out.input(0)}, {out.input(1)}, {out.input(2)}, "
               f"{node.attr('reduction', 'none')!r})")


@converts("Expand")
def convert_expand(node: Node, out: Emitter) -> None:
    out.assign(f"ops.expand({out.input(0)}, {out.ints(1)})")


@converts("Tile")
def convert_tile(node: Node, out: Emitter) -> None:
    out.assign(f"{out.input(0)}.repeat({out.ints(1)})")


@converts("Pad")
def convert_pad(node: Node, out: Emitter) -> None:
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise out.unsupported(f"pad mode {mode!r}")
    out.assign(f"ops.pad({out.input(0)}, {out.ints(1)}, {mode!r}, {out.input(2)}, "
               f"{out.ints(3)})")


@converts("DepthToSpace")
def convert_depth_to_space(node: Node, out: Emitter) -> None:
    out.assign(f"ops.depth_to_space({out.input(0)}, {node.attr('blocksize')}, "
               f"{node.attr('mode', 'DCR')!r})")


@converts("SpaceToDepth")
def convert_space_to_depth(node: Node, out: Emitter) -> None:
    out.assign(f"ops.space_to_depth({out.input(0)}, {node.attr('blocksize')}, "
               f"{node.attr('mode', 'DCR')!r})")


@converts("Shape")
def convert_shape(node: Node, out: Emitter) -> None:
    out.assign(f"ops.shape_of({out.input(0)}, {node.attr('start', 0)}, "
               f"{literal(node.attr('end'))})")


@converts("Size")
def convert_size(node: Node, out: Emitter) -> None:
    out.assign(f"ops.size({out.input(0)})")


@converts("ConstantOfShape")
def convert_constant_of_shape(node: Node, out: Emitter) -> None:
    value = node.attr("value")
    if value is None:
        fill = "None"
    else:
        dtype = DTYPES.get(numpy_elem_type(value))
        if dtype is None:
            raise out.unsupported(f"a fill value of dtype {value.dtype}")
        fill = f"ops.const({literal(value.reshape(-1).tolist())}, {dtype!r}, device)"
    out.assign(f"ops.constant_of_shape({out.ints(0)}, {fill}, device)")


@converts("Range")
def convert_range(node: Node, out: Emitter) -> None:
    out.assign(f"ops.range_({out.input(0)}, {out.input(1)}, {out.input(2)})")


@converts("OneHot")
def convert_one_hot(node: Node, out: Emitter) -> None:
    out.assign(f"ops.one_hot({out.input(0)}, {out.input(1)}, {out.input(2)}, "
               f"{node.attr('axis', -1)})")


@converts("EyeLike")
def convert_eye_like(node: Node, out: Emitter) -> None:
    dtype = node.attr("dtype")
    name = None
    if dtype is not None:
        name = DTYPES.get(dtype)
        if name is None:
            raise out.unsupported(f"EyeLike to element type {dtype}")
    out.assign(f"ops.eye_like({out.input(0)}, {node.attr('k', 0)}, {literal(name)})")


@converts("Trilu")
def convert_trilu(node: Node, out: Emitter) -> None:
    k = node.ints(1)
    k = k[0] if k is not None else (f"ops.scalar({out.input(1)})" if out.has(1) else 0)
    out.assign(f"ops.trilu({out.input(0)}, {k}, {node.attr('upper', 1)})")


@converts("Compress")
def convert_compress(node: Node, out: Emitter) -> None:
    out.assign(f"ops.compress({out.input(0)}, {out.input(1)}, {literal(node.attr('axis'))})")


@converts("TopK")
def convert_top_k(node: Node, out: Emitter) -> None:
    k = node.ints(1)
    k = k[0] if k is not None else f"ops.scalar({out.input(1)})"
    out.assign_all(f"ops.top_k({out.input(0)}, {k}, {node.attr('axis', -1)}, "
                   f"{node.attr('largest', 1)}, {node.attr('sorted', 1)})", 2)


@converts("CumSum")
def convert_cumsum(node: Node, out: Emitter) -> None:
    axis = node.ints(1)
    axis = axis[0] if axis is not None else f"ops.scalar({out.input(1)})"
    out.assign(f"ops.cumsum({out.input(0)}, {axis}, {node.attr('exclusive', 0)}, "
               f"{node.attr('reverse', 0)})")


@converts("ReverseSequence")
def convert_reverse_sequence(node: Node, out: Emitter) -> None:
    out.assign(f"ops.reverse_sequence({out.input(0)}, {out.input(1)}, "
               f"{node.attr('batch_axis', 1)}, {node.attr('time_axis', 0)})")


@converts("ArgMax", "ArgMin")
def convert_arg_max(node: Node, out: Emitter) -> None:
    smallest = node.op_type == "ArgMin"
    out.assign(f"ops.arg_max({out.input(0)}, {node.attr('axis', 0)}, "
               f"{node.attr('keepdims', 1)}, {node.attr('select_last_index', 0)}, "
               f"smallest={smallest})")


@converts("Hardmax")
def convert_hardmax(node: Node, out: Emitter) -> None:
    out.assign(f"ops.hardmax({out.input(0)}, {node.attr('axis', -1)})")


@converts("Dropout")
def convert_dropout(node: Node, out: Emitter) -> None:
    training = node.const(2)
    if out.has(2) and (training is None or bool(training.reshape(-1)[0])):
        ratio = node.const(1) if out.has(1) else np.array(0.5)
        if training is None or ratio is None:
            # Known at run time only: the model checks that it drops nothing there.
            out.assign(f"ops.dropout_inference({out.input(0)}, {out.input(1)}, {out.input(2)})")
            if out.used(1):
                out.assign(f"ops.dropout_mask({out.input(0)})", 1)
            return
        if float(ratio.reshape(-1)[0]) != 0.0:
            raise out.unsupported("Dropout in training mode (random masks cannot be "
                                  "reproduced)")
    out.assign(out.input(0))
    if out.used(1):
        out.assign(f"ops.dropout_mask({out.input(0)})", 1)


@converts("CumProd")
def convert_cumprod(node: Node, out: Emitter) -> None:
    axis = node.ints(1)
    axis = axis[0] if axis is not None else f"ops.scalar({out.input(1)})"
    out.assign(f"ops.cumprod({out.input(0)}, {axis}, {node.attr('exclusive', 0)}, "
               f"{node.attr('reverse', 0)})")


@converts("Unique")
def convert_unique(node: Node, out: Emitter) -> None:
    out.assign_all(f"ops.unique({out.input(0)}, {literal(node.attr('axis'))}, "
                   f"{node.attr('sorted', 1)})", 4)


@converts("MaxUnpool")
def convert_max_unpool(node: Node, out: Emitter) -> None:
    shape = out.ints(2) if out.has(2) else "None"
    out.assign(f"ops.max_unpool({out.input(0)}, {out.input(1)}, "
               f"{literal(node.attr('kernel_shape'))}, {literal(node.attr('strides'))}, "
               f"{literal(node.attr('pads'))}, {shape})")


@converts("Resize", "Upsample")
def convert_resize(node: Node, out: Emitter) -> None:
    if node.op_type == "Upsample":
        scales, roi, sizes = out.floats(1), "None", "None"
    else:
        roi, scales, sizes = out.floats(1), out.floats(2), out.ints(3)
    keys = ["mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
            "extrapolation_value", "nearest_mode", "antialias", "axes",
            "keep_aspect_ratio_policy"]
    kwargs = "".join(f", {k}={literal(node.attr(k))}" for k in keys if node.attr(k) is not None)
    out.assign(f"ops.resize({out.input(0)}, {roi}, {scales}, {sizes}{kwargs})")


@converts("GridSample")
def convert_grid_sample(node: Node, out: Emitter) -> None:
    mode = node.attr("mode", "linear" if node.opset >= 20 else "bilinear")
    out.assign(f"ops.grid_sample({out.input(0)}, {out.input(1)}, {mode!r}, "
               f"{node.attr('padding_mode', 'zeros')!r}, {node.attr('align_corners', 0)})")


@converts("AffineGrid")
def convert_affine_grid(node: Node, out: Emitter) -> None:
    out.assign(f"ops.affine_grid({out.input(0)}, {out.ints(1)}, "
               f"{node.attr('align_corners', 0)})")


@converts("Col2Im")
def convert_col2im(node: Node, out: Emitter) -> None:
    kwargs = "".join(f", {key}={literal(node.attr(key))}"
                     for key in ("dilations", "pads", "strides") if node.attr(key) is not None)
    out.assign(f"ops.col2im({out.input(0)}, {out.ints(1)}, {out.ints(2)}{kwargs})")


@converts("TensorScatter")
def convert_tensor_scatter(node: Node, out: Emitter) -> None:
    out.assign(f"ops.tensor_scatter({out.input(0)}, {out.input(1)}, {out.input(2)}, "
               f"{node.attr('mode', 'linear')!r}, {node.attr('axis', -2)})")
