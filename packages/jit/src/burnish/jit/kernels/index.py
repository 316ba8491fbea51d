"""Indexing kernels: copying into a strided region, gathering along a dim, and deterministic
accumulating scatters along a dim.

Three kernels serve every layout op: ``copy_into`` (slice_assign, cat), ``gather`` (gather,
select, embedding) and ``accumulate`` (scatter_add, select_add); ``cat_into`` copies several
inputs of a ``cat`` in one launch. Each is generated once per
dtype and rank; shapes, strides, offsets and the dim travel in ``info``. Index tensors of any
int dtype are read as i32; ``Tensor`` checks that their values are in range (on the GPU
backends on the device, ``check_bounds``, reported at the next read), and ``gather`` clamps
them so that a bad index never reads outside its tensor.
"""

from __future__ import annotations

from collections.abc import Sequence

from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP, broadcast_strides
from burnish.jit.tensor import JitTensor, numel


def coordinates(k: KernelBuilder, index: ir.Expr, ndim: int, shape_at: int) -> list[ir.Var]:
    """The row-major coordinates of element ``index`` over the shape at ``info[shape_at:]``."""
    coords: list[ir.Var] = [None] * ndim  # type: ignore[list-item]
    rest = k.let(index, "rest")
    for d in reversed(range(ndim)):
        size = k.info(shape_at + d)
        coords[d] = k.let(rest % size, "c")
        if d:
            k.assign(rest, rest / size)
    return coords


def _position(k: KernelBuilder, coords: Sequence[ir.Expr], at: int) -> ir.Var:
    """``info[at] + sum(coords[d] * info[at + 1 + d])``: a buffer position from an offset and
    strides stored at ``info[at:]``."""
    pos = k.let(k.info(at), "pos")
    for d, c in enumerate(coords):
        k.assign(pos, pos + c * k.info(at + 1 + d))
    return pos


def copy_into(dst: JitTensor, src: JitTensor) -> None:
    """Enqueue ``dst[...] = src`` where ``dst`` is a view (any strides, no overlap) of a buffer
    no input shares and ``src`` broadcasts to ``dst.shape``. One invocation per element."""
    shape = dst.shape
    n = numel(shape)
    if n == 0:
        return
    ndim = len(shape)
    runtime = dst.runtime
    info = [n, *shape, dst.offset, *dst.strides, src.offset, *broadcast_strides(src, shape)]
    key = ("copy_into", src.dtype.name, dst.dtype.name, ndim)

    def build() -> ir.Kernel:
        k = KernelBuilder("copy_into", (WORKGROUP, 1, 1))
        out = k.buffer("out", dst.dtype, writable=True)
        inp = k.buffer("in", src.dtype)
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        coords = coordinates(k, i, ndim, 1)
        to = _position(k, coords, 1 + ndim)
        at = _position(k, coords, 2 + 2 * ndim)
        k.store(out, to, inp[at].cast(dst.dtype))
        return k.build()

    runtime.launch(key, build, [dst.buffer, src.buffer], info, invocations=n)


#: The most inputs one ``cat_into`` launch copies (each binds a buffer).
CAT_INPUTS = 8


def cat_into(out: JitTensor, parts: Sequence[tuple[JitTensor, int]], dim: int) -> None:
    """Enqueue, for every ``(x, start)`` of ``parts``, ``out[..., start:start + n, ...] = x``
    along ``dim`` (``out`` a view of any strides, the parts side by side and together all of
    it), in one launch: one invocation per element of ``out``, which reads the part its
    coordinate along ``dim`` falls in. A ``cat`` of several inputs costs one launch instead of
    one per input."""
    shape = out.shape
    n = numel(shape)
    if n == 0:
        return
    ndim, count = len(shape), len(parts)
    info = [n, *shape, out.offset, *out.strides]
    for x, start in parts:
        info += [start, start + x.shape[dim], x.offset, *x.strides]
    key = ("cat_into", out.dtype.name, ndim, count, dim)

    def build() -> ir.Kernel:
        k = KernelBuilder("cat_into", (WORKGROUP, 1, 1))
        out_buf = k.buffer("out", out.dtype, writable=True)
        inputs = [k.buffer(f"in{j}", out.dtype) for j in range(count)]
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        coords = coordinates(k, i, ndim, 1)
        to = _position(k, coords, 1 + ndim)
        along = coords[dim]
        for j, buf in enumerate(inputs):
            at = 2 + 2 * ndim + j * (3 + ndim)
            start = k.info(at)
            with k.if_((along >= start) & (along < k.info(at + 1))):
                local = [c - start if d == dim else c for d, c in enumerate(coords)]
                k.store(out_buf, to, buf[_position(k, local, at + 2)])
        return k.build()

    out.runtime.launch(key, build, [out.buffer, *[x.buffer for x, _ in parts]], info,
                       invocations=n)


def gather(out: JitTensor, x: JitTensor, dim: int, indices: JitTensor,
           index_strides: Sequence[int]) -> None:
    """Enqueue ``out[c] = x[c with c[dim] = indices[c]]`` for every coordinate ``c`` of the plain
    ``out``, reading ``indices`` at ``index_strides`` over ``out.shape`` (0 strides broadcast a
    1-d index list for ``select``). One invocation per output element."""
    shape = out.shape
    n = numel(shape)
    if n == 0:
        return
    ndim = len(shape)
    info = [n, *shape, dim, indices.offset, *index_strides, x.offset, *x.strides, x.shape[dim]]
    key = ("gather", x.dtype.name, indices.dtype.name, ndim)

    def build() -> ir.Kernel:
        k = KernelBuilder("gather", (WORKGROUP, 1, 1))
        out_buf = k.buffer("out", x.dtype, writable=True)
        x_buf = k.buffer("x", x.dtype)
        index_buf = k.buffer("indices", indices.dtype)
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        coords = coordinates(k, i, ndim, 1)
        the_dim = k.info(1 + ndim)
        # Clamped into the dim: an index out of bounds never reads outside ``x`` (the check,
        # ``check_bounds``, reports it at the next read).
        last = k.info(4 + 3 * ndim) - 1
        raw = index_buf[_position(k, coords, 2 + ndim)].cast("i32")
        j = k.let(ir.call("min", ir.call("max", raw, ir.lift(0, "i32")), last), "j")
        source = [ir.select(the_dim.eq(d), j, c) for d, c in enumerate(coords)]
        k.store(out_buf, i, x_buf[_position(k, source, 3 + 2 * ndim)])
        return k.build()

    x.runtime.launch(key, build, [out.buffer, x.buffer, indices.buffer], info, invocations=n)


def accumulate(out: JitTensor, x: JitTensor, dim: int, indices: JitTensor,
               index_strides: Sequence[int], values: JitTensor, index_shape: Sequence[int],
               order: JitTensor | None = None, order_strides: Sequence[int] = ()) -> None:
    """Enqueue ``out = x`` plus, for every coordinate ``c`` of ``index_shape``, ``values[c]``
    added at ``c with c[dim] = indices[c]`` (``indices`` read at ``index_strides``; repeated
    indices accumulate, in index order).

    Deterministic without atomics: one invocation per element of the plain ``out`` (``x``'s
    shape) sums the values of the index entries that land on it, in the compute type (float32
    for half floats), then stores once. Without ``order`` it scans all ``index_shape[dim]``
    entries of its line: ``x.numel * index_shape[dim]`` index reads, for short index lists.
    With ``order`` (a stable argsort of the indices along ``dim``, read at ``order_strides``)
    it binary-searches its line for its first entry and reads only the entries that land on
    it: ``x.numel * log2(index_shape[dim])`` reads plus one per value added. Either way the sum
    follows index order, as NumPy's ``add.at``.
    """
    shape = out.shape
    n = numel(shape)
    if n == 0:
        return
    ndim = len(shape)
    info = [n, *shape, dim, *index_shape, indices.offset, *index_strides,
            values.offset, *values.strides, x.offset, *x.strides]
    if order is not None:
        info += [order.offset, *order_strides]
    sorted_ = order is not None
    key = ("accumulate", x.dtype.name, indices.dtype.name, values.dtype.name, ndim, sorted_)
    ty = ir.compute_type(x.dtype)

    def build() -> ir.Kernel:
        k = KernelBuilder("accumulate", (WORKGROUP, 1, 1))
        out_buf = k.buffer("out", x.dtype, writable=True)
        x_buf = k.buffer("x", x.dtype)
        index_buf = k.buffer("indices", indices.dtype)
        value_buf = k.buffer("values", values.dtype)
        order_buf = k.buffer("order", order.dtype) if sorted_ else None
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        coords = coordinates(k, i, ndim, 1)
        the_dim = k.info(1 + ndim)
        shape_at, index_at = 2 + ndim, 2 + 2 * ndim
        value_at = index_at + 1 + ndim
        x_at = value_at + 1 + ndim
        order_at = x_at + 1 + ndim
        acc = k.let(x_buf[_position(k, coords, x_at)], "acc")
        # The index entries that can land on this element share its coordinates outside dim
        # (and exist only where those are inside the index tensor's shape).
        inside = k.let(ir.const(True, "bool"), "inside")
        target = k.let(0, "target")
        starts = [k.let(k.info(at), "start") for at in (index_at, value_at, order_at)[:2 + sorted_]]
        for d, c in enumerate(coords):
            is_dim = the_dim.eq(d)
            k.assign(inside, inside.and_(is_dim.or_(c < k.info(shape_at + d))))
            k.assign(target, ir.select(is_dim, c, target))
            outside = ir.select(is_dim, 0, c)
            for start, at in zip(starts, (index_at, value_at, order_at)):
                k.assign(start, start + outside * k.info(at + 1 + d))
        index_pos, value_pos = starts[0], starts[1]

        def add(entry: ir.Expr) -> None:
            value = value_buf[value_pos + entry * k.info(value_at + 1 + the_dim)].cast(ty)
            k.assign(acc, acc.or_(value) if ty == "bool" else acc + value)

        with k.if_(inside):
            count = k.let(k.info(shape_at + the_dim), "count")
            index_step = k.let(k.info(index_at + 1 + the_dim), "istep")
            if not sorted_:
                with k.for_(0, count, name="e") as e:
                    with k.if_(index_buf[index_pos + e * index_step].cast("i32").eq(target)):
                        add(e)
            else:
                order_pos, order_step = starts[2], k.let(k.info(order_at + 1 + the_dim), "ostep")

                def entry_at(s: ir.Expr) -> ir.Expr:
                    return order_buf[order_pos + s * order_step].cast("i32")

                def index_of(e: ir.Expr) -> ir.Expr:
                    return index_buf[index_pos + e * index_step].cast("i32")

                low, high = k.let(0, "low"), k.let(count, "high")
                with k.while_(low < high):
                    mid = k.let((low + high) / 2, "mid")
                    with k.if_(index_of(entry_at(mid)) < target):
                        k.assign(low, mid + 1)
                    with k.else_():
                        k.assign(high, mid)
                with k.while_(low < count):
                    e = k.let(entry_at(low), "e")
                    with k.if_(index_of(e).ne(target)):
                        k.break_()
                    add(e)
                    k.assign(low, low + 1)
        k.store(out_buf, i, acc)
        return k.build()

    buffers = [out.buffer, x.buffer, indices.buffer, values.buffer]
    if order is not None:
        buffers.append(order.buffer)
    x.runtime.launch(key, build, buffers, info, invocations=n)


def accumulate_lines(out: JitTensor, x: JitTensor, dim: int, indices: JitTensor,
                     index_strides: Sequence[int], values: JitTensor,
                     index_shape: Sequence[int]) -> None:
    """What ``accumulate`` computes (``out = x`` plus ``values`` added at ``indices`` along
    ``dim``, in index order), as a copy and then one invocation per line of the index
    entries along ``dim``, adding its entries one after another: ``index_shape``'s elements
    read once, no sort. For runtimes with few, fast cores (``Runtime.serial_scatter``), where
    ``accumulate``'s per-element scan or binary search is the slower way."""
    copy_into(out, x)
    count = index_shape[dim]
    lines = numel(index_shape) // max(count, 1)
    if not lines or not count:
        return
    ndim = len(index_shape)
    line_shape = [1 if d == dim else s for d, s in enumerate(index_shape)]
    info = [lines, count, dim, *line_shape, 0, *out.strides, indices.offset, *index_strides,
            values.offset, *values.strides]
    key = ("accumulate_lines", x.dtype.name, indices.dtype.name, values.dtype.name, ndim)
    ty = ir.compute_type(x.dtype)

    def build() -> ir.Kernel:
        k = KernelBuilder("accumulate_lines", (WORKGROUP, 1, 1))
        out_buf = k.buffer("out", x.dtype, writable=True)
        index_buf = k.buffer("indices", indices.dtype)
        value_buf = k.buffer("values", values.dtype)
        line = k.global_index()
        with k.if_(line >= k.info(0)):
            k.return_()
        coords = coordinates(k, line, ndim, 3)
        out_at, index_at = 3 + ndim, 4 + 2 * ndim
        value_at = index_at + 1 + ndim
        base = _position(k, coords, out_at)
        index_pos = _position(k, coords, index_at)
        value_pos = _position(k, coords, value_at)
        out_step = k.let(k.info(out_at + 1 + k.info(2)), "ostep")
        index_step = k.let(k.info(index_at + 1 + k.info(2)), "istep")
        value_step = k.let(k.info(value_at + 1 + k.info(2)), "vstep")
        with k.for_(0, k.info(1), name="e") as e:
            at = k.let(base + index_buf[index_pos + e * index_step].cast("i32") * out_step, "at")
            value = value_buf[value_pos + e * value_step].cast(ty)
            current = out_buf[at]
            k.store(out_buf, at, current.or_(value) if ty == "bool" else current + value)
        return k.build()

    x.runtime.launch(key, build, [out.buffer, indices.buffer, values.buffer], info,
                     invocations=lines)


# -- bounds checks -------------------------------------------------------------------------------


def check_bounds(indices: JitTensor, limit: int, op: str) -> None:
    """Set the runtime's error word (``runtime.DeviceErrors``) where a value of the plain
    ``indices`` lies outside ``[0, limit)``: one launch, no synchronisation; the next read
    raises ``ShapeError`` naming ``op`` and ``limit``."""
    n = numel(indices.shape)
    if not n:
        return
    runtime = indices.runtime
    errors = runtime.device_errors
    if errors is None:
        from burnish.jit.runtime import DeviceErrors

        with runtime._lock:
            errors = runtime.device_errors
            if errors is None:
                errors = runtime.device_errors = DeviceErrors(runtime)
    code = errors.code(f"{op}: index {{value}} is out of bounds for a dim of size {limit}")
    dtype = indices.dtype
    runtime.launch(("check_bounds", dtype.name), lambda: _check_kernel(dtype),
                   [errors.buffer, indices.buffer], [n, code, limit, indices.offset],
                   invocations=n)


def _check_kernel(dtype) -> ir.Kernel:
    """info: the count, the error's code, the limit, the indices' offset."""
    k = KernelBuilder("check_bounds", (WORKGROUP, 1, 1))
    flag = k.buffer("flag", "int32", writable=True)
    indices = k.buffer("indices", dtype)
    i = k.global_index()
    with k.if_(i >= k.info(0)):
        k.return_()
    value = k.let(indices[i + k.info(3)], "v")
    limit = k.info(2).cast(value.ty)
    with k.if_((value < ir.lift(0, value.ty)).or_(value >= limit)):
        k.store(flag, 0, k.info(1))
        k.store(flag, 1, value.cast("i32"))
    return k.build()
