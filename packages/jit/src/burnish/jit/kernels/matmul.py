"""Matrix products: a tiled kernel (workgroup-memory tiles, register blocking, the tile shape
chosen per device and shape class by ``burnish.jit.autotune``), a plain kernel, one output
element per invocation, for small and thin products, and a split kernel for thin products with a
long inner dim, where several invocations share each output's dot product.

Operands are read through their strides (transposed and broadcast views cost no copy); batch
dims broadcast. Ints accumulate in their compute type (narrow ints wrap at the store, which is
the same as wrapping at every step); half floats accumulate in float32 and round once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from burnish.dtype import get_dtype
from burnish.jit import autotune, ir, lazy
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP, elementwise
from burnish.jit.tensor import JitTensor, contiguous_strides, numel


@dataclass(frozen=True)
class Tiling:
    """A workgroup computes a ``tm x tn`` tile of the output, stepping through K ``tk`` at a
    time; each invocation accumulates ``rm x rn`` outputs in registers: runs of ``runs``
    neighbouring rows and columns (0: one run of ``rm`` rows and one of ``rn`` columns), the
    runs of one invocation ``runs`` times the invocations across apart."""

    tm: int
    tn: int
    tk: int
    rm: int
    rn: int
    runs: int = 0

    @property
    def name(self) -> str:
        runs = f"r{self.runs}" if self.runs else ""
        return f"{self.tm}x{self.tn}x{self.tk}/{self.rm}x{self.rn}{runs}"

    @property
    def threads(self) -> int:
        return (self.tm // self.rm) * (self.tn // self.rn)


#: The tile shapes autotune chooses from: 256 invocations each, and at most 16 KiB of
#: workgroup memory (WebGPU's guaranteed minimum) for 64-bit types, whose tiles go unpadded.
#: ``_candidates`` says which is the default when tuning is off.
#: The 128 x 128 tiles read their 8 x 8 blocks as runs of four words, a run of the next
#: invocation between: eight invocations' 16-byte loads then cover 128 bytes of workgroup
#: memory side by side instead of meeting twice in each bank (on an H200: 1.1x-1.4x faster
#: than one run of eight on cuda and rocm, up to 1.07x on wgpu; bench/bench_products.py).
TILINGS = (
    Tiling(64, 64, 16, 4, 4),
    Tiling(128, 128, 8, 8, 8, 4),
    Tiling(128, 64, 8, 8, 4),
    Tiling(32, 32, 16, 2, 2),
)
_BY_NAME = {t.name: t for t in TILINGS}
#: The default for outputs of at least ``LARGE_OUTPUT`` elements in at least ``LARGE_TILES``
#: of its tiles (fewer leave much of a large GPU idle: 64 x 64 tiles ran such products up to
#: 2x faster on an H200).
LARGE_DEFAULT = TILINGS[1]
LARGE_OUTPUT = 1024 * 1024
LARGE_TILES = 128

#: A tiled product whose tiles are too few to fill the device splits its inner dim into runs
#: of at least ``MIN_RUN`` (a weight gradient's, the batch's tokens or samples), until about
#: ``RUNS_TARGET`` workgroups share the product; the runs' sums (float32 for half floats) are
#: then added up by a reduction, in a fixed order.
RUNS_TARGET = 512
MIN_RUN = 512
#: How a candidate tiling's name says that it splits the inner dim.
RUNS_SUFFIX = "+runs"

#: Products smaller than this (M * N * K) or thinner than ``MIN_TILED`` rows or columns use the
#: plain kernel: a tile would be mostly padding.
MIN_TILED_WORK = 1 << 16
MIN_TILED = 16

#: Products the plain kernel would take whose inner dim is at least ``SPLIT_K`` take the split
#: kernel instead: ``SPLIT_LANES`` invocations share each output's dot product (a power of two).
SPLIT_K = 256
SPLIT_LANES = 32

# info layout shared by the kernels; the batch shape and strides follow at BATCH_AT.
M, N, K, TILES_M, TILES_N, A_OFF, A_SM, A_SK, B_OFF, B_SK, B_SN, OUT_OFF, GROUPS, TOTAL = range(14)
BATCH_AT = 14
#: A split kernel's two words (the inner run's length, the batch count) follow the batch words:
#: at ``SPLIT_AT + 3 * batch rank``.
SPLIT_AT = BATCH_AT


def matmul(a: JitTensor, b: JitTensor, bias: JitTensor | None = None, groups: int = 1,
           out: JitTensor | None = None, library: bool = True) -> JitTensor:
    """``a [..., M, K] @ b [..., K, N]`` with the batch dims broadcast, as a new plain tensor of
    ``a``'s dtype (both operands have it). With ``bias`` (plain, ``[groups * M]``), batch
    ``i``'s row ``m`` gets ``bias[(i % groups) * M + m]`` added before the one rounding.
    ``out``, when given, is written instead: a plain tensor of the result's shape. While
    ``burnish.fusion`` records, a product the runtime lets fusion take (``fuses_product``) is
    recorded instead, for the elementwise ops that follow it to run in its kernel; such a
    product runs in burnish.jit's kernel even when it runs alone, as does any product with
    ``library`` false (the runtime's vendor library, ``Runtime.library_matmul``, is skipped)."""
    runtime, dtype = a.runtime, a.dtype
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = _broadcast(a.shape[:-2], b.shape[:-2])
    shape = batch + (m, n)
    count = numel(batch)
    if (out is None and bias is None and lazy.RECORDING.depth and m and n and k and count
            and runtime.fuses_product(dtype, count * m * n * k)):
        pending = lazy.record("matmul", lazy.PRODUCT, (a, b), dtype, (), shape, runtime,
                              a.device)
        if pending is not None:
            return pending
        library = False  # predicted to be flushed alone: it runs now, as the flush would run it
    out_given = out is not None
    if out is None:
        itemsize = runtime.generator.storage_numpy(dtype.name).itemsize
        out = JitTensor(runtime.pool.alloc(numel(shape) * itemsize), shape, dtype, a.device,
                        runtime)
    if m == 0 or n == 0 or count == 0:
        return out
    if k == 0:
        _zero_or_bias(out, bias, groups, m, n)
        return out
    if library and (runtime.library_matmul(a, b, out, batch) if bias is None else
                    runtime.library_bias
                    and runtime.library_matmul(a, b, out, batch, bias, groups)):
        return out
    layout = Layout(a, b, batch, out.offset, groups, bias is not None)
    buffers = [out.buffer, a.buffer, b.buffer] + ([bias.buffer] if bias is not None else [])

    def run(name: str | None = None) -> JitTensor:
        """Launch the product's kernel (the tiled one with tiling ``name``); returns the
        result (``out``, or the sum of the runs of a tiling that splits the inner dim)."""
        if name is not None and name.endswith(RUNS_SUFFIX):
            tiling = _BY_NAME[name[:-len(RUNS_SUFFIX)]]
            layout.tile(tiling)
            return _in_runs(layout, tiling, a, b, out)
        if name is not None:
            layout.tile(_BY_NAME[name])
        runtime.launch(layout.key(), lambda: layout.kernel(Epilogue()), buffers, layout.info,
                       groups=layout.workgroups())
        return out

    if not layout.tiled:
        return run()
    flags = "".join("1" if unit else "s" for unit in layout.base[2])
    key = (f"matmul/{dtype.name}/{flags}{'/bias' if bias is not None else ''}/"
           f"{autotune.shape_class(count, m, n, k)}")
    candidates = _candidates(m, n, count)
    if bias is None and out_given is False:
        candidates += [name + RUNS_SUFFIX for name in (LARGE_DEFAULT.name, TILINGS[0].name)
                       if _runs(_tiles(_BY_NAME[name], count, m, n), k, _BY_NAME[name].tk)[0] > 1]
    return run(autotune.choose(runtime.device_name, key, candidates, run, runtime.sync))


class Layout:
    """What a product's launch carries besides its buffers: the metadata words, the kernel's
    structural parameters (``base``: dtype, batch rank, unit strides, bias), and whether it
    takes the tiled kernel (``tiled``; small and thin products take the plain one, or the split
    one when K is long: ``split``), with the tiling chosen (``tile``) and the grid it needs."""

    def __init__(self, a: JitTensor, b: JitTensor, batch: tuple[int, ...],
                 out_offset: int = 0, groups: int = 1, has_bias: bool = False):
        """``batch``: the broadcast batch dims of ``a`` and ``b``."""
        m, k = a.shape[-2:]
        n = b.shape[-1]
        count = numel(batch)
        dims, a_strides, b_strides = _collapse(batch, _batch_strides(a, batch),
                                               _batch_strides(b, batch))
        self.info = [m, n, k, 0, 0, a.offset, a.strides[-2], a.strides[-1], b.offset,
                     b.strides[-2], b.strides[-1], out_offset, groups, count * m * n, *dims,
                     *a_strides, *b_strides]
        # Unit strides are spelled without a multiply, and pick which way tiles are read.
        layout = tuple(s == 1 for s in (a.strides[-2], a.strides[-1], b.strides[-2],
                                        b.strides[-1]))
        self.base = (a.dtype.name, len(dims), layout, has_bias)
        self.invocations = count * m * n
        self.m, self.n, self.count = m, n, count
        self.tiled = not (min(m, n) < MIN_TILED or m * n * k < MIN_TILED_WORK)
        self.split = not self.tiled and k >= SPLIT_K
        self.tiling: Tiling | None = None

    def tile(self, tiling: Tiling | None = None) -> None:
        """Use ``tiling`` (the default for the output's size when not given; the tile counts
        are part of the metadata)."""
        tiling = tiling or _BY_NAME[_candidates(self.m, self.n, self.count)[0]]
        self.tiling = tiling
        self.info[TILES_M], self.info[TILES_N] = -(-self.m // tiling.tm), -(-self.n // tiling.tn)
        self.groups = self.count * self.info[TILES_M] * self.info[TILES_N]

    def runs(self) -> int:
        """Into how many runs the tiled product would split its inner dim (``_runs``; 1 when
        not tiled, or when its tiles fill the device)."""
        if self.tiling is None:
            return 1
        return _runs(self.groups, self.info[K], self.tiling.tk)[0]

    def key(self) -> tuple:
        if self.tiling is not None:
            return ("matmul_tiled", self.tiling, *self.base)
        return ("matmul_split" if self.split else "matmul_plain", *self.base)

    def workgroups(self) -> int:
        if self.tiling is not None:
            return self.groups
        per_group = WORKGROUP // SPLIT_LANES if self.split else WORKGROUP
        return -(-self.invocations // per_group)

    def kernel(self, epilogue: Epilogue) -> ir.Kernel:
        """The product's kernel, its results stored by ``epilogue``."""
        if self.tiling is not None:
            return _tiled_kernel(self.tiling, *self.base, epilogue=epilogue)
        if self.split:
            return _split_kernel(*self.base, epilogue=epilogue)
        return _plain_kernel(*self.base, epilogue=epilogue)


def _candidates(m: int, n: int, count: int = 1) -> list[str]:
    """The tile shapes to time, the default (used untimed when tuning is off) first: large
    tiles for large outputs of enough of them (``count`` products of ``m x n``), where they
    were fastest on an H100 and an H200, else ``TILINGS[0]``."""
    names = [t.name for t in TILINGS]
    if count * m * n >= LARGE_OUTPUT and _tiles(LARGE_DEFAULT, count, m, n) >= LARGE_TILES:
        names.remove(LARGE_DEFAULT.name)
        names.insert(0, LARGE_DEFAULT.name)
    return names


def _broadcast(x: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max(len(x), len(y))
    x, y = (1,) * (ndim - len(x)) + x, (1,) * (ndim - len(y)) + y
    return tuple(max(p, q) if min(p, q) != 0 else 0 for p, q in zip(x, y))


def _batch_strides(x: JitTensor, batch: tuple[int, ...]) -> tuple[int, ...]:
    """``x``'s strides over the broadcast batch dims (0 where it is broadcast)."""
    own = x.shape[:-2]
    lead = len(batch) - len(own)
    return tuple(0 if d < lead or own[d - lead] == 1 else x.strides[d - lead]
                 for d in range(len(batch)))


def _collapse(batch, a_strides, b_strides):
    """The batch dims with size-1 dims dropped and neighbours merged where both operands (and
    the plain output) step through them as through one dim: fewer dims, fewer kernels."""
    dims: list[list[int]] = []
    for size, sa, sb in zip(batch, a_strides, b_strides):
        if size == 1:
            continue
        if dims and dims[-1][1] == sa * size and dims[-1][2] == sb * size:
            dims[-1] = [dims[-1][0] * size, sa, sb]
        else:
            dims.append([size, sa, sb])
    return [d[0] for d in dims], [d[1] for d in dims], [d[2] for d in dims]


def _zero_or_bias(out: JitTensor, bias: JitTensor | None, groups: int, m: int, n: int) -> None:
    """An empty inner dim: every output is 0, or its bias."""
    if bias is None:
        elementwise("fill", lambda v, s: s[0], [], out.dtype, scalars=[(0, out.dtype)],
                    shape=out.shape, out=out)
        return
    rows = bias.view((numel(out.shape[:-2]) // groups, groups, m, n), (0, m, 1, 0),
                     bias.offset)
    flat = out.view(rows.shape, (groups * m * n, m * n, n, 1), out.offset)
    elementwise("copy", lambda v, s: v[0], [rows], out.dtype, shape=rows.shape, out=flat)


# -- kernels ---------------------------------------------------------------------------------


class Epilogue:
    """How a product kernel binds its buffers and stores its results: by default its output
    (and bias); ``kernels.fused`` gives one that evaluates the elementwise ops recorded after
    the product on each accumulated value, in registers, and stores their results."""

    def declare(self, k: KernelBuilder, dtype: str, has_bias: bool) -> tuple[ir.Buffer, ...]:
        """Declare the kernel's buffers; returns ``a`` and ``b``."""
        self.out = k.buffer("out", dtype, writable=True)
        a, b = k.buffer("a", dtype), k.buffer("b", dtype)
        self.bias = k.buffer("bias", dtype) if has_bias else None
        return a, b

    def multiply(self, a: ir.Expr, b: ir.Expr) -> ir.Expr:
        """What one element of ``a`` and one of ``b``, as loaded, add to a dot product: their
        product (``kernels.quant``'s words of four bytes add their bytes' dot product)."""
        return a * b

    def store(self, k: KernelBuilder, acc: ir.Expr, batch: ir.Expr, row: ir.Expr,
              col: ir.Expr, index: ir.Expr) -> None:
        """Store the value ``acc`` accumulated for output ``(batch, row, col)``, element
        ``index`` of the plain result (without its offset)."""
        value = acc
        if self.bias is not None:
            value = acc + self.bias[(batch % k.info(GROUPS)) * k.info(M) + row]
        k.store(self.out, k.info(OUT_OFF) + index, value)


def _tiles(tiling: Tiling, count: int, m: int, n: int) -> int:
    """The output tiles of ``count`` products of ``m x n`` tiled by ``tiling``."""
    return count * _ceil(m, tiling.tm) * _ceil(n, tiling.tn)


def _runs(tiles: int, k: int, tk: int) -> tuple[int, int]:
    """How a product of ``tiles`` output tiles splits its inner dim ``k``: the number of runs
    and their length (a multiple of ``tk``); one run where the tiles fill the device."""
    runs = max(1, min(_ceil(RUNS_TARGET, tiles), k // MIN_RUN))
    length = _ceil(_ceil(k, runs), tk) * tk
    return _ceil(k, length), length


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


class Partials(Epilogue):
    """Stores the sums of a split product's runs into a buffer of ``dtype`` (float32 for
    half-float operands)."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    def declare(self, k: KernelBuilder, dtype: str, has_bias: bool) -> tuple[ir.Buffer, ...]:
        self.out = k.buffer("out", self.dtype, writable=True)
        self.bias = None
        return k.buffer("a", dtype), k.buffer("b", dtype)


def _in_runs(layout: Layout, tiling: Tiling, a: JitTensor, b: JitTensor,
             out: JitTensor) -> JitTensor:
    """The tiled product (``layout``, tiled by ``tiling``) with its inner dim split into runs
    summed side by side, then added up: a new tensor of ``out``'s shape and dtype."""
    from burnish.jit.kernels.reduce import reduce

    runtime, dtype, shape = a.runtime, a.dtype, out.shape
    total = numel(shape)
    runs, length = _runs(layout.groups, layout.info[K], tiling.tk)
    partial_dtype = get_dtype("float32") if dtype.name in ("float16", "bfloat16") else dtype
    itemsize = runtime.generator.storage_numpy(partial_dtype.name).itemsize
    partial = JitTensor(runtime.pool.alloc(runs * total * itemsize), (runs, total),
                        partial_dtype, a.device, runtime)
    words = list(layout.info)
    words[OUT_OFF] = 0
    words += [length, layout.count]
    runtime.launch(("matmul_runs", tiling, *layout.base),
                   lambda: _tiled_kernel(tiling, *layout.base, split=True,
                                         epilogue=Partials(partial_dtype.name)),
                   [partial.buffer, a.buffer, b.buffer], words, groups=runs * layout.groups)
    summed = reduce("sum", partial, 0)[0]
    if partial_dtype is not dtype:
        summed = elementwise("cast", lambda v, s: v[0].cast(dtype), [summed], dtype)
    return summed.view(shape, contiguous_strides(shape), summed.offset)


def _batch_bases(k: KernelBuilder, index: ir.Expr, ndim: int) -> tuple[ir.Expr, ir.Expr]:
    """The offsets of batch ``index`` (linear over the batch shape) in ``a`` and ``b``."""
    a_base = k.let(k.info(A_OFF), "abase")
    b_base = k.let(k.info(B_OFF), "bbase")
    rest = k.let(index, "rest")
    for d in reversed(range(ndim)):
        size = k.info(BATCH_AT + d)
        coord = k.let(rest % size, "c")
        k.assign(a_base, a_base + coord * k.info(BATCH_AT + ndim + d))
        k.assign(b_base, b_base + coord * k.info(BATCH_AT + 2 * ndim + d))
        if d:
            k.assign(rest, rest / size)
    return a_base, b_base


def _scaled(value: ir.Expr, stride: ir.Expr, unit: bool) -> ir.Expr:
    return value if unit else value * stride


def _element(k: KernelBuilder, index: ir.Expr, ndim: int, layout: tuple[bool, ...]) -> tuple:
    """Output element ``index``'s batch, row and column, and where its row of ``a`` and its
    column of ``b`` start."""
    col = k.let(index % k.info(N), "col")
    rest = k.let(index / k.info(N), "r")
    row = k.let(rest % k.info(M), "row")
    batch = k.let(rest / k.info(M), "batch")
    a_base, b_base = _batch_bases(k, batch, ndim)
    a_at = k.let(a_base + _scaled(row, k.info(A_SM), layout[0]), "a")
    b_at = k.let(b_base + _scaled(col, k.info(B_SN), layout[3]), "b")
    return batch, row, col, a_at, b_at


def _plain_kernel(dtype: str, ndim: int, layout: tuple[bool, ...], has_bias: bool,
                  epilogue: Epilogue | None = None) -> ir.Kernel:
    """One output element per invocation: a dot product over K read through strides."""
    k = KernelBuilder("matmul_plain", (WORKGROUP, 1, 1))
    epilogue = epilogue or Epilogue()
    a, b = epilogue.declare(k, dtype, has_bias)
    ty = ir.compute_type(dtype)
    i = k.global_index()
    with k.if_(i >= k.info(TOTAL)):
        k.return_()
    batch, row, col, a_at, b_at = _element(k, i, ndim, layout)
    acc = k.let(ir.lift(0, ty), "acc")
    with k.for_(0, k.info(K), name="kk") as kk:
        k.assign(acc, acc + epilogue.multiply(a[a_at + _scaled(kk, k.info(A_SK), layout[1])],
                                              b[b_at + _scaled(kk, k.info(B_SK), layout[2])]))
    epilogue.store(k, acc, batch, row, col, i)
    return k.build()


def shared_sum(k: KernelBuilder, shares: ir.Shared, at: ir.Expr, lane: ir.Expr, acc: ir.Var,
               width: int) -> None:
    """Sum ``acc`` over ``width`` consecutive invocations (``lane`` counts them from 0, ``at``
    is this one's slot of the workgroup array ``shares``) by halving steps in workgroup memory:
    lane 0's ``acc`` ends with the sum. Every invocation of the workgroup must call it."""
    k.shared_store(shares, at, acc)
    k.barrier()
    step = width // 2
    while step:
        with k.if_(lane < step):
            k.assign(acc, acc + shares[at + step])
            k.shared_store(shares, at, acc)
        k.barrier()
        step //= 2


def _split_kernel(dtype: str, ndim: int, layout: tuple[bool, ...], has_bias: bool,
                  epilogue: Epilogue | None = None) -> ir.Kernel:
    """``SPLIT_LANES`` invocations per output element, each summing every ``SPLIT_LANES``-th
    term of its dot product, then the shares combined in workgroup memory: for products too
    thin to tile with a long K (a weight gradient of a classifier layer, K being the batch),
    where the plain kernel's few invocations would each walk all of K."""
    k = KernelBuilder("matmul_split", (WORKGROUP, 1, 1))
    epilogue = epilogue or Epilogue()
    a, b = epilogue.declare(k, dtype, has_bias)
    ty = ir.compute_type(dtype)
    t = k.let(k.local_id(0), "t")
    lane = k.let(t % SPLIT_LANES, "lane")
    i = k.let(k.group_index() * (WORKGROUP // SPLIT_LANES) + t / SPLIT_LANES, "i")
    # No early return: every invocation reaches every barrier; those past the end compute the
    # last element again and store nothing.
    e = k.let(ir.select(i < k.info(TOTAL), i, k.info(TOTAL) - 1), "e")
    batch, row, col, a_at, b_at = _element(k, e, ndim, layout)
    acc = k.let(ir.lift(0, ty), "acc")
    with k.for_(lane, k.info(K), SPLIT_LANES, name="kk") as kk:
        k.assign(acc, acc + epilogue.multiply(a[a_at + _scaled(kk, k.info(A_SK), layout[1])],
                                              b[b_at + _scaled(kk, k.info(B_SK), layout[2])]))
    shared_sum(k, k.shared(ty, WORKGROUP), t, lane, acc, SPLIT_LANES)
    with k.if_(lane.eq(0).and_(i < k.info(TOTAL))):
        epilogue.store(k, acc, batch, row, col, e)
    return k.build()


#: Extra words per tile row of workgroup memory for 32-bit types: the column-wise copy of a
#: row-major ``a`` then spreads over the memory banks, and rows stay 16-byte aligned for wide
#: loads (on an H100, 1.2-1.4x faster than one extra word).
PITCH_PAD = 4


def _run_of(tiling: Tiling, count: int) -> int:
    """How many of an invocation's ``count`` rows (or columns) of a tile are neighbours."""
    return tiling.runs if 0 < tiling.runs < count else count


def _read_runs(k: KernelBuilder, tile: ir.Shared, starts: list, regs: list, offset: int,
               run: int) -> None:
    """``regs[i] = tile[starts[i] + offset]``, neighbouring words (runs of ``run``, each
    starting at a multiple of its width, as the tile's 16-byte aligned rows and pitches
    keep them) read four or two at a time."""
    width = 4 if run % 4 == 0 else 2 if run % 2 == 0 else 1
    for i in range(0, len(regs), width):
        if width == 1:
            k.assign(regs[i], tile[starts[i] + offset])
        else:
            k.shared_load_run(tile, starts[i] + offset, regs[i:i + width])


#: How a tiled kernel reads an operand: ``loader(k, base, index)`` is called once per element
#: of the tile copy an invocation makes, with the batch's base offset and the element's fixed
#: row (``a``) or column (``b``); it returns ``read(gk)``, the element's address at inner
#: position ``gk`` and a bool saying whether it holds a value (None: always), beyond the
#: kernel's own row, column and inner bounds. ``read`` is called first (before the inner loop)
#: for the first position the element reads, then once per step (in the loop) for the
#: position ``tk`` further on, so a loader may keep running state instead of dividing at
#: every step. Convolutions read their patches through one.
Loader = Callable[[KernelBuilder, ir.Expr, ir.Expr],
                  Callable[[ir.Expr], tuple[ir.Expr, ir.Expr | None]]]


def _tiled_kernel(tiling: Tiling, dtype: str, ndim: int, layout: tuple[bool, ...],
                  has_bias: bool, epilogue: Epilogue | None = None,
                  loaders: tuple[Loader | None, Loader | None] = (None, None),
                  split: bool = False) -> ir.Kernel:
    """A workgroup per ``tm x tn`` output tile, stepping through K ``tk`` at a time: the
    workgroup copies an ``tm x tk`` tile of ``a`` and a ``tk x tn`` tile of ``b`` into
    workgroup memory (zeros past the edges), then every invocation multiplies them into its
    ``rm x rn`` accumulators, rows ``ty * rm + i`` and columns ``tx * rn + j``: runs of
    neighbouring words, which device compilers merge into wide workgroup-memory loads (on an
    H100 this layout ran up to 1.3x faster than interleaved rows). The next step's tiles are
    fetched into registers before this step's products, so memory latency hides behind
    arithmetic.

    ``loaders`` replace the strided reads of ``a`` and ``b`` (``layout`` then only picks the
    order of the tile copies). With ``split``, the inner dim is split into runs of
    ``info[SPLIT_AT]`` (a multiple of ``tk``) and the batch index counts (run, batch) over
    ``info[SPLIT_AT + 1]`` batches: each workgroup sums one run, stored at its place in
    ``[runs, *batch, M, N]`` for a reduction to add up."""
    tm, tn, tk, rm, rn = tiling.tm, tiling.tn, tiling.tk, tiling.rm, tiling.rn
    threads = tiling.threads
    cols_per = tn // rn  # invocations across a tile's columns
    ty = ir.compute_type(dtype)
    pad = 0 if ty in ("i64", "f64") else PITCH_PAD
    a_pitch, b_pitch = tm + pad, tn + pad
    k = KernelBuilder("matmul_tiled", (threads, 1, 1))
    epilogue = epilogue or Epilogue()
    a, b = epilogue.declare(k, dtype, has_bias)
    a_tile = k.shared(ty, tk * a_pitch)
    b_tile = k.shared(ty, tk * b_pitch)
    # Metadata read once: loop bounds and strides then live in registers.
    m_size, n_size, k_size = (k.let(k.info(w), name) for w, name in
                              ((M, "m"), (N, "n"), (K, "k")))
    a_sm, a_sk, b_sk, b_sn = (k.let(k.info(w), "s") for w in (A_SM, A_SK, B_SK, B_SN))

    t = k.let(k.local_id(0), "t")
    tx = k.let(t % cols_per, "tx")
    ty_ = k.let(t / cols_per, "ty")
    group = k.group_index()
    tile_n = k.let(group % k.info(TILES_N), "tn")
    rest = k.let(group / k.info(TILES_N), "r")
    tile_m = k.let(rest % k.info(TILES_M), "tm")
    stored = k.let(rest / k.info(TILES_M), "batch")  # the batch, or (run, batch) when split
    batch, k_begin, k_end = stored, ir.lift(0, "i32"), k_size
    if split:
        run_length, batches = k.info(SPLIT_AT + 3 * ndim), k.info(SPLIT_AT + 3 * ndim + 1)
        batch = k.let(stored % batches, "b")
        k_begin = k.let((stored / batches) * run_length, "k0")
        k_end = k.let(ir.call("min", k_size, k_begin + run_length), "k1")
    m0 = k.let(tile_m * tm, "m0")
    n0 = k.let(tile_n * tn, "n0")
    a_base, b_base = _batch_bases(k, batch, ndim)

    def strided(index_stride: ir.Expr, k_stride: ir.Expr, index_unit: bool,
                k_unit: bool) -> Loader:
        def loader(k: KernelBuilder, base: ir.Expr, index: ir.Expr):
            at = k.let(base + _scaled(index, index_stride, index_unit), "at")
            return lambda gk: (at + _scaled(gk, k_stride, k_unit), None)
        return loader

    a_loader = loaders[0] or strided(a_sm, a_sk, layout[0], layout[1])
    b_loader = loaders[1] or strided(b_sn, b_sk, layout[3], layout[2])

    # Each invocation's share of the tile copies: fixed positions in the tile, so their
    # addresses and row/column checks are computed once; each step only adds k0.
    loads = []  # (buffer, tile, tile index, read, k in tile, ok)
    for step in range(tm * tk // threads):
        e = t + step * threads
        mm, kk = (e / tk, e % tk) if layout[1] or not layout[0] else (e % tm, e / tm)
        gm = k.let(m0 + mm, "gm")
        loads.append((a, a_tile, k.let(kk * a_pitch + mm, "ai"), a_loader(k, a_base, gm),
                      k.let(kk, "ak"), k.let(gm < m_size, "aok")))
    for step in range(tk * tn // threads):
        e = t + step * threads
        kk, nn = (e / tn, e % tn) if layout[3] or not layout[2] else (e % tk, e / tk)
        gn = k.let(n0 + nn, "gn")
        loads.append((b, b_tile, k.let(kk * b_pitch + nn, "bi"), b_loader(k, b_base, gn),
                      k.let(kk, "bk"), k.let(gn < n_size, "bok")))
    staged = [k.let(ir.lift(0, ty), "g", ty) for _ in loads]

    def fetch(k0: ir.Expr) -> None:
        """The tiles at ``k0`` into registers (zeros past the edges)."""
        for reg, (buf, _, _, read, kk, ok) in zip(staged, loads):
            gk = k.let(k0 + kk, "gk")
            address, valid = read(gk)
            inside = ok.and_(gk < k_end)
            inside = k.let(inside if valid is None else inside.and_(valid), "in")
            k.assign(reg, ir.select(inside, buf[ir.select(inside, address, 0)], 0))

    def spread(index: ir.Expr, count: int, across: int) -> list[ir.Expr]:
        """The ``count`` rows or columns of invocation ``index`` of ``across``."""
        run = _run_of(tiling, count)
        return [index * run + (i // run) * (across * run) + i % run for i in range(count)]

    rows = spread(ty_, rm, tm // rm)
    cols = spread(tx, rn, cols_per)
    acc = [[k.let(ir.lift(0, ty), "acc", ty) for _ in range(rn)] for _ in range(rm)]
    a_regs = [k.let(ir.lift(0, ty), "av", ty) for _ in range(rm)]
    b_regs = [k.let(ir.lift(0, ty), "bv", ty) for _ in range(rn)]
    a_rows = [k.let(r, "ar") for r in rows]
    b_cols = [k.let(c, "bc") for c in cols]

    fetch(k_begin)
    with k.for_(k_begin, k_end, tk, name="k0") as k0:
        for reg, (_, tile, index, *_rest) in zip(staged, loads):
            k.shared_store(tile, index, reg)
        k.barrier()
        fetch(k0 + tk)
        # Unrolled here rather than left to the device compiler: the register block only
        # stays in registers when every index into it is a constant.
        for kk in range(tk):
            _read_runs(k, a_tile, a_rows, a_regs, kk * a_pitch, _run_of(tiling, rm))
            _read_runs(k, b_tile, b_cols, b_regs, kk * b_pitch, _run_of(tiling, rn))
            for i in range(rm):
                for j in range(rn):
                    k.assign(acc[i][j], acc[i][j] + epilogue.multiply(a_regs[i], b_regs[j]))
        k.barrier()

    out_base = k.let(stored * m_size * n_size, "o")
    for i in range(rm):
        row = k.let(m0 + a_rows[i], "row")
        with k.if_(row < m_size):
            for j in range(rn):
                col = k.let(n0 + b_cols[j], "col")
                with k.if_(col < n_size):
                    epilogue.store(k, acc[i][j], batch, row, col, out_base + row * n_size + col)
    return k.build()
