"""Elementwise operators: arithmetic, comparisons, logic, math functions, activations, casts."""

from __future__ import annotations

from burnish.onnx.codegen import Emitter
from burnish.onnx.converter import Converter
from burnish.onnx.converters.registry import collector
from burnish.onnx.graph import DTYPES, Node, type_name

CONVERTERS: list[Converter] = []
converts = collector(CONVERTERS)

#: One-input operators and the expression each becomes.
UNARY = {
    "Abs": "{0}.abs()", "Neg": "-{0}", "Exp": "{0}.exp()", "Log": "{0}.log()",
    "Sqrt": "{0}.sqrt()", "Reciprocal": "{0}.recip()", "Sin": "{0}.sin()", "Cos": "{0}.cos()",
    "Tan": "{0}.tan()", "Tanh": "{0}.tanh()", "Erf": "{0}.erf()", "Floor": "{0}.floor()",
    "Ceil": "{0}.ceil()", "Round": "{0}.round()", "Sigmoid": "F.sigmoid({0})",
    "Not": "~{0}", "IsNaN": "{0}.is_nan()", "Sign": "{0}.sign()", "Identity": "{0}",
    "Sinh": "ops.sinh({0})", "Cosh": "ops.cosh({0})", "Asinh": "ops.asinh({0})",
    "Acosh": "ops.acosh({0})", "Atanh": "ops.atanh({0})", "Atan": "ops.atan({0})",
    "Asin": "ops.asin({0})", "Acos": "ops.acos({0})", "BitwiseNot": "~{0}",
    "NonZero": "ops.nonzero({0})",
}

#: Two-input operators written as Python operators (scalars are weak, as ONNX's same-type
#: operands need).
OPERATORS = {
    "Add": "+", "Sub": "-", "Mul": "*", "Equal": "==", "Greater": ">", "Less": "<",
    "GreaterOrEqual": ">=", "LessOrEqual": "<=", "And": "&", "Or": "|", "Xor": "^",
    "BitwiseAnd": "&", "BitwiseOr": "|", "BitwiseXor": "^",
}


def operand(out: Emitter, i: int) -> str:
    return out.scalar(i) or out.input(i)


def is_float(node: Node, i: int) -> bool | None:
    value = node.input(i)
    if value is None or not value.elem_type:
        return None
    return (value.dtype or "").startswith(("float", "bfloat"))


@converts(*UNARY)
def convert_unary(node: Node, out: Emitter) -> None:
    out.assign(UNARY[node.op_type].format(out.input(0)))


@converts("Relu")
def convert_relu(node: Node, out: Emitter) -> None:
    if is_float(node, 0) is False:
        out.assign(f"{out.input(0)}.clamp_min(0)")
    else:
        out.assign(f"F.relu({out.input(0)})")


@converts(*OPERATORS)
def convert_operator(node: Node, out: Emitter) -> None:
    a, b = out.scalar(0), out.scalar(1)
    a = out.input(0) if a is None or b is not None else a
    b = out.input(1) if b is None else b
    out.assign(f"{a} {OPERATORS[node.op_type]} {b}")


@converts("Div")
def convert_div(node: Node, out: Emitter) -> None:
    if is_float(node, 0):
        out.assign(f"{operand(out, 0)} / {operand(out, 1)}")
    else:
        out.assign(f"ops.div({out.input(0)}, {out.input(1)})")


@converts("Pow")
def convert_pow(node: Node, out: Emitter) -> None:
    out.assign(f"ops.pow({out.input(0)}, {operand(out, 1)})")


@converts("Mod")
def convert_mod(node: Node, out: Emitter) -> None:
    out.assign(f"ops.mod({out.input(0)}, {out.input(1)}, fmod={node.attr('fmod', 0)})")


@converts("BitShift")
def convert_bit_shift(node: Node, out: Emitter) -> None:
    out.assign(f"ops.bit_shift({out.input(0)}, {out.input(1)}, {node.attr('direction')!r})")


@converts("Max", "Min", "Sum", "Mean")
def convert_variadic(node: Node, out: Emitter) -> None:
    function = {"Max": "maximum", "Min": "minimum", "Sum": "total", "Mean": "mean"}[node.op_type]
    inputs = out.inputs()
    out.assign(inputs[0] if len(inputs) == 1 else f"ops.{function}({', '.join(inputs)})")


@converts("IsInf")
def convert_is_inf(node: Node, out: Emitter) -> None:
    out.assign(f"ops.is_inf({out.input(0)}, {node.attr('detect_negative', 1)}, "
               f"{node.attr('detect_positive', 1)})")


@converts("Where")
def convert_where(node: Node, out: Emitter) -> None:
    out.assign(f"bn.where({out.input(0)}, {out.input(1)}, {out.input(2)})")


def dtype_name(node: Node, elem_type: int, out: Emitter) -> str:
    name = DTYPES.get(elem_type)
    if name is None:
        raise out.unsupported(f"element type {type_name(elem_type)}, which burnish has no "
                              "dtype for")
    return name


def _saturate(node: Node) -> str:
    """The cast's ``saturate`` and ``round_mode`` arguments where they are not the defaults."""
    found = "" if node.attr("saturate", 1) else ", saturate=False"
    round_mode = node.attr("round_mode", "up")
    return found + ("" if round_mode == "up" else f", round_mode={round_mode!r}")


@converts("Cast")
def convert_cast(node: Node, out: Emitter) -> None:
    target = dtype_name(node, node.attr("to"), out)
    out.assign(f"ops.cast({out.input(0)}, {target!r}{_saturate(node)})")


@converts("BitCast")
def convert_bitcast(node: Node, out: Emitter) -> None:
    target = dtype_name(node, node.attr("to"), out)
    out.assign(f"ops.bitcast({out.input(0)}, {target!r})")


@converts("CastLike")
def convert_cast_like(node: Node, out: Emitter) -> None:
    like = node.input(1)
    if like is not None and like.elem_type:
        target = dtype_name(node, like.elem_type, out)
        out.assign(f"ops.cast({out.input(0)}, {target!r}{_saturate(node)})")
    else:
        out.assign(f"ops.cast_like({out.input(0)}, {out.input(1)}{_saturate(node)})")


@converts("Clip")
def convert_clip(node: Node, out: Emitter) -> None:
    low, high = node.const(1), node.const(2)
    x = out.input(0)
    if (low is None or low.ndim == 0) and (high is None or high.ndim == 0) and \
            (low is not None or not out.has(1)) and (high is not None or not out.has(2)):
        if low is None and high is None:
            out.assign(x)
        elif is_float(node, 0):
            args = ", ".join(f"{k}={out.scalar(i)}" for k, i, v in (("min", 1, low),
                                                                     ("max", 2, high))
                             if v is not None)
            out.assign(f"{x}.clamp({args})")
        else:
            out.assign(f"ops.clip({x}, {out.input(1)}, {out.input(2)})")
        return
    out.assign(f"ops.clip({x}, {out.input(1)}, {out.input(2)})")


@converts("Gelu")
def convert_gelu(node: Node, out: Emitter) -> None:
    if node.attr("approximate", "none") != "none":
        raise out.decline("the tanh approximation of Gelu")
    out.assign(f"F.gelu({out.input(0)})")


@converts("LeakyRelu")
def convert_leaky_relu(node: Node, out: Emitter) -> None:
    x, alpha = out.input(0), node.attr("alpha", 0.01)
    out.assign(f"bn.where({x} >= 0, {x}, {x} * {alpha!r})")


@converts("Softplus")
def convert_softplus(node: Node, out: Emitter) -> None:
    x = out.input(0)
    out.assign(f"F.relu({x}) + (-{x}.abs()).exp().log1p()")


@converts("HardSigmoid")
def convert_hard_sigmoid(node: Node, out: Emitter) -> None:
    alpha, beta = node.attr("alpha", 0.2), node.attr("beta", 0.5)
    out.assign(f"F.hard_sigmoid({out.input(0)}, {float(alpha)!r}, {float(beta)!r})")


@converts("HardSwish")
def convert_hard_swish(node: Node, out: Emitter) -> None:
    # ONNX's x * HardSigmoid(x, 1/6, 1/2), written x * clamp(x + 3, 0, 6) / 6: one kernel
    # instead of the function body's four launches.
    out.assign(f"F.hard_swish({out.input(0)})")


@converts("Shrink")
def convert_shrink(node: Node, out: Emitter) -> None:
    out.assign(f"ops.shrink({out.input(0)}, bias={node.attr('bias', 0.0)!r}, "
               f"lambd={node.attr('lambd', 0.5)!r})")


@converts("Elu")
def convert_elu(node: Node, out: Emitter) -> None:
    out.assign(f"ops.elu({out.input(0)}, {node.attr('alpha', 1.0)!r})")
