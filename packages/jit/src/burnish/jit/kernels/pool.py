"""Pools over 1, 2 or 3 spatial dims: one invocation per output element, looping over its
window in row-major order. Fixed windows (average and max pools: ``start = o * stride -
padding``, ``kernel`` taps ``dilation`` apart) and adaptive ones (``[floor(o * n / out),
ceil((o + 1) * n / out))``) share the kernel; taps outside the input are skipped, which is
what zero padding does to a sum and -inf padding to a max.

Max pools scan as PyTorch does (``value > best or isnan(value)``, starting from the window's
first element inside the input): the first max wins ties, the last NaN wins over everything.
Averages accumulate in the compute type (float32 for half floats) and divide once.
"""

from __future__ import annotations

from burnish.dtype import int64
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP
from burnish.jit.tensor import JitTensor, numel

Dims = tuple[int, ...]

# info: the head, then PER_DIM words for each spatial dim.
TOTAL, CHANNELS, X_OFF, X_SB, X_SC = range(5)
HEAD = 5
IN, OUT, X_STRIDE, KERNEL, STRIDE, PADDING, DILATION = range(7)
PER_DIM = 7


def output_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                ceil_mode: bool) -> int:
    """How many windows fit along one dim (PyTorch's rule; with ``ceil_mode`` the last window
    must start inside the input or its left padding)."""
    room = size + 2 * padding - dilation * (kernel - 1) - 1
    steps = -(-room // stride) if ceil_mode else room // stride
    out = steps + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def avg_pool(x: JitTensor, kernel: Dims, stride: Dims, padding: Dims, count_include_pad: bool,
             ceil_mode: bool) -> JitTensor:
    """Mean over each window; the divisor counts padding (not the ceil-mode overhang beyond
    it) when ``count_include_pad``, else only the input's own elements."""
    ones = (1,) * len(kernel)
    out_size = tuple(output_size(n, k, s, p, 1, ceil_mode) for n, k, s, p in
                     zip(x.shape[2:], kernel, stride, padding))
    mode = "avg_pad" if count_include_pad else "avg"
    return _pool(mode, x, out_size, kernel, stride, padding, ones)[0]


def max_pool(x: JitTensor, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
             ceil_mode: bool, indices: bool) -> tuple[JitTensor, JitTensor | None]:
    """Max over each window and, when ``indices``, the int64 flat spatial index of each max."""
    out_size = tuple(output_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in
                     zip(x.shape[2:], kernel, stride, padding, dilation))
    return _pool("max_indices" if indices else "max", x, out_size, kernel, stride, padding,
                 dilation)


def adaptive_avg_pool(x: JitTensor, output_size: Dims) -> JitTensor:
    zeros = (0,) * len(output_size)
    return _pool("adaptive_avg", x, tuple(output_size), zeros, zeros, zeros, zeros)[0]


def adaptive_max_pool(x: JitTensor, output_size: Dims, indices: bool
                      ) -> tuple[JitTensor, JitTensor | None]:
    zeros = (0,) * len(output_size)
    mode = "adaptive_max_indices" if indices else "adaptive_max"
    return _pool(mode, x, tuple(output_size), zeros, zeros, zeros, zeros)


def _pool(mode: str, x: JitTensor, out_size: Dims, kernel: Dims, stride: Dims, padding: Dims,
          dilation: Dims) -> tuple[JitTensor, JitTensor | None]:
    runtime = x.runtime
    batch, channels = x.shape[:2]
    shape = (batch, channels, *out_size)
    total = numel(shape)
    gen = runtime.generator
    out = JitTensor(runtime.pool.alloc(total * gen.storage_numpy(x.dtype.name).itemsize),
                    shape, x.dtype, x.device, runtime)
    with_indices = mode.endswith("_indices")
    index = None
    if with_indices:
        index = JitTensor(runtime.pool.alloc(total * gen.storage_numpy("int64").itemsize),
                          shape, int64, x.device, runtime)
    if total == 0:
        return out, index
    if mode in ("max", "max_indices") and runtime.library_max_pool(x, out, index, kernel, stride,
                                                                   padding, dilation):
        return out, index
    info = [total, channels, x.offset, x.strides[0], x.strides[1]]
    for d in range(len(out_size)):
        info += [x.shape[2 + d], out_size[d], x.strides[2 + d], kernel[d], stride[d],
                 padding[d], dilation[d]]
    spatial = len(out_size)
    key = ("pool", mode, x.dtype.name, spatial)
    buffers = [out.buffer] + ([index.buffer] if index is not None else []) + [x.buffer]
    runtime.launch(key, lambda: _pool_kernel(mode, x.dtype.name, spatial), buffers, info,
                   invocations=total)
    return out, index


def _pool_kernel(mode: str, dtype: str, spatial: int) -> ir.Kernel:
    adaptive = mode.startswith("adaptive")
    is_max = "max" in mode
    k = KernelBuilder(f"pool_{mode}", (WORKGROUP, 1, 1))
    out = k.buffer("out", dtype, writable=True)
    index_out = k.buffer("index", "int64", writable=True) if mode.endswith("_indices") else None
    x = k.buffer("x", dtype)
    ty = ir.compute_type(dtype)
    i = k.global_index()
    with k.if_(i >= k.info(TOTAL)):
        k.return_()

    def word(d: int, field: int) -> ir.Expr:
        return k.info(HEAD + d * PER_DIM + field)

    # This output's coordinates, then each dim's window: first tap, tap count and step.
    rest = k.let(i, "rest")
    coords: list[ir.Expr] = [ir.lift(0, "i32")] * spatial
    for d in reversed(range(spatial)):
        coords[d] = k.let(rest % word(d, OUT), "o")
        k.assign(rest, rest / word(d, OUT))
    channel = k.let(rest % k.info(CHANNELS), "c")
    sample = k.let(rest / k.info(CHANNELS), "b")
    base = k.let(k.info(X_OFF) + sample * k.info(X_SB) + channel * k.info(X_SC), "base")
    starts, counts, steps = [], [], []
    for d in range(spatial):
        n, o = word(d, IN), coords[d]
        if adaptive:
            first = k.let((o * n) / word(d, OUT), "start")
            end = k.let(((o + 1) * n + word(d, OUT) - 1) / word(d, OUT), "end")
            starts.append(first)
            counts.append(k.let(end - first, "count"))
            steps.append(ir.lift(1, "i32"))
        else:
            starts.append(k.let(o * word(d, STRIDE) - word(d, PADDING), "start"))
            counts.append(word(d, KERNEL))
            steps.append(word(d, DILATION))

    if is_max:
        best = k.let(ir.lift(0, ty), "best", ty)
        found = k.let(ir.lift(False, "bool"), "found")
        where = k.let(0, "where")
    else:
        total = k.let(ir.lift(0, ty), "sum", ty)

    def visit(d: int, at: ir.Expr, flat: ir.Expr) -> None:
        """Loop over dim ``d``'s taps inside the input, then the next dim's, innermost last."""
        with k.for_(0, counts[d], name="t") as t:
            pos = k.let(starts[d] + t * steps[d], "q")
            with k.if_((pos >= 0).and_(pos < word(d, IN))):
                here = k.let(at + pos * word(d, X_STRIDE), "at")
                index = k.let(flat * word(d, IN) + pos, "flat")
                if d + 1 < spatial:
                    visit(d + 1, here, index)
                    return
                value = k.let(x[here], "v")
                if is_max:
                    take = found.not_().or_(value > best)
                    if ir.is_float(ty):
                        take = take.or_(ir.call("isnan", value))
                    with k.if_(take):
                        k.assign(best, value)
                        k.assign(where, index)
                        k.assign(found, ir.lift(True, "bool"))
                else:
                    k.assign(total, total + value)

    visit(0, base, ir.lift(0, "i32"))
    if is_max:
        k.store(out, i, best)
        if index_out is not None:
            k.store(index_out, i, where.cast("i64"))
        return k.build()

    divisor = k.let(1, "count")
    for d in range(spatial):
        if adaptive:
            k.assign(divisor, divisor * counts[d])
            continue
        n, first = word(d, IN), starts[d]
        if mode == "avg_pad":
            # Padding counts, the ceil-mode overhang past it does not.
            end = ir.call("min", first + counts[d], n + word(d, PADDING))
            k.assign(divisor, divisor * (end - first))
        else:
            end = ir.call("min", first + counts[d], n)
            k.assign(divisor, divisor * (end - ir.call("max", first, 0)))
    k.store(out, i, total / divisor.cast(ty))
    return k.build()
