"""Convolutions over 1, 2 or 3 spatial dims as GEMM: a gather kernel builds the patch matrix
(im2col), the tuned matmul multiplies the weights by it and adds the bias before its one
rounding. A transposed convolution gathers too: output position ``y`` takes input
``(y + padding - tap * dilation) / stride`` where that divides exactly, which is the
convolution of the zero-inserted input without ever building it. The gather runs one
invocation per (sample, channel, output position): it finds the position's coordinates once and
walks the kernel's taps with running offsets, so no patch element costs a division.

The patch matrix of a whole batch is ``[batch, in_channels * taps, positions]``, read by the
matmul as ``[batch, groups, in_channels / groups * taps, positions]``; the weights
``[groups, out_channels / groups, in_channels / groups * taps]`` broadcast over the batch, so
the product lands as ``[batch, out_channels, *out]`` with no copy. Large batches go in chunks.
"""

from __future__ import annotations

import math

from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP, plain
from burnish.jit.kernels.matmul import matmul
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

Dims = tuple[int, ...]

#: Most elements a patch matrix may hold (float32: 128 MiB); larger batches go in chunks.
COLUMN_LIMIT = 1 << 25

# info: the head, then PER_DIM words for each spatial dim; STEP moves a dim's input
# coordinate from one tap to the next (CARRY its remainder, transposed), X_STEP its offset.
TOTAL, CHANNELS, POSITIONS, TAPS, X_OFF, X_SB, X_SC = range(7)
HEAD = 7
IN, OUT, KERNEL, STRIDE, PADDING, X_STRIDE, STEP, CARRY, X_STEP = range(9)
PER_DIM = 9


def output_size(size: Dims, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims) -> Dims:
    """The spatial size of a convolution's output (zero padding on both sides)."""
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in
                 zip(size, kernel, stride, padding, dilation))


def conv(x: JitTensor, weight: JitTensor, bias: JitTensor | None, stride: Dims,
         padding: Dims, dilation: Dims, groups: int) -> JitTensor:
    """Cross-correlation of ``x`` ``[batch, in, *size]`` with ``weight`` ``[out, in / groups,
    *kernel]`` (zero padding on both sides), plus ``bias`` ``[out]``."""
    kernel = weight.shape[2:]
    out_size = output_size(x.shape[2:], kernel, stride, padding, dilation)
    out_channels, per_group = weight.shape[0], weight.shape[1]
    flat = plain(weight)
    matrix = flat.view((groups, out_channels // groups, per_group * math.prod(kernel)),
                       contiguous_strides((groups, out_channels // groups,
                                           per_group * math.prod(kernel))), flat.offset)
    return _gemm(x, matrix, bias, groups, kernel, stride, padding, dilation, out_size, False)


def conv_transpose(x: JitTensor, weight: JitTensor, bias: JitTensor | None, stride: Dims,
                   padding: Dims, output_padding: Dims, dilation: Dims,
                   groups: int) -> JitTensor:
    """The transposed convolution of ``x`` ``[batch, in, *size]`` with ``weight`` ``[in,
    out / groups, *kernel]``, plus ``bias`` ``[out]``."""
    kernel = weight.shape[2:]
    out_size = tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, k, s, p, d, op in
                     zip(x.shape[2:], kernel, stride, padding, dilation, output_padding))
    in_channels, out_per_group = weight.shape[0], weight.shape[1]
    per_group, taps = in_channels // groups, math.prod(kernel)
    # [in, out / groups, *kernel] as [groups, out / groups, in / groups * taps]: a permuted copy.
    weight = plain(weight)
    grouped = (groups, per_group, out_per_group, taps)
    strides = contiguous_strides(grouped)
    swapped = weight.view((groups, out_per_group, per_group, taps),
                          tuple(strides[a] for a in (0, 2, 1, 3)), weight.offset)
    flat = plain(swapped)
    matrix = flat.view((groups, out_per_group, per_group * taps),
                       contiguous_strides((groups, out_per_group, per_group * taps)),
                       flat.offset)
    return _gemm(x, matrix, bias, groups, kernel, stride, padding, dilation, out_size, True)


def _gemm(x: JitTensor, matrix: JitTensor, bias: JitTensor | None, groups: int, kernel: Dims,
          stride: Dims, padding: Dims, dilation: Dims, out_size: Dims,
          transposed: bool) -> JitTensor:
    """``matrix`` ``[groups, out / groups, in / groups * taps]`` times the patch matrix of
    ``x``, batch chunk by batch chunk, into a new ``[batch, out, *out_size]``."""
    runtime = x.runtime
    batch, channels = x.shape[:2]
    _, out_per_group, inner = matrix.shape
    out_channels = groups * out_per_group
    positions, taps = math.prod(out_size), math.prod(kernel)
    shape = (batch, out_channels, *out_size)
    itemsize = runtime.generator.storage_numpy(x.dtype.name).itemsize
    out = JitTensor(runtime.pool.alloc(numel(shape) * itemsize), shape, x.dtype, x.device,
                    runtime)
    if numel(shape) == 0:
        return out
    if bias is not None:
        bias = plain(bias)
    step = max(1, COLUMN_LIMIT // max(1, channels * taps * positions))
    for start in range(0, batch, step):
        count = min(step, batch - start)
        part = x.view((count, *x.shape[1:]), x.strides, x.offset + start * x.strides[0])
        columns = _columns(part, kernel, stride, padding, dilation, out_size, transposed)
        lhs = matrix.view((count, groups, out_per_group, inner),
                          (0, *matrix.strides), matrix.offset)
        rhs = columns.view((count, groups, inner, positions),
                           (channels * taps * positions, inner * positions, positions, 1), 0)
        target = out.view((count, groups, out_per_group, positions),
                          contiguous_strides((count, groups, out_per_group, positions)),
                          start * out_channels * positions)
        matmul(lhs, rhs, bias, groups, out=target)
    return out


def _columns(x: JitTensor, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
             out_size: Dims, transposed: bool) -> JitTensor:
    """The patch matrix ``[batch, channels * taps, positions]`` of ``x``: zeros where a tap
    falls in the padding (or, transposed, between strided input elements)."""
    runtime = x.runtime
    batch, channels = x.shape[:2]
    positions, taps = math.prod(out_size), math.prod(kernel)
    shape = (batch, channels * taps, positions)
    itemsize = runtime.generator.storage_numpy(x.dtype.name).itemsize
    out = JitTensor(runtime.pool.alloc(numel(shape) * itemsize), shape, x.dtype, x.device,
                    runtime)
    total = batch * channels * positions
    if numel(shape) == 0:
        return out
    info = [total, channels, positions, taps, x.offset, x.strides[0], x.strides[1]]
    for d in range(len(kernel)):
        if transposed:
            # Tap by tap the numerator drops by dilation: its quotient by the stride drops by
            # dilation // stride, its remainder by dilation % stride (borrowing below zero).
            step, carry = -(dilation[d] // stride[d]), -(dilation[d] % stride[d])
        else:
            step, carry = dilation[d], 0
        info += [x.shape[2 + d], out_size[d], kernel[d], stride[d], padding[d],
                 x.strides[2 + d], step, carry, step * x.strides[2 + d]]
    spatial = len(kernel)
    key = ("conv_columns", x.dtype.name, spatial, transposed)
    runtime.launch(key, lambda: _columns_kernel(x.dtype.name, spatial, transposed),
                   [out.buffer, x.buffer], info, invocations=total)
    return out


def _columns_kernel(dtype: str, spatial: int, transposed: bool) -> ir.Kernel:
    """One invocation per (sample, channel, position), position fastest so that each tap's
    stores coalesce: it divides out its coordinates once, then walks the taps in row-major
    order with running input coordinates, offsets and output row (no division per element)."""
    k = KernelBuilder("conv_columns", (WORKGROUP, 1, 1))
    out = k.buffer("out", dtype, writable=True)
    x = k.buffer("x", dtype)
    i = k.global_index()
    with k.if_(i >= k.info(TOTAL)):
        k.return_()

    def word(d: int, field: int) -> ir.Expr:
        return k.info(HEAD + d * PER_DIM + field)

    positions = k.info(POSITIONS)
    position = k.let(i % positions, "p")
    row = k.let(i / positions, "row")  # sample * channels + channel
    channel = k.let(row % k.info(CHANNELS), "c")
    sample = k.let(row / k.info(CHANNELS), "b")
    base = k.let(k.info(X_OFF) + sample * k.info(X_SB) + channel * k.info(X_SC), "base")
    target = k.let(row * k.info(TAPS) * positions + position, "dst")

    # Each dim's first tap: its input coordinate and, transposed, the remainder that must be
    # zero for the tap to land on an input element.
    rest = k.let(position, "rest")
    firsts: list[ir.Expr] = [ir.lift(0, "i32")] * spatial
    remainders: list[ir.Expr] = [ir.lift(0, "i32")] * spatial
    for d in reversed(range(spatial)):
        o = rest  # the first dim's coordinate is what the others leave
        if d:
            o = k.let(rest % word(d, OUT), "o")
            k.assign(rest, rest / word(d, OUT))
        if transposed:
            num = k.let(o + word(d, PADDING), "num")  # never negative: floor division is exact
            firsts[d] = k.let(num / word(d, STRIDE), "q")
            remainders[d] = k.let(num - firsts[d] * word(d, STRIDE), "rem")
        else:
            firsts[d] = k.let(o * word(d, STRIDE) - word(d, PADDING), "q")

    def visit(d: int, at: ir.Expr, valid: ir.Expr) -> None:
        """Loop over dim ``d``'s taps, then the next dim's inside; the last dim stores."""
        q = k.let(firsts[d], "q")
        here = k.let(at + q * word(d, X_STRIDE), "at")
        rem = k.let(remainders[d], "rem") if transposed else None
        with k.for_(0, word(d, KERNEL), name="t"):
            inside = (q >= 0).and_(q < word(d, IN))
            if rem is not None:
                inside = inside.and_(rem.eq(0))
            ok = k.let(inside if d == 0 else valid.and_(inside), "ok")
            if d + 1 < spatial:
                visit(d + 1, here, ok)
            else:
                value = x[ir.select(ok, here, 0)]
                k.store(out, target, ir.select(ok, value, 0))
                k.assign(target, target + positions)
            k.assign(q, q + word(d, STEP))
            k.assign(here, here + word(d, X_STEP))
            if rem is not None:
                k.assign(rem, rem + word(d, CARRY))
                borrow = k.let(rem < 0, "borrow")
                k.assign(rem, ir.select(borrow, rem + word(d, STRIDE), rem))
                k.assign(q, ir.select(borrow, q - 1, q))
                k.assign(here, ir.select(borrow, here - word(d, X_STRIDE), here))

    visit(0, base, ir.lift(True, "bool"))
    return k.build()
