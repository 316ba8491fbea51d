"""Attention on tensor cores: FlashAttention-2's forward and backward as hand-written CUDA
(``flash_kernels.cu``), for bfloat16 and float16 on GPUs of compute capability 8.0 or newer.

``burnish.jit``'s attention kernels give each invocation one query row and score it with
scalar products, on any GPU API. Here a warp takes 16 rows and every product (scores,
probabilities times values, and the four of the backward) is ``mma.sync`` on 16x8x16 tiles with
float32 accumulators; the scores stay in registers between the two products, as
FlashAttention-2 keeps them. Memory is linear in the sequence lengths, as there.

The backward pass is two kernels, without atomics, so it gives the same bits on every run (a
captured step replays bit for bit): ``dq`` (query rows per block, keys streamed, each row's
``delta = sum(grad * out)`` stored on the way) and ``dk``/``dv`` (keys per block, query rows
streamed).

Taken: bfloat16 and float16, head dims (of q/k and of v) that are multiples of 16 up to 128,
and operands whose rows the kernels can read in 16-byte pieces (unit stride in the head dim,
offsets and other strides multiples of 8; the backend copies an output gradient that is not).
Masks are read where they lie (broadcast dims cost nothing); ``causal`` without a mask skips
the key tiles after each block's rows, so a causal mask is cheaper as the flag. The rest goes to
``burnish.jit``'s kernels. ``BURNISH_CUDA_FLASH=0`` turns this off.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from burnish.backend.attention_ops import masked_score
from burnish.dtype import get_dtype
from burnish.jit import ir
from burnish.jit.kernels.attention import heads_last, result_tensor
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

#: The kernels' source; constants are defined in front of it per shape (``_source``).
SOURCE = (Path(__file__).parent / "flash_kernels.cu").read_text()
#: Warps per block: each takes 16 query rows (forward, ``dq``) or keys (``dk``/``dv``).
WARPS = 4
#: The widest head dim the kernels take.
MAX_HEAD_DIM = 128
#: The dtypes the kernels take (their mma operand types).
DTYPES = ("bfloat16", "float16")
#: Compute capability the kernels need (mma.sync m16n8k16 on bfloat16: Ampere).
MIN_CAPABILITY = 80



def enabled() -> bool:
    return os.environ.get("BURNISH_CUDA_FLASH", "1") != "0"


def readable(x: JitTensor) -> bool:
    """Whether the kernels read ``x``'s rows as they lie (16-byte pieces)."""
    return x.strides[3] == 1 and x.offset % 8 == 0 and all(
        s % 8 == 0 or n == 1 for s, n in zip(x.strides[:3], x.shape[:3]))


def fits(q: JitTensor, k: JitTensor, v: JitTensor, mask: JitTensor | None) -> bool:
    """Whether the kernels take these operands (the module's docstring says which)."""
    if q.dtype.name not in DTYPES or not enabled():
        return False
    dim, value_dim = q.shape[3], v.shape[3]
    if not all(0 < d <= MAX_HEAD_DIM and d % 16 == 0 for d in (dim, value_dim)):
        return False
    if numel(q.shape) == 0 or numel(k.shape) == 0:
        return False
    if not (readable(q) and readable(k) and readable(v)):
        return False
    properties = q.runtime.properties
    return properties["major"] * 10 + properties["minor"] >= MIN_CAPABILITY


def backward_fits(out: JitTensor, lse: JitTensor, grad: JitTensor) -> bool:
    """For a backward whose q, k, v and mask ``fits``: ``out`` and ``grad`` readable, ``lse``
    plain float32 (what ``attention`` returned: the kernels index it from its start)."""
    return (readable(out) and readable(grad) and lse.dtype.name == "float32"
            and lse.offset == 0 and lse.strides == contiguous_strides(lse.shape))


def _operand(x: JitTensor) -> list[int]:
    return [x.offset, *(0 if n == 1 else s for n, s in zip(x.shape, x.strides))]


def _mask_operand(mask: JitTensor | None) -> list[int]:
    """The mask's offset and strides over ``[batch, heads, seq_q, seq_k]`` (it has 4 dims,
    broadcast ones of size 1), none without one."""
    return [] if mask is None else _operand(mask)


def _mask_buffer(mask: JitTensor | None) -> list[ir.Buffer]:
    return [] if mask is None else [ir.Buffer("mask", "bool")]


def _mask_data(mask: JitTensor | None) -> list:
    return [] if mask is None else [mask.buffer]


def _shape_key(q: JitTensor, v: JitTensor, scale: float, causal: bool, masked: bool,
               layouts: tuple[bool, ...]) -> tuple:
    """The kernels' compile-time settings; ``layouts``: which of the results (out, dq, dk,
    dv) are laid out heads last (``burnish.jit.kernels.attention.heads_last``)."""
    dim, value_dim = q.shape[3], v.shape[3]
    wide = max(dim, value_dim) > 64
    # Wide heads take half tiles: workgroup memory stays under 48 KiB, registers under 255.
    return (q.dtype.name, dim, value_dim, WARPS, 32 if wide else 64, 32 if wide else 64,
            float(scale), bool(causal), masked, tuple(layouts))


def _source(key: tuple) -> str:
    dtype, dim, value_dim, warps, keys, queries, scale, causal, masked, layouts = key
    last = dict(zip(("LAST_O", "LAST_Q", "LAST_K", "LAST_V"), map(int, layouts)))
    defines = {"T_BF16": int(dtype == "bfloat16"), "DK": dim, "DV": value_dim, "WARPS": warps,
               "BR": 16 * warps,
               "BC": keys, "BQ": queries, "CAUSAL": int(causal), "MASK": int(masked),
               "FILL": f"({masked_score(get_dtype(dtype))!r}f)",
               "SCALE_LOG2": f"({float(scale) * math.log2(math.e)!r}f)",
               "FWD": "flash_fwd", "DQ": "flash_dq", "DKV": "flash_dkv", **last}
    return "".join(f"#define {name} {value}\n" for name, value in defines.items()) + SOURCE


def _build(key: tuple, name: str, buffers: list[ir.Buffer]):
    def build() -> tuple[ir.Kernel, str]:
        return ir.Kernel(name, buffers, (32 * key[3], 1, 1), [], []), _source(key)
    return build


def attention(q: JitTensor, k: JitTensor, v: JitTensor, mask: JitTensor | None, scale: float,
              causal: bool) -> tuple[JitTensor, JitTensor]:
    """The output ``[batch, heads, seq_q, value_dim]`` and lse ``[batch, heads, seq_q]``
    (float32)."""
    batch, heads, seq_q, _ = q.shape
    seq_k, value_dim = k.shape[2], v.shape[3]
    dtype = q.dtype.name
    last = heads_last(q)
    out = result_tensor(q, (batch, heads, seq_q, value_dim), dtype, last)
    lse = result_tensor(q, (batch, heads, seq_q), "float32")
    key = _shape_key(q, v, scale, causal, mask is not None, (last, False, False, False))
    tiles = -(-seq_q // (16 * key[3]))
    info = [batch, heads, seq_q, seq_k, tiles, *_operand(q), *_operand(k), *_operand(v),
            *_mask_operand(mask)]
    buffers = [ir.Buffer("out", dtype, True), ir.Buffer("lse", "float32", True),
               *(ir.Buffer(n, dtype) for n in ("q", "k", "v")), *_mask_buffer(mask)]
    q.runtime.launch(("flash_fwd", *key), _build(key, "flash_fwd", buffers),
                     [out.buffer, lse.buffer, q.buffer, k.buffer, v.buffer,
                      *_mask_data(mask)], np.asarray(info, np.int32),
                     groups=batch * heads * tiles)
    return out, lse


def attention_backward(q: JitTensor, k: JitTensor, v: JitTensor, mask: JitTensor | None,
                       out: JitTensor, lse: JitTensor, grad: JitTensor, scale: float,
                       causal: bool) -> tuple[JitTensor, JitTensor, JitTensor]:
    """``(dq, dk, dv)``; ``out`` and ``lse`` are what ``attention`` returned."""
    batch, heads, seq_q, dim = q.shape
    seq_k, value_dim = k.shape[2], v.shape[3]
    dtype = q.dtype.name
    runtime = q.runtime
    layouts = (heads_last(q), heads_last(k), heads_last(v))  # each gradient as its input
    dq = result_tensor(q, q.shape, dtype, layouts[0])
    dk = result_tensor(q, (batch, heads, seq_k, dim), dtype, layouts[1])
    dv = result_tensor(q, (batch, heads, seq_k, value_dim), dtype, layouts[2])
    delta = result_tensor(q, (batch, heads, seq_q), "float32")
    key = _shape_key(q, v, scale, causal, mask is not None, (False, *layouts))
    strided = [*_operand(q), *_operand(k), *_operand(v), *_operand(grad)]
    rows = 16 * key[3]
    # dq, and each row's delta
    tiles = -(-seq_q // rows)
    info = [batch, heads, seq_q, seq_k, tiles, *strided, *_operand(out), *_mask_operand(mask)]
    buffers = [ir.Buffer("dq", dtype, True), ir.Buffer("delta", "float32", True),
               *(ir.Buffer(n, dtype) for n in ("q", "k", "v", "grad", "out")),
               ir.Buffer("lse", "float32"), *_mask_buffer(mask)]
    lse_buffer = lse.buffer
    runtime.launch(("flash_dq", *key), _build(key, "flash_dq", buffers),
                   [dq.buffer, delta.buffer, q.buffer, k.buffer, v.buffer, grad.buffer,
                    out.buffer, lse_buffer, *_mask_data(mask)], np.asarray(info, np.int32),
                   groups=batch * heads * tiles)
    # dk and dv
    tiles = -(-seq_k // rows)
    info = [batch, heads, seq_q, seq_k, tiles, *strided, *_mask_operand(mask)]
    buffers = [ir.Buffer("dk", dtype, True), ir.Buffer("dv", dtype, True),
               *(ir.Buffer(n, dtype) for n in ("q", "k", "v", "grad")),
               ir.Buffer("delta", "float32"), ir.Buffer("lse", "float32"),
               *_mask_buffer(mask)]
    runtime.launch(("flash_dkv", *key), _build(key, "flash_dkv", buffers),
                   [dk.buffer, dv.buffer, q.buffer, k.buffer, v.buffer, grad.buffer,
                    delta.buffer, lse_buffer, *_mask_data(mask)], np.asarray(info, np.int32),
                   groups=batch * heads * tiles)
    return dq, dk, dv
