"""The shapes of an op's results from its arguments' shapes, so that the client knows them
without asking the server.

Each rule takes the op's arguments as the protocol passes them (positionally; primitives are
anything with ``.shape``) and returns ``(form, shapes)``: ``form`` says what the op returns
(``ONE`` primitive, a ``TUPLE`` or a ``LIST`` of them, or ``NONE``) and ``shapes`` the shape of
each primitive in order. An op without a rule (convolutions, pools, batch norm...) costs one round
trip the first time it is called with given argument shapes and parameters; the client keeps the
answer. The server runs the same rules before it executes an op, to bound the memory an op may
allocate, and checks the results against them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

ONE, TUPLE, LIST, NONE = 0, 1, 2, 3

Shape = tuple[int, ...]
Rule = Callable[..., tuple[int, list[Shape]]]


def broadcast(*shapes: Shape) -> Shape:
    """NumPy's broadcast of ``shapes`` (the operands' shapes are known to broadcast)."""
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        for i, size in enumerate(s, ndim - len(s)):
            if size != 1:
                out[i] = size
    return tuple(out)


def reduced(shape: Shape, dim: int | None) -> Shape:
    """``shape`` reduced along ``dim`` (kept with size 1); every dim (a 0-d result) for None."""
    if dim is None:
        return ()
    return (*shape[:dim], 1, *shape[dim + 1:])


def _one(shape: Shape) -> tuple[int, list[Shape]]:
    return ONE, [shape]


def same_shape(x: Any, *_: Any) -> tuple[int, list[Shape]]:
    """The rule of ops whose one result has their first operand's shape."""
    return ONE, [x.shape]


def _binary(lhs: Any, rhs: Any, *_: Any) -> tuple[int, list[Shape]]:
    return ONE, [broadcast(lhs.shape, rhs.shape)]


def _ternary(a: Any, b: Any, c: Any) -> tuple[int, list[Shape]]:
    return ONE, [broadcast(a.shape, b.shape, c.shape)]


def _reduce(x: Any, dim: int | None, *_: Any) -> tuple[int, list[Shape]]:
    return ONE, [reduced(x.shape, dim)]


def _with_indices(x: Any, dim: int, *_: Any) -> tuple[int, list[Shape]]:
    shape = reduced(x.shape, dim)
    return TUPLE, [shape, shape]


def _sorted_with_indices(x: Any, *_: Any) -> tuple[int, list[Shape]]:
    return TUPLE, [x.shape, x.shape]


def _topk(x: Any, dim: int, k: int) -> tuple[int, list[Shape]]:
    shape = (*x.shape[:dim], k, *x.shape[dim + 1:])
    return TUPLE, [shape, shape]


def _created(shape: Sequence[int], *_: Any) -> tuple[int, list[Shape]]:
    return ONE, [tuple(shape)]


def _arange(start: float, end: float, step: float, *_: Any) -> tuple[int, list[Shape]]:
    if all(isinstance(v, int) for v in (start, end, step)):
        return ONE, [(max(0, int(-((start - end) // step))),)]
    return ONE, [(max(0, math.ceil((end - start) / step)),)]


def _reshape(x: Any, shape: Sequence[int]) -> tuple[int, list[Shape]]:
    shape = tuple(shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        numel = math.prod(x.shape)
        shape = tuple((numel // known if known else 0) if s == -1 else s for s in shape)
    return ONE, [shape]


def _expand(x: Any, shape: Sequence[int]) -> tuple[int, list[Shape]]:
    offset = len(shape) - len(x.shape)
    return ONE, [tuple(x.shape[i - offset] if s == -1 else s for i, s in enumerate(shape))]


def _permute(x: Any, axes: Sequence[int]) -> tuple[int, list[Shape]]:
    return ONE, [tuple(x.shape[a] for a in axes)]


def _slice(x: Any, ranges: Sequence[Sequence[int]]) -> tuple[int, list[Shape]]:
    sizes = [len(range(*r)) for r in ranges]
    return ONE, [(*sizes, *x.shape[len(sizes):])]


def _gather(x: Any, dim: int, indices: Any) -> tuple[int, list[Shape]]:
    return ONE, [indices.shape]


def _select(x: Any, dim: int, indices: Any) -> tuple[int, list[Shape]]:
    return ONE, [(*x.shape[:dim], indices.shape[0], *x.shape[dim + 1:])]


def _cat(xs: Sequence[Any], dim: int) -> tuple[int, list[Shape]]:
    first = xs[0].shape
    return ONE, [(*first[:dim], sum(x.shape[dim] for x in xs), *first[dim + 1:])]


def _split(x: Any, sizes: Sequence[int], dim: int) -> tuple[int, list[Shape]]:
    return LIST, [(*x.shape[:dim], size, *x.shape[dim + 1:]) for size in sizes]


def _repeat_dim(x: Any, dim: int, times: int) -> tuple[int, list[Shape]]:
    return ONE, [(*x.shape[:dim], x.shape[dim] * times, *x.shape[dim + 1:])]


def _matmul(lhs: Any, rhs: Any) -> tuple[int, list[Shape]] | None:
    a, b = lhs.shape, rhs.shape
    if len(a) < 2 or len(b) < 2:
        return None
    return ONE, [(*broadcast(a[:-2], b[:-2]), a[-2], b[-1])]


def _embedding(weights: Any, indices: Any) -> tuple[int, list[Shape]]:
    return ONE, [(*indices.shape, weights.shape[-1])]


def _multinomial(weights: Any, num_samples: int, *_: Any) -> tuple[int, list[Shape]]:
    return ONE, [(weights.shape[0], num_samples)]


def _mask_fill(x: Any, mask: Any, *_: Any) -> tuple[int, list[Shape]]:
    return ONE, [broadcast(x.shape, mask.shape)]


def _adam(value: Any, grad: Any, moment_1: Any, moment_2: Any, *_: Any) -> tuple[int, list[Shape]]:
    return TUPLE, [value.shape, moment_1.shape, moment_2.shape]


def _nothing(*_: Any) -> tuple[int, list[Shape]]:
    return NONE, []


_SAME = ("abs", "ceil", "cos", "erf", "exp", "floor", "is_inf", "is_nan", "log", "log1p",
         "round", "rsqrt", "recip", "sign", "sin", "sqrt", "tan", "tanh", "neg", "bitwise_not",
         "logical_not", "cast", "add_scalar", "sub_scalar", "mul_scalar", "div_scalar",
         "pow_scalar", "add_scalar_assign", "mul_scalar_assign", "clamp", "relu", "gelu",
         "hard_sigmoid", "hard_swish", "sigmoid", "log_sigmoid", "softmax", "log_softmax",
         "softmax_backward", "log_softmax_backward", "relu_backward", "argsort", "sort", "cumsum",
         "cumprod", "flip", "add_assign", "sub_assign", "mul_assign", "div_assign", "scatter_add",
         "select_add", "slice_assign")
_BINARY = ("add", "sub", "mul", "div", "pow", "remainder", "maximum", "minimum", "equal",
           "not_equal", "greater", "greater_equal", "lower", "lower_equal", "logical_and",
           "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor")
_REDUCE = ("sum", "prod", "max", "min", "argmax", "argmin", "mean", "var", "any", "all")

#: The rule of each op that has one. A rule may return None: no rule for those arguments.
RULES: dict[str, Callable[..., tuple[int, list[Shape]] | None]] = {
    **dict.fromkeys(_SAME, same_shape),
    **dict.fromkeys(_BINARY, _binary),
    **dict.fromkeys(_REDUCE, _reduce),
    **dict.fromkeys(("empty", "zeros", "ones", "full", "random"), _created),
    **dict.fromkeys(("max_with_indices", "min_with_indices"), _with_indices),
    **dict.fromkeys(("adam_step", "adam_step_device"), _adam),
    "where": _ternary, "mul_add": _ternary, "arange": _arange, "reshape": _reshape,
    "expand": _expand, "permute": _permute, "slice": _slice, "gather": _gather,
    "select": _select, "cat": _cat, "split": _split, "repeat_dim": _repeat_dim,
    "matmul": _matmul, "embedding": _embedding, "multinomial": _multinomial,
    "mask_fill": _mask_fill, "sort_with_indices": _sorted_with_indices, "topk_with_indices": _topk,
    "from_data": lambda data, device: (ONE, [tuple(data.shape)]),
    "seed": _nothing, "check_indices": _nothing,
}
