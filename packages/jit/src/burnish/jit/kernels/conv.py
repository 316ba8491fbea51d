"""Convolutions over 1, 2 or 3 spatial dims as GEMM.

Implicit GEMM (every product large enough for the tiled kernel): the tiled matmul kernel of
``kernels.matmul`` reads its operands through loaders that find each patch element in the
input where it lies, so no patch matrix is ever built. A convolution is, per group, the
weights ``[out / groups, in / groups * taps]`` times the patches ``[in / groups * taps, batch *
positions]`` (the whole batch is one wide product, so deep layers with few positions still
fill whole tiles), stored straight into ``[batch, out, *out]`` with the bias added. The weight
gradient is, per group, the output's gradient ``[out / groups, batch * positions]`` times the
patches read the other way round ``[batch * positions, in / groups * taps]``: a long inner dim,
split into runs that workgroups sum side by side, then added up by a reduction.

Small products keep the explicit form: a gather kernel builds the patch matrix
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
import os

from burnish.dtype import get_dtype
from burnish.jit import autotune, ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels import matmul as mm
from burnish.jit.kernels.elementwise import WORKGROUP, elementwise, plain
from burnish.jit.kernels.matmul import matmul
from burnish.jit.kernels.reduce import reduce
from burnish.jit.runtime import Runtime
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
    if runtime.library_conv(x, matrix, bias, out, groups, kernel, stride, padding, dilation,
                            transposed):
        return out
    if _implicit_forward(x, matrix, bias, out, groups, kernel, stride, padding, dilation,
                         out_size, transposed):
        return out
    step = max(1, COLUMN_LIMIT // max(1, channels * taps * positions))
    for start in range(0, batch, step):
        count = min(step, batch - start)
        part = x.view((count, *x.shape[1:]), x.strides, x.offset + start * x.strides[0])
        patches = columns(part, kernel, stride, padding, dilation, out_size, transposed)
        lhs = matrix.view((count, groups, out_per_group, inner),
                          (0, *matrix.strides), matrix.offset)
        rhs = patches.view((count, groups, inner, positions),
                           (channels * taps * positions, inner * positions, positions, 1), 0)
        target = out.view((count, groups, out_per_group, positions),
                          contiguous_strides((count, groups, out_per_group, positions)),
                          start * out_channels * positions)
        matmul(lhs, rhs, bias, groups, out=target)
    return out


def columns(x: JitTensor, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
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


# -- implicit GEMM ---------------------------------------------------------------------------

#: ``BURNISH_JIT_IMPLICIT_CONV=0`` turns the implicit kernels off (every convolution then
#: builds its patch matrix): for comparisons.
IMPLICIT = os.environ.get("BURNISH_JIT_IMPLICIT_CONV", "1").lower() not in (
    "0", "false", "off", "no")

#: The implicit kernels' words follow the matmul's words for one batch dim (the groups) and
#: the two of a split: positions and taps per sample, the input's sample and channel strides,
#: the output's channels, the gradient's sample stride; then PER_DIM_I words per spatial dim.
CONV_AT = mm.BATCH_AT + 3 + 2
I_POSITIONS, I_TAPS, I_X_SB, I_X_SC, I_OUT_CHANNELS, I_G_SB = range(6)
HEAD_I = 6
I_IN, I_OUT, I_KERNEL, I_STRIDE, I_PADDING, I_DILATION, I_X_STRIDE = range(7)
PER_DIM_I = 7

def _implicit_fits(runtime: Runtime, m: int, n: int, inner: int) -> bool:
    """Whether a convolution's product takes the implicit kernels: those the tiled matmul
    would take (smaller ones build their small patch matrix), on runtimes that want them."""
    return (IMPLICIT and runtime.implicit_convolutions and min(m, n) >= mm.MIN_TILED
            and m * n * inner >= mm.MIN_TILED_WORK)


def _spatial_words(x: JitTensor, out_size: Dims, kernel: Dims, stride: Dims, padding: Dims,
                   dilation: Dims) -> list[int]:
    words: list[int] = []
    for d in range(len(kernel)):
        words += [x.shape[2 + d], out_size[d], kernel[d], stride[d], padding[d], dilation[d],
                  x.strides[2 + d]]
    return words


def _implicit_forward(x: JitTensor, matrix: JitTensor, bias: JitTensor | None, out: JitTensor,
                      groups: int, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
                      out_size: Dims, transposed: bool) -> bool:
    """``out`` = ``matrix`` times ``x``'s patches (plus ``bias``) through the implicit tiled
    kernel; False (nothing run) where the product is too small for it."""
    batch, channels = x.shape[:2]
    _, m, inner = matrix.shape
    positions = math.prod(out_size)
    n = batch * positions
    if not _implicit_fits(x.runtime, m, n, inner):
        return False
    runtime, spatial = x.runtime, len(kernel)
    info = [m, n, inner, 0, 0, matrix.offset, matrix.strides[1], matrix.strides[2], x.offset,
            0, 0, out.offset, groups, 0, groups, matrix.strides[0],
            channels // groups * x.strides[1], 0, 0,
            positions, math.prod(kernel), x.strides[0], x.strides[1], groups * m, 0]
    info += _spatial_words(x, out_size, kernel, stride, padding, dilation)
    base = (x.dtype.name, 1, (False, True, False, True), bias is not None)
    unit_stride = all(st == 1 for st in stride)
    buffers = [out.buffer, matrix.buffer, x.buffer] + ([bias.buffer] if bias is not None else [])

    def run(name: str) -> None:
        tiling, words, tiles = _tiled(name, info, groups)
        loaders = (None, _patch_loader(spatial, transposed, unit_stride, tiling.tk))
        runtime.launch(("conv_implicit", tiling, *base, spatial, transposed, unit_stride),
                       lambda: mm._tiled_kernel(tiling, *base, epilogue=_ConvStore(),
                                                loaders=loaders),
                       buffers, words, groups=tiles)

    key = (f"conv/{x.dtype.name}/{spatial}d{'/t' if transposed else ''}"
           f"{'/bias' if bias is not None else ''}/"
           f"{autotune.shape_class(groups, m, n, inner)}")
    run(autotune.choose(runtime.device_name, key, mm._candidates(m, n), run, runtime.sync))
    return True


def conv_weight_grad(x: JitTensor, grad: JitTensor, kernel: Dims, stride: Dims, padding: Dims,
                     dilation: Dims, groups: int) -> JitTensor | None:
    """The gradient of ``conv(x, weight, ...)`` with respect to ``weight`` ``[out, in / groups,
    *kernel]`` for the output's gradient ``grad`` through the implicit tiled kernel, its inner
    dim (batch * positions) split into runs summed side by side and then added up; None where
    the product is too small for it."""
    batch, channels = x.shape[:2]
    out_channels, out_size = grad.shape[1], tuple(grad.shape[2:])
    positions, taps = math.prod(out_size), math.prod(kernel)
    m, n, inner = out_channels // groups, channels // groups * taps, batch * positions
    if not _implicit_fits(x.runtime, m, n, inner):
        return None
    runtime, spatial, dtype = x.runtime, len(kernel), x.dtype
    grad = plain(grad)
    info = [m, n, inner, 0, 0, grad.offset, 0, 0, x.offset, 0, 0, 0, groups, 0, groups,
            m * positions, channels // groups * x.strides[1], 0, groups,
            positions, taps, x.strides[0], x.strides[1], out_channels,
            out_channels * positions]
    info += _spatial_words(x, out_size, kernel, stride, padding, dilation)
    base = (dtype.name, 1, (False, True, True, False), False)
    # Half floats' runs are kept in float32: rounded once, after they are added up.
    partial_dtype = get_dtype("float32") if dtype.name in ("float16", "bfloat16") else dtype
    itemsize = runtime.generator.storage_numpy(partial_dtype.name).itemsize

    def run(name: str) -> tuple[JitTensor, int]:
        """Launch with tiling ``name``: the partial sums ``[runs, out, n]`` and their count."""
        tiling, words, tiles = _tiled(name, info, groups)
        runs, run_length = mm._runs(tiles, inner, tiling.tk)
        shape = (runs, out_channels, n)
        partial = JitTensor(runtime.pool.alloc(numel(shape) * itemsize), shape,
                            partial_dtype, x.device, runtime)
        words[mm.SPLIT_AT + 3] = run_length
        loaders = (_gradient_loader(tiling.tk), _patch_rows_loader(spatial, tiling.tk))
        runtime.launch(("conv_weight_grad", tiling, *base, spatial),
                       lambda: mm._tiled_kernel(tiling, *base, loaders=loaders, split=True,
                                                epilogue=mm.Partials(partial_dtype.name)),
                       [partial.buffer, grad.buffer, x.buffer], words,
                       groups=runs * tiles)
        return partial, runs

    key = f"conv_weight_grad/{dtype.name}/{spatial}d/{autotune.shape_class(groups, m, n, inner)}"
    partial, runs = run(autotune.choose(runtime.device_name, key, mm._candidates(m, n), run,
                                        runtime.sync))
    if runs > 1:
        flat = partial.view((runs, out_channels * n), (out_channels * n, 1), partial.offset)
        partial = reduce("sum", flat, 0)[0]
    shape = (out_channels, channels // groups, *kernel)
    out = partial.view(shape, contiguous_strides(shape), partial.offset)
    if partial_dtype is not dtype:
        out = elementwise("cast", lambda v, s: v[0].cast(dtype), [out], dtype)
    return out


def _tiled(name: str, info: list[int], groups: int) -> tuple[mm.Tiling, list[int], int]:
    """Tiling ``name``, the launch's words with its tile counts, and its workgroups."""
    tiling = mm._BY_NAME[name]
    words = list(info)
    words[mm.TILES_M] = _ceil(info[mm.M], tiling.tm)
    words[mm.TILES_N] = _ceil(info[mm.N], tiling.tn)
    return tiling, words, groups * words[mm.TILES_M] * words[mm.TILES_N]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _word(k: KernelBuilder, field: int) -> ir.Expr:
    return k.info(CONV_AT + field)


def _dim(k: KernelBuilder, d: int, field: int) -> ir.Expr:
    return k.info(CONV_AT + HEAD_I + d * PER_DIM_I + field)


def _coords(k: KernelBuilder, index: ir.Expr, spatial: int, field: int) -> list[ir.Expr]:
    """``index``'s row-major coordinates over the spatial dims sized by word ``field``."""
    coords: list[ir.Expr] = [index] * spatial
    rest = index
    for d in reversed(range(1, spatial)):
        coords[d] = k.let(rest % _dim(k, d, field), "o")
        rest = k.let(rest / _dim(k, d, field), "rest")
    coords[0] = rest
    return coords


class _Counter:
    """An inner position ``gk`` as mixed-radix digits (``top``, then one per radix): set up by
    division at the first inner position a tile copy reads, then advanced by the tile's depth
    ``tk`` (whose digits are worked out once) with one carry per digit, so that no step of the
    inner loop divides."""

    def __init__(self, k: KernelBuilder, radices: list[ir.Expr], tk: int):
        self.k, self.radices, self.tk = k, radices, tk
        self.digits: list[ir.Var] | None = None
        self.step: list[ir.Expr] = []

    def _split(self, value: ir.Expr) -> list[ir.Expr]:
        digits: list[ir.Expr] = []
        rest = value
        for radix in reversed(self.radices):
            digits.insert(0, self.k.let(rest % radix, "d"))
            rest = self.k.let(rest / radix, "rest")
        return [rest, *digits]

    def at(self, gk: ir.Expr) -> list[ir.Var]:
        """The digits of ``gk``: the tile copy's first position on the first call (made before
        the inner loop), the position ``tk`` further on each later call (made in the loop)."""
        k = self.k
        if self.digits is None:
            self.digits = [k.let(d, "d") for d in self._split(gk)]
            self.step = self._split(ir.lift(self.tk, "i32"))
            return self.digits
        carry: ir.Expr = ir.lift(0, "i32")
        for j in reversed(range(1, len(self.digits))):
            radix = self.radices[j - 1]
            total = k.let(self.digits[j] + self.step[j] + carry, "sum")
            over = k.let(total >= radix, "over")
            k.assign(self.digits[j], ir.select(over, total - radix, total))
            carry = ir.select(over, 1, 0, "i32")
        k.assign(self.digits[0], self.digits[0] + self.step[0] + carry)
        return self.digits


def _input_at(k: KernelBuilder, d: int, start: ir.Expr, tap: ir.Expr, transposed: bool,
              unit_stride: bool) -> tuple[ir.Expr, ir.Expr]:
    """Dim ``d``'s input coordinate for the output coordinate whose first tap is ``start``
    (convolution: ``o * stride - padding``; transposed: ``o + padding``) and ``tap``, and
    whether it holds an input element. Transposed with unit strides, every tap lands on one."""
    if not transposed or unit_stride:
        sign = -1 if transposed else 1
        i = k.let(start + sign * tap * _dim(k, d, I_DILATION), "i")
        return i, (i >= 0).and_(i < _dim(k, d, I_IN))
    num = k.let(start - tap * _dim(k, d, I_DILATION), "num")
    whole = k.let(ir.select(num >= 0, num, 0), "num")  # never divide a negative number
    q = k.let(whole / _dim(k, d, I_STRIDE), "q")
    ok = (num >= 0).and_((whole - q * _dim(k, d, I_STRIDE)).eq(0)).and_(q < _dim(k, d, I_IN))
    return q, ok


def _located(k: KernelBuilder, address: ir.Expr, inputs: list[tuple[ir.Expr, ir.Expr]]
             ) -> tuple[ir.Expr, ir.Expr | None]:
    """``address`` moved to each spatial dim's input coordinate (``inputs``: the coordinate
    and whether it lies inside the input), and whether all of them do."""
    valid: ir.Expr | None = None
    for d, (i, ok) in enumerate(inputs):
        address = address + i * _dim(k, d, I_X_STRIDE)
        valid = ok if valid is None else valid.and_(ok)
    return address, valid


def _patch_loader(spatial: int, transposed: bool, unit_stride: bool, tk: int) -> mm.Loader:
    """Column ``gn`` (sample, output position) of the patch matrix, row ``gk`` (channel,
    tap): where in ``x`` it lies, and whether it is not padding (or, transposed, a
    position between strided inputs)."""

    def loader(k: KernelBuilder, base: ir.Expr, gn: ir.Expr):
        positions = _word(k, I_POSITIONS)
        at = k.let(base + (gn / positions) * _word(k, I_X_SB), "at")
        starts = []
        for d, o in enumerate(_coords(k, gn % positions, spatial, I_OUT)):
            first = (o + _dim(k, d, I_PADDING) if transposed
                     else o * _dim(k, d, I_STRIDE) - _dim(k, d, I_PADDING))
            starts.append(k.let(first, "q"))
        counter = _Counter(k, [_dim(k, d, I_KERNEL) for d in range(spatial)], tk)

        def read(gk: ir.Expr) -> tuple[ir.Expr, ir.Expr | None]:
            channel, *taps = counter.at(gk)
            return _located(k, at + channel * _word(k, I_X_SC), [
                _input_at(k, d, starts[d], tap, transposed, unit_stride)
                for d, tap in enumerate(taps)])

        return read

    return loader


def _gradient_loader(tk: int) -> mm.Loader:
    """Row ``gm`` (output channel) of the gradient ``[out, batch * positions]`` read from the
    plain ``[batch, out, *out_size]``."""

    def loader(k: KernelBuilder, base: ir.Expr, gm: ir.Expr):
        at = k.let(base + gm * _word(k, I_POSITIONS), "at")
        counter = _Counter(k, [_word(k, I_POSITIONS)], tk)

        def read(gk: ir.Expr) -> tuple[ir.Expr, ir.Expr | None]:
            sample, position = counter.at(gk)
            return at + sample * _word(k, I_G_SB) + position, None

        return read

    return loader


def _patch_rows_loader(spatial: int, tk: int) -> mm.Loader:
    """Column ``gn`` (channel, tap) of the patches read as ``[batch * positions, in / groups
    * taps]``, row ``gk`` (sample, output position)."""

    def loader(k: KernelBuilder, base: ir.Expr, gn: ir.Expr):
        taps = _word(k, I_TAPS)
        at = k.let(base + (gn / taps) * _word(k, I_X_SC), "at")
        offsets = [k.let(t * _dim(k, d, I_DILATION) - _dim(k, d, I_PADDING), "q")
                   for d, t in enumerate(_coords(k, gn % taps, spatial, I_KERNEL))]
        counter = _Counter(k, [_dim(k, d, I_OUT) for d in range(spatial)], tk)

        def read(gk: ir.Expr) -> tuple[ir.Expr, ir.Expr | None]:
            sample, *outs = counter.at(gk)
            inputs = [k.let(o * _dim(k, d, I_STRIDE) + offsets[d], "i")
                      for d, o in enumerate(outs)]
            return _located(k, at + sample * _word(k, I_X_SB), [
                (i, (i >= 0).and_(i < _dim(k, d, I_IN))) for d, i in enumerate(inputs)])

        return read

    return loader


class _ConvStore(mm.Epilogue):
    """Stores column (sample, position) of group ``batch``'s row ``row`` at ``[sample,
    channel, position]`` of the plain output, with the channel's bias."""

    def store(self, k: KernelBuilder, acc: ir.Expr, batch: ir.Expr, row: ir.Expr,
              col: ir.Expr, index: ir.Expr) -> None:
        positions = _word(k, I_POSITIONS)
        channel = k.let(batch * k.info(mm.M) + row, "ch")
        value = acc if self.bias is None else acc + self.bias[channel]
        at = ((col / positions) * _word(k, I_OUT_CHANNELS) + channel) * positions
        k.store(self.out, k.info(mm.OUT_OFF) + at + col % positions, value)
