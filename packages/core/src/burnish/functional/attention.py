"""Scaled dot-product attention (PyTorch's ``F.scaled_dot_product_attention``, burnish's masks)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from burnish import amp as _amp
from burnish.backend import AutodiffOps
from burnish.backend.attention_ops import masked_score
from burnish.distribution import Distribution
from burnish.dtype import Kind
from burnish.errors import DTypeError, ShapeError
from burnish.shape import show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor

_OP = "scaled_dot_product_attention"


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                                 causal: bool = False, scale: float | None = None,
                                 dropout: float = 0.0) -> Tensor:
    """``softmax(q @ k^T * scale) @ v`` per batch and head, as one backend op.

    ``q`` is ``[batch, heads, seq_q, head_dim]``, ``k`` ``[batch, heads, seq_k, head_dim]`` and
    ``v`` ``[batch, heads, seq_k, value_dim]``, all of one float dtype; the result is ``[batch,
    heads, seq_q, value_dim]``. ``scale`` defaults to ``1 / sqrt(head_dim)``.

    ``mask`` is bool, broadcastable to ``[batch, heads, seq_q, seq_k]`` and **true where
    attention is forbidden** (``nn.MultiHeadAttention``'s convention; PyTorch's bool
    ``attn_mask`` means the opposite). ``causal`` also forbids query ``i`` to attend to key
    ``j > i`` (upper-left aligned when ``seq_q != seq_k``, as PyTorch's ``is_causal``).
    Forbidden scores take the dtype's most negative value, so a query with no key left gets
    uniform weights (the mean of ``v``), never NaN.

    Backends with a fused kernel (the ``burnish.jit`` ones) never store the ``seq_q x seq_k``
    scores, in the forward or the backward pass. ``dropout`` (a probability, applied to the
    weights while training, i.e. on an autodiff backend) needs the weights themselves: with
    ``dropout > 0`` while training this takes the materialised path (scores, softmax, dropout,
    product) instead of the fused op.

    Raises ShapeError for shapes that do not fit (naming them), DTypeError for non-float inputs
    or a non-bool mask, DeviceError for tensors on different devices.
    """
    if _amp.entered and (low := _amp.state.dtype) is not None:
        q, k, v = _amp.low(q, low), _amp.low(k, low), _amp.low(v, low)
    _check(q, k, v, mask)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[3]) if q.shape[3] else 1.0
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"{_OP}: dropout must be in [0, 1), got {dropout}")
    mask4 = None if mask is None else mask.reshape([1] * (4 - mask.ndim) + list(mask.shape))
    if dropout > 0.0 and isinstance(q.backend, AutodiffOps):
        return _materialised(q, k, v, mask4, causal, float(scale), dropout)
    out, _ = q.backend.attention(q._prim, k._prim, v._prim,
                                 None if mask4 is None else mask4._prim, float(scale),
                                 bool(causal), q.dtype)
    return _core.make(out, q.device, q.dtype)


def _materialised(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool,
                  scale: float, dropout: float) -> Tensor:
    """The attention with dropout on its weights, through the scores themselves."""
    from burnish.functional.activation import softmax
    from burnish.tensor import Tensor

    scores = q.matmul(k.transpose()) * scale
    fill = masked_score(q.dtype)
    if mask is not None:
        scores = scores.mask_fill(mask, fill)
    if causal:
        rows = Tensor.arange(q.shape[2], device=q.device).unsqueeze(1)
        scores = scores.mask_fill(Tensor.arange(k.shape[2], device=q.device).unsqueeze(0) > rows,
                                  fill)
    weights = softmax(scores, -1)
    keep = Tensor.random(weights.shape, Distribution.bernoulli(1.0 - dropout), q.device,
                         q.dtype)
    return (weights * keep * (1.0 / (1.0 - dropout))).matmul(v)


def _check(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        if type(x) is not _core.Tensor:
            raise TypeError(f"{_OP}: {name} must be a Tensor, got {type(x).__name__}")
        if x.ndim != 4:
            raise ShapeError(f"{_OP}: {name} must be [batch, heads, seq, dim], got "
                             f"{show(x.shape)}")
    if q.dtype.kind is not Kind.FLOAT:
        raise DTypeError(f"{_OP} needs float tensors, got q of {q.dtype}")
    for name, x in (("k", k), ("v", v)):
        _core.same_device(q, x, _OP)
        if x.dtype is not q.dtype:
            raise DTypeError(f"{_OP}: q is {q.dtype} but {name} is {x.dtype}; cast one")
    batch, heads, seq_q, dim = q.shape
    if list(k.shape[:2]) != [batch, heads] or k.shape[3] != dim:
        raise ShapeError(f"{_OP}: q {show(q.shape)} and k {show(k.shape)} do not fit; k must "
                         f"be [{batch}, {heads}, seq_k, {dim}]")
    seq_k = k.shape[2]
    if list(v.shape[:3]) != [batch, heads, seq_k]:
        raise ShapeError(f"{_OP}: k {show(k.shape)} and v {show(v.shape)} do not fit; v must "
                         f"be [{batch}, {heads}, {seq_k}, value_dim]")
    if seq_k == 0:
        raise ShapeError(f"{_OP}: k {show(k.shape)} has no keys to attend to")
    if mask is None:
        return
    if type(mask) is not _core.Tensor:
        raise TypeError(f"{_OP}: mask must be a Tensor, got {type(mask).__name__}")
    if mask.dtype.kind is not Kind.BOOL:
        raise DTypeError(f"{_OP}: mask must be bool (true where attention is forbidden), got "
                         f"{mask.dtype}")
    _core.same_device(q, mask, _OP)
    scores = (batch, heads, seq_q, seq_k)
    shape = tuple(mask.shape)
    if len(shape) > 4 or any(m not in (1, s) for m, s in zip(shape[::-1], scores[::-1])):
        raise ShapeError(f"{_OP}: mask {show(shape)} does not broadcast to the scores "
                         f"[batch, heads, seq_q, seq_k] = {show(list(scores))}")
