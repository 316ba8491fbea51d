"""Scans (running sums and products) along one dim: invocations walk rows in order.

Rows are every position of the other dims, read through the input's strides (no copy) and
written to a plain output. A short row is one invocation's walk. Long rows (or few of them) are
cut into chunks: one launch folds each chunk to its total, the totals are scanned (the same
function, recursively), and a last launch walks every chunk again from the total before it,
so each output element still rounds once: half floats accumulate in float32, ints in their
compute type, and both convert to the dtype only at the store.
"""

from __future__ import annotations

from burnish.dtype import get_dtype
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.reduce import MAX_ITERATIONS, WORKGROUP, coalesce, strided_offsets
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

#: Rows are cut into chunks until about this many invocations run...
TARGET_INVOCATIONS = 4096
#: ... but no chunk is shorter than this.
MIN_CHUNK = 256

_TYPE_DTYPE = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64",
               "u32": "uint32"}

# info: [rows, length, input offset, input stride along dim, output stride along dim,
#        chunk length, chunks, row shape (ndim), row input strides, row output strides]
_HEADER = 7


def scan(op: str, x: JitTensor, dim: int) -> JitTensor:
    """The running ``op`` (``sum`` or ``prod``) of ``x`` along ``dim``, as a plain tensor."""
    if op not in ("sum", "prod"):
        raise ValueError(f"unknown scan {op!r}")
    out = _alloc(x, x.shape, x.dtype.name)
    if x.numel == 0:
        return out
    out_strides = contiguous_strides(x.shape)
    others = [d for d in range(x.ndim) if d != dim]
    row_shape, (in_strides, row_out_strides) = coalesce(
        [x.shape[d] for d in others], [x.strides[d] for d in others],
        [out_strides[d] for d in others])
    rows, n = numel(tuple(row_shape)), x.shape[dim]
    wanted = -(-TARGET_INVOCATIONS // rows)
    chunk = min(MAX_ITERATIONS, max(MIN_CHUNK, -(-n // wanted)), n)
    chunks = -(-n // chunk)
    info = [rows, n, x.offset, x.strides[dim], out_strides[dim], chunk, chunks,
            *row_shape, *in_strides, *row_out_strides]
    ndim = len(row_shape)
    if chunks == 1:
        _launch(op, x, out, None, info, ndim, "scan", rows)
        return out
    acc_dtype = _TYPE_DTYPE[ir.compute_type(x.dtype)]
    totals = _alloc(x, (rows, chunks), acc_dtype)
    _launch(op, x, totals, None, info, ndim, "totals", rows * chunks)
    prefix = scan(op, totals, 1)
    _launch(op, x, out, prefix, info, ndim, "scan", rows * chunks)
    return out


def _alloc(like: JitTensor, shape: tuple[int, ...], dtype: str) -> JitTensor:
    runtime = like.runtime
    itemsize = runtime.generator.storage_numpy(dtype).itemsize
    return JitTensor(runtime.pool.alloc(max(numel(shape), 1) * itemsize), shape,
                     get_dtype(dtype), like.device, runtime)


def _launch(op: str, x: JitTensor, out: JitTensor, prefix: JitTensor | None, info: list[int],
            ndim: int, mode: str, invocations: int) -> None:
    """``mode``: ``totals`` writes each chunk's total; ``scan`` writes the running values,
    starting each chunk from the inclusive scan of the totals before it (``prefix``)."""
    key = ("scan", op, x.dtype.name, out.dtype.name, ndim, mode, prefix is not None)

    def build() -> ir.Kernel:
        k = KernelBuilder(f"scan_{op}_{mode}", (WORKGROUP, 1, 1))
        dst = k.buffer("out", out.dtype, writable=True)
        src = k.buffer("x", x.dtype)
        before = k.buffer("prefix", prefix.dtype) if prefix is not None else None
        e = k.global_index()
        with k.if_(e >= k.info(0) * k.info(6)):
            k.return_()
        chunks = k.info(6)
        r = k.let(e / chunks, "r")
        c = k.let(e - r * chunks, "c")
        start = k.let(c * k.info(5), "start")
        stop = ir.call("min", start + k.info(5), k.info(1))
        src_pos, dst_pos = strided_offsets(k, r, ndim, _HEADER,
                                           [_HEADER + ndim, _HEADER + 2 * ndim],
                                           [k.info(2), ir.lift(0, "i32")])
        k.assign(src_pos, src_pos + start * k.info(3))
        k.assign(dst_pos, dst_pos + start * k.info(4))
        ty = ir.compute_type(x.dtype)
        acc = k.let(ir.const(0 if op == "sum" else 1, ty), "acc")
        if before is not None:
            with k.if_(c > 0):
                k.assign(acc, before[e - 1])
        with k.for_(start, stop, name="j"):
            value = src[src_pos]
            k.assign(acc, acc + value if op == "sum" else acc * value)
            if mode == "scan":
                k.store(dst, dst_pos, acc)
                k.assign(dst_pos, dst_pos + k.info(4))
            k.assign(src_pos, src_pos + k.info(3))
        if mode == "totals":
            k.store(dst, e, acc)
        return k.build()

    buffers = [out.buffer, x.buffer] + ([prefix.buffer] if prefix is not None else [])
    x.runtime.launch(key, build, buffers, info, invocations=invocations)
