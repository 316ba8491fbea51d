"""Attention in the manner of FlashAttention-2: the ``seq_q x seq_k`` scores never reach memory.

Forward (``attention``): a workgroup takes ``ROWS`` query rows of one (batch, head), an
invocation per row holding its query and its output accumulator in registers. The keys and
values go through workgroup memory a tile of ``tile_keys`` at a time; each invocation scores
its row against the tile and folds the scores into an online softmax (the running max ``m``, the
running sum ``l`` of ``exp(score - m)``, the output rescaled only when ``m`` grows). It stores
the output and the row's log-sum-exp ``m + log(l)``.

Backward (``attention_backward``), recomputing the weights ``p = exp(score - lse)``:

- ``dq``: the forward's layout (a row per invocation, key tiles in workgroup memory); the same
  pass stores each row's ``delta = sum(grad * out)``;
- ``dk`` and ``dv``: a key per invocation, holding its key and value and accumulating its
  gradients in registers, the query rows (with their gradients, lse and delta) going through
  workgroup memory a tile at a time.

Memory is linear in the sequence lengths: besides the inputs and the gradients, one number per
query row (lse, delta). Forbidden pairs score ``masked_score`` as in the protocol's default, so a
row with no key left has uniform weights: in ``dk``/``dv`` such a row (its lse far below any
real score) weighs every key ``1 / seq_k``. Inputs are read through their strides (views and a
broadcast mask cost no copy); half floats compute in float32, their lse and delta are float32.

Loops over the keys of a tile step ``UNROLL`` keys at a time and the head dims are unrolled, so
an invocation's loop count stays far below ``kernels.reduce.MAX_ITERATIONS`` for any sequence
a device holds.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import numpy as np

from burnish.backend.attention_ops import masked_score
from burnish.dtype import DType, get_dtype
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.tensor import JitTensor, numel

#: Query rows per workgroup (an invocation each) in the forward and ``dq`` kernels, and keys
#: per workgroup in the ``dk``/``dv`` kernel.
ROWS = 64
#: Keys (or query rows) handled per step of an inner loop, unrolled.
UNROLL = 4
#: The largest head dim (of ``q``/``k`` and of ``v``) the kernels take: an invocation keeps
#: four rows of it in registers. Wider heads take the protocol's default.
MAX_HEAD_DIM = 128
#: Workgroup memory the tiles may use: WebGPU's guaranteed minimum (16 KiB).
WORKGROUP_BYTES = 16 * 1024
#: Buffers the backward kernels bind (every runtime but a minimal WebGPU device has them).
BACKWARD_BUFFERS = 9

# info: [batch, heads, seq_q, seq_k, tiles, then per operand: offset and 4 strides]
B, H, SQ, SK, TILES = range(5)
OPERANDS = 5


def fits(q: JitTensor, v: JitTensor, backward: bool = False) -> bool:
    """Whether the kernels take these shapes (no empty dim, head dims of at most
    ``MAX_HEAD_DIM``, and, for the backward, a runtime binding ``BACKWARD_BUFFERS`` buffers)."""
    if not 0 < q.shape[3] <= MAX_HEAD_DIM or not 0 < v.shape[3] <= MAX_HEAD_DIM:
        return False
    if numel(q.shape) == 0 or numel(v.shape) == 0:
        return False  # the default gives the zeros an empty product sums to
    return not backward or q.runtime.max_buffers >= BACKWARD_BUFFERS


def _stats_dtype(dtype: DType) -> str:
    """The storage dtype of lse and delta: the compute type's."""
    return "float64" if dtype.name == "float64" else "float32"


def _operand(x: JitTensor | None, shape: tuple[int, ...]) -> list[int]:
    """Offset and strides of ``x`` over ``shape`` (4-d; 0 where ``x`` is broadcast, or
    missing)."""
    if x is None:
        return [0] * OPERANDS
    strides = [0 if x.shape[d] == 1 else x.strides[d] for d in range(x.ndim)]
    return [x.offset, *strides, *[0] * (4 - x.ndim)]


def _tile(dtype: DType, width: int, most: int = 64) -> int:
    """Rows per tile of ``width`` words each that fit ``WORKGROUP_BYTES`` (a multiple of
    ``UNROLL``)."""
    word = 8 if ir.compute_type(dtype) == "f64" else 4
    rows = min(most, WORKGROUP_BYTES // (word * width))
    return max(UNROLL, rows - rows % UNROLL)


def result_tensor(like: JitTensor, shape: tuple[int, ...], dtype: DType | str,
                  heads_last: bool = False) -> JitTensor:
    """A new tensor of ``shape``; ``heads_last``: a ``[batch, heads, seq, dim]`` one laid out
    as ``[batch, seq, heads, dim]`` (see ``heads_last``)."""
    runtime = like.runtime
    name = dtype if isinstance(dtype, str) else dtype.name
    itemsize = runtime.generator.storage_numpy(name).itemsize
    buffer = runtime.pool.alloc(max(numel(shape), 1) * itemsize)
    strides = _heads_last_strides(shape) if heads_last else None
    return JitTensor(buffer, shape, get_dtype(name), like.device, runtime, strides)


def _heads_last_strides(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The strides of ``[batch, heads, seq, dim]`` laid out as ``[batch, seq, heads, dim]``."""
    batch, heads, seq, dim = shape
    return (seq * heads * dim, dim, heads * dim, 1)


def heads_last(x: JitTensor) -> bool:
    """Whether ``[batch, heads, seq, dim]`` ``x`` lies in memory as ``[batch, seq, heads,
    dim]``: the heads of a ``[batch, seq, d_model]`` projection, split and swapped as
    ``nn.MultiHeadAttention`` does. A result written that way needs no copy to go back to
    ``[batch, seq, d_model]`` (the output, forward; the inputs' gradients, backward)."""
    _, heads, seq, _ = x.shape
    return heads > 1 and seq > 1 and x.strides == _heads_last_strides(x.shape)


def _row_at(batch: ir.Expr, heads: ir.Expr, head: ir.Expr, seq: ir.Expr, row: ir.Expr,
            last: bool) -> ir.Expr:
    """The index of row ``(batch, head, row)`` of a result, in rows of its last dim:
    ``[batch, heads, seq]`` order, or ``[batch, seq, heads]`` when ``last``."""
    if last:
        return (batch * seq + row) * heads + head
    return (batch * heads + head) * seq + row


def attention(q: JitTensor, k: JitTensor, v: JitTensor, mask: JitTensor | None, scale: float,
              causal: bool) -> tuple[JitTensor, JitTensor]:
    """The output ``[batch, heads, seq_q, value_dim]`` and lse ``[batch, heads, seq_q]``."""
    batch, heads, seq_q, dim = q.shape
    seq_k, value_dim = k.shape[2], v.shape[3]
    last = heads_last(q)
    out = result_tensor(q, (batch, heads, seq_q, value_dim), q.dtype, last)
    lse = result_tensor(q, (batch, heads, seq_q), _stats_dtype(q.dtype))
    tiles = -(-seq_q // ROWS)
    info = [batch, heads, seq_q, seq_k, tiles]
    for x in (q, k, v):
        info += _operand(x, x.shape)
    info += _operand(mask, (batch, heads, seq_q, seq_k))
    tile_keys = _tile(q.dtype, dim + value_dim)
    key = ("attention", q.dtype.name, dim, value_dim, scale, causal, mask is not None,
           tile_keys, last)

    def build() -> ir.Kernel:
        return _forward(q.dtype, dim, value_dim, scale, causal, mask is not None, tile_keys,
                        last)

    buffers = [out.buffer, lse.buffer, q.buffer, k.buffer, v.buffer]
    buffers += [mask.buffer] if mask is not None else []
    q.runtime.launch(key, build, buffers, np.asarray(info, np.int32),
                     groups=batch * heads * tiles)
    return out, lse


def attention_backward(q: JitTensor, k: JitTensor, v: JitTensor, mask: JitTensor | None,
                       out: JitTensor, lse: JitTensor, grad: JitTensor, scale: float,
                       causal: bool) -> tuple[JitTensor, JitTensor, JitTensor]:
    """``(dq, dk, dv)``; ``out`` and ``lse`` are what ``attention`` returned."""
    batch, heads, seq_q, dim = q.shape
    seq_k, value_dim = k.shape[2], v.shape[3]
    layouts = (heads_last(q), heads_last(k), heads_last(v))  # each gradient as its input
    dq = result_tensor(q, q.shape, q.dtype, layouts[0])
    dk = result_tensor(q, k.shape, q.dtype, layouts[1])
    dv = result_tensor(q, v.shape, q.dtype, layouts[2])
    delta = result_tensor(q, (batch, heads, seq_q), _stats_dtype(q.dtype))
    operands = []
    for x in (q, k, v, grad, out):
        operands += _operand(x, x.shape)
    operands += _operand(lse, lse.shape)
    operands += _operand(mask, (batch, heads, seq_q, seq_k))
    has_mask = mask is not None
    runtime = q.runtime
    # dq, and each row's delta
    tiles = -(-seq_q // ROWS)
    tile_keys = _tile(q.dtype, dim + value_dim)
    key = ("attention_dq", q.dtype.name, dim, value_dim, scale, causal, has_mask, tile_keys,
           layouts[0])

    def build_dq() -> ir.Kernel:
        return _backward_dq(q.dtype, dim, value_dim, scale, causal, has_mask, tile_keys,
                            layouts[0])

    inputs = [q.buffer, k.buffer, v.buffer, grad.buffer, out.buffer, lse.buffer]
    inputs += [mask.buffer] if has_mask else []
    info = np.asarray([batch, heads, seq_q, seq_k, tiles, *operands], np.int32)
    runtime.launch(key, build_dq, [dq.buffer, delta.buffer, *inputs], info,
                   groups=batch * heads * tiles)
    # dk and dv
    tiles = -(-seq_k // ROWS)
    tile_rows = _tile(q.dtype, dim + value_dim + 2)
    key = ("attention_dkv", q.dtype.name, dim, value_dim, scale, causal, has_mask, tile_rows,
           layouts[1:])

    def build_dkv() -> ir.Kernel:
        return _backward_dkv(q.dtype, dim, value_dim, scale, causal, has_mask, tile_rows,
                             layouts[1:])

    inputs[4] = delta.buffer  # out is not needed any more: delta stands in its place
    info = np.asarray([batch, heads, seq_q, seq_k, tiles, *operands], np.int32)
    runtime.launch(key, build_dkv, [dk.buffer, dv.buffer, *inputs], info,
                   groups=batch * heads * tiles)
    return dq, dk, dv


# -- kernels ---------------------------------------------------------------------------------


class _Operand:
    """Where an operand's element ``(b, h, row, col)`` lies: its offset and strides, read from
    ``info`` into registers once."""

    def __init__(self, k: KernelBuilder, index: int, batch: ir.Expr, head: ir.Expr):
        at = TILES + 1 + OPERANDS * index
        self.strides = [k.let(k.info(at + 1 + d), "st") for d in range(4)]
        self.base = k.let(k.info(at) + batch * self.strides[0] + head * self.strides[1], "base")

    def at(self, row: ir.Expr, col: ir.Expr | int = 0) -> ir.Expr:
        return self.base + row * self.strides[2] + col * self.strides[3]


def _start(k: KernelBuilder) -> tuple[ir.Expr, ...]:
    """The workgroup's (batch, head) and first row, this invocation's index in it, and the
    metadata sizes."""
    sizes = [k.let(k.info(w), name) for w, name in ((H, "h"), (SQ, "sq"), (SK, "sk"))]
    group = k.group_index()
    tile = k.let(group % k.info(TILES), "tile")
    pair = k.let(group / k.info(TILES), "pair")
    batch = k.let(pair / sizes[0], "b")
    head = k.let(pair % sizes[0], "hd")
    t = k.let(k.local_id(0), "t")
    return batch, head, k.let(tile * ROWS, "r0"), t, *sizes


def _forbidden(k: KernelBuilder, mask, buf, row: ir.Expr, col: ir.Expr, causal: bool
               ) -> ir.Expr | None:
    """Whether (row, col) is forbidden (``None``: never), for in-range ``row`` and ``col``."""
    forbidden = None
    if buf is not None:
        forbidden = buf[mask.at(row, col)]
    if causal:
        later = col > row
        forbidden = later if forbidden is None else forbidden.or_(later)
    return forbidden


def _unless(k: KernelBuilder, forbidden: ir.Expr | None):
    """A block run where ``forbidden`` is false (always, for ``None``)."""
    return nullcontext() if forbidden is None else k.if_(forbidden.not_())


def _load_tile(k: KernelBuilder, t: ir.Expr, tile: ir.Shared, rows: int, width: int,
               first: ir.Expr, limit: ir.Expr, source: ir.Buffer, operand: _Operand,
               ty: str, threads: int = ROWS) -> None:
    """Rows ``first ..`` of ``source`` (``width`` columns) into ``tile`` (zeros past
    ``limit``), shared out among ``threads`` invocations."""
    size = rows * width
    for step in range(-(-size // threads)):
        e = k.let(t + step * threads, "e")
        row = k.let(first + e / width, "row")
        inside = row < limit
        with k.if_(e < size) if (step + 1) * threads > size else nullcontext():
            value = source[ir.select(inside, operand.at(row, e % width), 0)]
            k.shared_store(tile, e, ir.select(inside, value, ir.lift(0, ty)))


@contextmanager
def _key_tiles(k: KernelBuilder, t: ir.Expr, stop: ir.Expr, seq_k: ir.Expr, tiles: tuple,
               sources: tuple, ty: str):
    """A loop over the keys ``0 .. stop`` a tile at a time, each tile's keys and values
    (``sources``: ``(buffer, operand, width)`` each) loaded into ``tiles`` first; yields the
    tile's first key."""
    tile_keys = tiles[0].size // sources[0][2]
    with k.for_(0, stop, tile_keys, name="k0") as k0:
        for tile, (buffer, operand, width) in zip(tiles, sources):
            _load_tile(k, t, tile, tile_keys, width, k0, seq_k, buffer, operand, ty)
        k.barrier()
        yield k0
        k.barrier()


class _Row:
    """Reads rows of ``n`` words of a workgroup tile (row ``j`` at ``j * n``) into four
    registers of the kernel, a run of four neighbouring words at a time (two, or one, where
    ``n`` is no multiple of four): one wide load each where the language has them."""

    def __init__(self, k: KernelBuilder, ty: str):
        self.k = k
        self.regs = [k.let(ir.lift(0, ty), "w", ty) for _ in range(4)]

    def runs(self, tile: ir.Shared, base: ir.Expr, n: int):
        """Yield ``(d, words)``: ``words[i]`` holds ``tile[base + d + i]``, in turn for
        every ``d`` a run starts at (``base`` a multiple of ``n``)."""
        width = 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1
        for d in range(0, n, width):
            words = self.regs[:width]
            if width == 1:
                self.k.assign(words[0], tile[base + d])
            else:
                self.k.shared_load_run(tile, base + d, words)
            yield d, words

    def dot(self, vector: list, tile: ir.Shared, base: ir.Expr, n: int) -> ir.Var:
        """``sum(vector[d] * tile[base + d] for d < n)``, added in order of ``d``."""
        k = self.k
        total = k.let(ir.lift(0, vector[0].ty), "dot", vector[0].ty)
        for d, words in self.runs(tile, base, n):
            value = total
            for i, w in enumerate(words):
                value = value + vector[d + i] * w
            k.assign(total, value)
        return total

    def accumulate(self, acc: list, weight: ir.Expr, tile: ir.Shared, base: ir.Expr,
                   n: int) -> None:
        """``acc[d] += weight * tile[base + d]`` for every ``d < n``."""
        for d, words in self.runs(tile, base, n):
            for i, w in enumerate(words):
                self.k.assign(acc[d + i], acc[d + i] + weight * w)


def _forward(dtype: DType, dim: int, value_dim: int, scale: float, causal: bool,
             has_mask: bool, tile_keys: int, last: bool = False) -> ir.Kernel:
    ty = ir.compute_type(dtype)
    fill = masked_score(dtype)
    k = KernelBuilder("attention", (ROWS, 1, 1))
    out = k.buffer("out", dtype, writable=True)
    lse = k.buffer("lse", _stats_dtype(dtype), writable=True)
    qb, kb, vb = k.buffer("q", dtype), k.buffer("k", dtype), k.buffer("v", dtype)
    mb = k.buffer("mask", "bool") if has_mask else None
    keys = k.shared(ty, tile_keys * dim)
    values = k.shared(ty, tile_keys * value_dim)
    batch, head, r0, t, heads, seq_q, seq_k = _start(k)
    qo, ko, vo, mo = (_Operand(k, i, batch, head) for i in range(4))
    # Rows past the end compute row seq_q - 1 again (every invocation reaches every barrier)
    # and store nothing.
    row = k.let(ir.call("min", r0 + t, seq_q - 1), "row")
    query = [k.let(qb[qo.at(row, d)], "q", ty) for d in range(dim)]
    acc = [k.let(ir.lift(0, ty), "o", ty) for _ in range(value_dim)]
    top = k.let(ir.const(float("-inf"), ty), "m")
    total = k.let(ir.lift(0, ty), "l", ty)
    read = _Row(k, ty)
    # Causal: the keys after the workgroup's last row are forbidden to all its rows.
    stop = k.let(ir.call("min", seq_k, r0 + ROWS) if causal else seq_k, "stop")
    with _key_tiles(k, t, stop, seq_k, (keys, values),
                    ((kb, ko, dim), (vb, vo, value_dim)), ty) as k0:
        with k.for_(0, tile_keys, UNROLL, name="j") as j0:
            for u in range(UNROLL):
                j = k.let(j0 + u, "jj")
                col = k.let(k0 + j, "col")
                with k.if_(col < seq_k):
                    score = k.let(ir.lift(fill, ty), "s", ty)
                    with _unless(k, _forbidden(k, mo, mb, row, col, causal)):
                        k.assign(score, read.dot(query, keys, j * dim, dim) * scale)
                    with k.if_(score > top):
                        alpha = k.let(ir.call("exp", top - score), "alpha", ty)
                        k.assign(total, total * alpha)
                        for a in acc:
                            k.assign(a, a * alpha)
                        k.assign(top, score)
                    p = k.let(ir.call("exp", score - top), "p", ty)
                    k.assign(total, total + p)
                    read.accumulate(acc, p, values, j * value_dim, value_dim)
    if causal:
        # A row with no key left among those visited (all forbidden by the mask) averages
        # every value, the skipped ones included, as the protocol's default does.
        # (The tiles visited end at a multiple of tile_keys, which may pass ``stop``.)
        visited = ir.call("min", seq_k, (stop + (tile_keys - 1)) / tile_keys * tile_keys)
        with k.if_(top <= fill):
            with k.for_(visited, seq_k, name="j") as j:
                k.assign(total, total + 1.0)
                for d, a in enumerate(acc):
                    k.assign(a, a + vb[vo.at(j, d)])
    with k.if_(r0 + t < seq_q):
        at = k.let(((batch * heads + head) * seq_q + row), "at")
        at_out = k.let(_row_at(batch, heads, head, seq_q, row, last), "at_out")
        for d, a in enumerate(acc):
            k.store(out, at_out * value_dim + d, a / total)
        k.store(lse, at, (top + ir.call("log", total)).cast(_stats_dtype(dtype)))
    return k.build()


def _backward_dq(dtype: DType, dim: int, value_dim: int, scale: float, causal: bool,
                 has_mask: bool, tile_keys: int, last: bool = False) -> ir.Kernel:
    ty = ir.compute_type(dtype)
    stats = _stats_dtype(dtype)
    k = KernelBuilder("attention_dq", (ROWS, 1, 1))
    dq = k.buffer("dq", dtype, writable=True)
    delta_out = k.buffer("delta", stats, writable=True)
    qb, kb, vb = k.buffer("q", dtype), k.buffer("k", dtype), k.buffer("v", dtype)
    gb, ob, lb = k.buffer("grad", dtype), k.buffer("out", dtype), k.buffer("lse", stats)
    mb = k.buffer("mask", "bool") if has_mask else None
    keys = k.shared(ty, tile_keys * dim)
    values = k.shared(ty, tile_keys * value_dim)
    batch, head, r0, t, heads, seq_q, seq_k = _start(k)
    qo, ko, vo, go, oo, lo, mo = (_Operand(k, i, batch, head) for i in range(7))
    row = k.let(ir.call("min", r0 + t, seq_q - 1), "row")
    query = [k.let(qb[qo.at(row, d)], "q", ty) for d in range(dim)]
    grad = [k.let(gb[go.at(row, d)], "g", ty) for d in range(value_dim)]
    delta = k.let(ir.lift(0, ty), "delta", ty)
    for d in range(value_dim):
        k.assign(delta, delta + grad[d] * ob[oo.at(row, d)])
    row_lse = k.let(lb[lo.at(row)].cast(ty), "lse", ty)
    acc = [k.let(ir.lift(0, ty), "dq", ty) for _ in range(dim)]
    read = _Row(k, ty)
    # Forbidden pairs pass no gradient to q: the keys after the workgroup's rows are skipped.
    stop = k.let(ir.call("min", seq_k, r0 + ROWS) if causal else seq_k, "stop")
    with _key_tiles(k, t, stop, seq_k, (keys, values),
                    ((kb, ko, dim), (vb, vo, value_dim)), ty) as k0:
        with k.for_(0, tile_keys, UNROLL, name="j") as j0:
            for u in range(UNROLL):
                j = k.let(j0 + u, "jj")
                col = k.let(k0 + j, "col")
                with k.if_(col < seq_k), _unless(k, _forbidden(k, mo, mb, row, col, causal)):
                    score = read.dot(query, keys, j * dim, dim) * scale
                    p = k.let(ir.call("exp", score - row_lse), "p", ty)
                    dp = read.dot(grad, values, j * value_dim, value_dim)
                    ds = k.let(p * (dp - delta), "ds", ty)
                    read.accumulate(acc, ds, keys, j * dim, dim)
    with k.if_(r0 + t < seq_q):
        at = k.let(((batch * heads + head) * seq_q + row), "at")
        at_dq = k.let(_row_at(batch, heads, head, seq_q, row, last), "at_dq")
        for d, a in enumerate(acc):
            k.store(dq, at_dq * dim + d, a * scale)
        k.store(delta_out, at, delta.cast(stats))
    return k.build()


def _backward_dkv(dtype: DType, dim: int, value_dim: int, scale: float, causal: bool,
                  has_mask: bool, tile_rows: int,
                  last: tuple[bool, bool] = (False, False)) -> ir.Kernel:
    ty = ir.compute_type(dtype)
    fill = masked_score(dtype)
    stats = _stats_dtype(dtype)
    k = KernelBuilder("attention_dkv", (ROWS, 1, 1))
    dk = k.buffer("dk", dtype, writable=True)
    dv = k.buffer("dv", dtype, writable=True)
    qb, kb, vb = k.buffer("q", dtype), k.buffer("k", dtype), k.buffer("v", dtype)
    gb, db, lb = k.buffer("grad", dtype), k.buffer("delta", stats), k.buffer("lse", stats)
    mb = k.buffer("mask", "bool") if has_mask else None
    queries = k.shared(ty, tile_rows * dim)
    grads = k.shared(ty, tile_rows * value_dim)
    row_lse = k.shared(ty, tile_rows)
    row_delta = k.shared(ty, tile_rows)
    batch, head, c0, t, heads, seq_q, seq_k = _start(k)
    qo, ko, vo, go, _, lo, mo = (_Operand(k, i, batch, head) for i in range(7))
    col = k.let(ir.call("min", c0 + t, seq_k - 1), "col")
    key = [k.let(kb[ko.at(col, d)], "k", ty) for d in range(dim)]
    value = [k.let(vb[vo.at(col, d)], "v", ty) for d in range(value_dim)]
    dk_acc = [k.let(ir.lift(0, ty), "dk", ty) for _ in range(dim)]
    dv_acc = [k.let(ir.lift(0, ty), "dv", ty) for _ in range(value_dim)]
    uniform = k.let(1.0 / seq_k.cast(ty), "uniform", ty)
    read = _Row(k, ty)
    pair = k.let((batch * heads + head) * seq_q, "pair")
    with k.for_(0, seq_q, tile_rows, name="r0") as r0:
        _load_tile(k, t, queries, tile_rows, dim, r0, seq_q, qb, qo, ty)
        _load_tile(k, t, grads, tile_rows, value_dim, r0, seq_q, gb, go, ty)
        with k.if_(t < tile_rows):
            r = k.let(ir.call("min", r0 + t, seq_q - 1), "r")
            k.shared_store(row_lse, t, lb[lo.at(r)].cast(ty))
            k.shared_store(row_delta, t, db[pair + r].cast(ty))
        k.barrier()
        with k.for_(0, tile_rows, UNROLL, name="i") as i0:
            for u in range(UNROLL):
                i = k.let(i0 + u, "ii")
                row = k.let(r0 + i, "row")
                with k.if_(row < seq_q):
                    forbidden = _forbidden(k, mo, mb, row, col, causal)
                    if forbidden is not None:
                        forbidden = k.let(forbidden, "forbid")
                    with _unless(k, forbidden):
                        score = read.dot(key, queries, i * dim, dim) * scale
                        p = k.let(ir.call("exp", score - row_lse[i]), "p", ty)
                        dp = read.dot(value, grads, i * value_dim, value_dim)
                        ds = k.let(p * (dp - row_delta[i]), "ds", ty)
                        read.accumulate(dv_acc, p, grads, i * value_dim, value_dim)
                        read.accumulate(dk_acc, ds, queries, i * dim, dim)
                    if forbidden is not None:
                        # A row with no key left (its lse about the fill value) weighs every
                        # key evenly; a forbidden pair of any other row weighs nothing.
                        with k.else_(), k.if_(row_lse[i] < fill * 0.5):
                            read.accumulate(dv_acc, uniform, grads, i * value_dim, value_dim)
        k.barrier()
    with k.if_(c0 + t < seq_k):
        at_k = k.let(_row_at(batch, heads, head, seq_k, col, last[0]), "at_k")
        at_v = k.let(_row_at(batch, heads, head, seq_k, col, last[1]), "at_v")
        for d, a in enumerate(dk_acc):
            k.store(dk, at_k * dim + d, a * scale)
        for d, a in enumerate(dv_acc):
            k.store(dv, at_v * value_dim + d, a)
    return k.build()
