"""Stable sorting along one dim: values and int64 positions, NaN as the largest value.

Elements are ordered by (key, original position), a total order, so any sorting network gives
the stable result and descending order is the same network with the key comparison turned
around (positions still ascending, NaN first). Two kernels:

- ``block``: one workgroup sorts up to ``MAX_BLOCK`` elements of a row in workgroup memory with
  a bitonic network (short rows are done in this one launch, written straight to the outputs);
- ``merge``: for longer rows, the sorted blocks are merged pairwise, doubling the run length
  each launch: every element finds its place by a binary search in the partner run (a merge
  path by rank), so a launch is one invocation per element. The last merge writes the outputs.

Between launches the keys live in their compute type (exact for every dtype) with int32
positions.
"""

from __future__ import annotations

from burnish.dtype import int64
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.reduce import WORKGROUP, coalesce, strided_offsets
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

#: The most elements one workgroup sorts (two per invocation).
MAX_BLOCK = 2 * WORKGROUP
#: The fewest (so short rows do not make a kernel per length).
MIN_BLOCK = 64

_KEY_DTYPE = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64",
              "u32": "uint32", "bool": "int32"}


def before(a: ir.Expr, ia: ir.Expr, b: ir.Expr, ib: ir.Expr, n: ir.Expr,
           descending: bool) -> ir.Expr:
    """Whether element ``(a, ia)`` comes strictly before ``(b, ib)``: by key (NaN largest,
    order reversed when ``descending``), then by position. Positions ``>= n`` are padding and
    come after every element."""
    if ir.is_float(a.ty):
        a_nan, b_nan = ir.call("isnan", a), ir.call("isnan", b)
        both = a_nan.not_().and_(b_nan.not_())
        if descending:
            key_first = b_nan.not_().and_(a_nan.or_(a > b))
        else:
            key_first = a_nan.not_().and_(b_nan.or_(a < b))
        same = a_nan.and_(b_nan).or_(both.and_(a.eq(b)))
    else:
        key_first = (a > b) if descending else (a < b)
        same = a.eq(b)
    ordered = key_first.or_(same.and_(ia < ib))
    return (ia < n).and_((ib >= n).or_(ordered))


def sort(x: JitTensor, dim: int, descending: bool) -> tuple[JitTensor, JitTensor]:
    """``(values, int64 positions)`` of ``x`` sorted along ``dim``, both plain tensors."""
    runtime = x.runtime
    gen = runtime.generator
    values = JitTensor(runtime.pool.alloc(max(x.numel, 1) *
                                          gen.storage_numpy(x.dtype.name).itemsize),
                       x.shape, x.dtype, x.device, runtime)
    positions = JitTensor(runtime.pool.alloc(max(x.numel, 1) * gen.storage_numpy("int64").itemsize),
                          x.shape, int64, x.device, runtime)
    if x.numel == 0:
        return values, positions
    n = x.shape[dim]
    out_strides = contiguous_strides(x.shape)
    others = [d for d in range(x.ndim) if d != dim]
    row_shape, (in_strides, row_out_strides) = coalesce(
        [x.shape[d] for d in others], [x.strides[d] for d in others],
        [out_strides[d] for d in others])
    rows = numel(tuple(row_shape))
    layout = (row_shape, in_strides, row_out_strides, x.strides[dim], out_strides[dim])
    block = min(MAX_BLOCK, max(MIN_BLOCK, 1 << (n - 1).bit_length()))
    key_dtype = _KEY_DTYPE[ir.compute_type(x.dtype)]
    blocks = -(-n // block)
    if blocks == 1:
        _block(x, (values, positions), layout, rows, n, block, descending, final=True)
        return values, positions
    item = gen.storage_numpy(key_dtype).itemsize
    work = [(runtime.pool.alloc(rows * n * item), runtime.pool.alloc(rows * n * 4))
            for _ in range(2)]
    _block(x, work[0], layout, rows, n, block, descending, final=False)
    width, current = block, 0
    while width < n:
        final = 2 * width >= n
        dst = (values, positions) if final else work[1 - current]
        _merge(x, key_dtype, work[current], dst, layout, rows, n, width, descending, final)
        current, width = 1 - current, 2 * width
    return values, positions


def _stored(key: ir.Expr, dtype) -> ir.Expr:
    """A key (compute type; int32 for bools) as the value stored in a ``dtype`` buffer."""
    return key if key.ty == ir.compute_type(dtype) else key.cast(dtype)


def _buffers(pair) -> list:
    """The device buffers of an output pair (tensors) or a work pair (buffers)."""
    return [t.buffer for t in pair] if isinstance(pair[0], JitTensor) else list(pair)


# info (block): [rows, length, blocks, input offset, input stride along dim,
#                output stride along dim, row shape, row input strides, row output strides]
_BLOCK_HEADER = 6


def _block(x: JitTensor, dst, layout, rows: int, n: int, block: int, descending: bool,
           final: bool) -> None:
    row_shape, in_strides, row_out_strides, in_stride, out_stride = layout
    ndim = len(row_shape)
    blocks = -(-n // block)
    info = [rows, n, blocks, x.offset, in_stride, out_stride, *row_shape, *in_strides,
            *row_out_strides]
    key_ty = "i32" if x.dtype.is_bool else ir.compute_type(x.dtype)
    key = ("sort_block", x.dtype.name, ndim, block, descending, final)
    threads = block // 2

    def build() -> ir.Kernel:
        k = KernelBuilder("sort_block", (threads, 1, 1))
        if final:
            out_values = k.buffer("values", x.dtype, writable=True)
            out_positions = k.buffer("positions", int64, writable=True)
        else:
            out_values = k.buffer("keys", _KEY_DTYPE[key_ty], writable=True)
            out_positions = k.buffer("positions", "int32", writable=True)
        src = k.buffer("x", x.dtype)
        keys = k.shared(key_ty, block)
        places = k.shared("i32", block)
        t = k.local_id(0)
        g = k.group_index()
        total = k.let(k.info(0) * k.info(2), "total")
        gc = k.let(ir.select(g < total, g, total - 1), "g")
        r = k.let(gc / k.info(2), "r")
        first = k.let((gc % k.info(2)) * block, "first")
        length = k.info(1)
        src_base, dst_base = strided_offsets(
            k, r, ndim, _BLOCK_HEADER, [_BLOCK_HEADER + ndim, _BLOCK_HEADER + 2 * ndim],
            [k.info(3), ir.lift(0, "i32")])
        for half in (0, threads):
            e = t + half
            j = k.let(first + e, "j")
            value = k.let(ir.const(0, key_ty), "key")
            with k.if_(j < length):
                loaded = src[src_base + j * k.info(4)]
                k.assign(value, loaded.cast(key_ty) if loaded.ty != key_ty else loaded)
            k.shared_store(keys, e, value)
            k.shared_store(places, e, j)
        k.barrier()
        size = k.let(2, "size")
        with k.while_(size <= block):
            stride = k.let(size / 2, "stride")
            with k.while_(stride > 0):
                i = k.let((t / stride) * (stride * 2) + t % stride, "i")
                m = k.let(i + stride, "m")
                a, ia = k.let(keys[i], "a"), k.let(places[i], "ia")
                b, ib = k.let(keys[m], "b"), k.let(places[m], "ib")
                up = (i & size).eq(0)
                swap = ir.select(up, before(b, ib, a, ia, length, descending),
                                 before(a, ia, b, ib, length, descending))
                with k.if_(swap):
                    k.shared_store(keys, i, b)
                    k.shared_store(places, i, ib)
                    k.shared_store(keys, m, a)
                    k.shared_store(places, m, ia)
                k.barrier()
                k.assign(stride, stride / 2)
            k.assign(size, size * 2)
        with k.if_(g < total):
            for half in (0, threads):
                e = t + half
                j = k.let(first + e, "j")
                with k.if_(j < length):
                    value, place = keys[e], places[e]
                    if final:
                        at = dst_base + j * k.info(5)
                        k.store(out_values, at, _stored(value, x.dtype))
                        k.store(out_positions, at, place.cast("i64"))
                    else:
                        at = r * length + j
                        k.store(out_values, at, value)
                        k.store(out_positions, at, place)
        return k.build()

    x.runtime.launch(key, build, [*_buffers(dst), x.buffer], info, groups=rows * blocks)


# info (merge): [elements, length, run width, output stride along dim, row shape,
#                row output strides]
_MERGE_HEADER = 4


def _merge(x: JitTensor, key_dtype: str, src, dst, layout, rows: int, n: int, width: int,
           descending: bool, final: bool) -> None:
    row_shape, _, row_out_strides, _, out_stride = layout
    ndim = len(row_shape) if final else 0
    info = [rows * n, n, width, out_stride, *(row_shape if final else ()),
            *(row_out_strides if final else ())]
    key = ("sort_merge", x.dtype.name, key_dtype, ndim, descending, final)

    def build() -> ir.Kernel:
        k = KernelBuilder("sort_merge", (WORKGROUP, 1, 1))
        if final:
            out_values = k.buffer("values", x.dtype, writable=True)
            out_positions = k.buffer("positions", int64, writable=True)
        else:
            out_values = k.buffer("keys", key_dtype, writable=True)
            out_positions = k.buffer("positions", "int32", writable=True)
        keys = k.buffer("keys_in", key_dtype)
        places = k.buffer("positions_in", "int32")
        e = k.global_index()
        with k.if_(e >= k.info(0)):
            k.return_()
        length, w = k.info(1), k.info(2)
        r = k.let(e / length, "r")
        i = k.let(e - r * length, "i")
        row = k.let(r * length, "row")
        value, place = k.let(keys[e], "key"), k.let(places[e], "place")
        run_start = k.let((i / w) * w, "rs")
        partner = k.let(run_start ^ w, "ps")
        dest = k.let(i, "dest")
        with k.if_(partner < length):
            stop = k.let(ir.call("min", partner + w, length) - partner, "count")
            lo, hi = k.let(0, "lo"), k.let(stop, "hi")
            with k.while_(lo < hi):
                mid = k.let((lo + hi) / 2, "mid")
                at = row + partner + mid
                with k.if_(before(keys[at], places[at], value, place, length, descending)):
                    k.assign(lo, mid + 1)
                with k.else_():
                    k.assign(hi, mid)
            k.assign(dest, ir.call("min", run_start, partner) + (i - run_start) + lo)
        if final:
            at = strided_offsets(k, r, ndim, _MERGE_HEADER, [_MERGE_HEADER + ndim],
                                 [ir.lift(0, "i32")])[0]
            out_at = at + dest * k.info(3)
            k.store(out_values, out_at, _stored(value, x.dtype))
            k.store(out_positions, out_at, place.cast("i64"))
        else:
            k.store(out_values, row + dest, value)
            k.store(out_positions, row + dest, place)
        return k.build()

    x.runtime.launch(key, build, [*_buffers(dst), *src], info, invocations=rows * n)
