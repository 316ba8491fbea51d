"""Elementwise kernels: one output element per invocation, inputs read through their strides.

``elementwise(op, fn, inputs, out_dtype)`` covers every unary, binary and ternary op (and the
fused runs of ``burnish.fusion`` later): ``fn(values, scalars)`` builds the output expression
from the inputs' loaded values. One kernel is generated per op, dtypes, rank and layout class
(all plain and same-shaped: no index arithmetic at all; otherwise strided, each input marked
whether it is laid out as the output, which then reads it without index arithmetic); shapes,
strides and scalars travel in ``info``, so new shapes never compile anything.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from burnish.dtype import DType
from burnish.jit import ir, lazy
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.reduce import coalesce
from burnish.jit.runtime import grid
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

WORKGROUP = 256
#: The fewest elements a launch computes before its invocations take several elements each.
SEVERAL_FROM = 1 << 20
#: Runtimes whose generator runs invocations as loop iterations (the cpu backend's,
#: ``elementwise_rows``) take a broadcast elementwise op a row at a time: an invocation walks
#: up to ``ROW_CHUNK`` elements of the last (merged) dim, each input's position in the row
#: worked out once, the walk a loop with unit or zero strides that the compiler vectorizes
#: (per element, the general kernel divides out every coordinate of every broadcast input).
#: Rows of at least ``ROW_MIN`` elements; ``ROW_WORKGROUP`` invocations a workgroup.
ROW_CHUNK = 2048
ROW_MIN = 8
ROW_WORKGROUP = 4
_LAZY = lazy.RECORDING
_new = object.__new__


_BROADCAST: dict[tuple, tuple[int, ...]] = {}


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape ``shapes`` broadcast to (they are known to broadcast), remembered."""
    found = _BROADCAST.get(shapes)
    if found is None:
        ndim = max(len(s) for s in shapes)
        out = []
        for d in range(ndim):
            sizes = {s[d - ndim + len(s)] for s in shapes if d - ndim + len(s) >= 0} - {1}
            out.append(sizes.pop() if sizes else 1)
        found = tuple(out)
        if len(_BROADCAST) >= 4096:
            _BROADCAST.clear()
        _BROADCAST[shapes] = found
    return found


def plain(x: JitTensor) -> JitTensor:
    """``x`` itself when plain (row-major, any offset), else a plain copy."""
    if x.is_contiguous():
        return x
    return elementwise("copy", lambda v, s: v[0], [x], x.dtype)


def broadcast_strides(x: JitTensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``x``'s strides seen as ``shape`` (missing leading dims and size-1 dims get stride 0)."""
    lead = len(shape) - x.ndim
    return tuple(0 if d < lead or x.shape[d - lead] == 1 else x.strides[d - lead]
                 for d in range(len(shape)))


_WORD = struct.Struct("<i")
_WORDS = struct.Struct("<ii")
_PACKED = {"f32": (struct.Struct("<f"), _WORD), "f64": (struct.Struct("<d"), _WORDS),
           "i64": (struct.Struct("<q"), _WORDS)}


def scalar_words(value, dtype: DType) -> list[int]:
    """``value`` as the int32 words ``info_scalar`` reads back as ``dtype``'s compute type."""
    ty = ir.compute_type(dtype)
    packed = _PACKED.get(ty)
    if packed is not None:
        try:  # struct rounds as NumPy does; out-of-range values take NumPy's path below
            return list(packed[1].unpack(packed[0].pack(value)))
        except (OverflowError, struct.error):
            pass
    if ty == "f64":
        return np.array([value], dtype=np.float64).view(np.int32).tolist()
    if ty in ("i64", "u32"):  # the bits of int64, uint64 or uint32, wrapped as NumPy casts
        return np.array([value]).astype(dtype.numpy).view(np.int32).tolist()
    if ty == "f32":
        return np.array([value], dtype=np.float32).view(np.int32).tolist()
    if ty == "bool":
        return [1 if value else 0]
    # Narrow ints wrap as NumPy's cast does.
    return [int(np.array([value]).astype(dtype.numpy).astype(np.int64)[0])]


#: struct codes of the compute types whose scalars are one ``struct`` field each.
_FIELDS = {"f32": "f", "f64": "d", "i64": "q", "i32": "i"}


class ScalarPacker:
    """A launch's ``info`` made from fixed leading words, ``head`` words that vary per launch,
    and scalars of fixed dtypes: one ``struct`` pack per launch where every compute type has a
    field code, else ``scalar_words`` per scalar (tiny ops are dominated by such
    bookkeeping)."""

    __slots__ = ("prefix", "dtypes", "packer", "last")

    def __init__(self, prefix: Sequence[int], dtypes: Sequence[DType], head: int = 0):
        self.prefix = np.asarray(prefix, dtype=np.int32).tobytes()
        self.dtypes = tuple(dtypes)
        codes = [_FIELDS.get(ir.compute_type(d)) for d in self.dtypes]
        self.packer = struct.Struct("<" + "i" * head + "".join(codes)) if all(codes) else None
        self.last = None

    def info(self, values: Sequence[object], head: Sequence[int] = ()) -> np.ndarray:
        """The int32 words: the prefix, ``head``, then each value as ``scalar_words`` gives
        it. Words equal to the last call's give the last call's array (not to be changed):
        loops pass the same scalars again and again."""
        if self.packer is not None:
            try:  # struct rounds as NumPy does; out-of-range values take the path below
                data = self.packer.pack(*head, *values)
            except (OverflowError, struct.error):
                pass
            else:
                last = self.last  # (words, array): one read, one write, for threads
                if last is None or last[0] != data:
                    last = self.last = (data, np.frombuffer(self.prefix + data, dtype=np.int32))
                return last[1]
        words = list(head)
        for value, dtype in zip(values, self.dtypes):
            words += scalar_words(value, dtype)
        return np.frombuffer(self.prefix + np.asarray(words, dtype=np.int32).tobytes(),
                             dtype=np.int32)


def info_scalar(k: KernelBuilder, pos, ty: str) -> ir.Expr:
    """The scalar of compute type ``ty`` stored at ``info[pos]`` (two words for 64-bit)."""
    word = k.info(pos)
    if ty == "i32":
        return word
    if ty == "bool":
        return word.ne(0)
    if ty == "f32":
        return word.bitcast("f32")
    if ty == "u32":
        return word.bitcast("u32")
    low = word.bitcast("u32").cast("i64")
    wide = (k.info(ir.lift(pos, "i32") + 1).cast("i64") << 32) | low
    return wide if ty == "i64" else wide.bitcast("f64")


def strided_offset(k: KernelBuilder, index: ir.Expr, ndim: int, shape_at: int,
                   strides_at: ir.Expr | int, offset: ir.Expr) -> ir.Var:
    """The buffer position of element ``index`` (row-major over the shape stored at
    ``info[shape_at:]``) in a tensor whose strides are at ``info[strides_at:]``."""
    pos = k.let(offset, "pos")
    rest = k.let(index, "rest")
    for d in reversed(range(ndim)):
        size = k.info(shape_at + d)
        coord = rest % size if d else rest  # in bounds, the outermost coordinate is the rest
        k.assign(pos, pos + coord * k.info(ir.lift(strides_at, "i32") + d))
        if d:
            k.assign(rest, rest / size)
    return pos


def elements_per_invocation(generator, n: int, reads: Sequence[str]) -> int:
    """How many elements each invocation of an elementwise kernel over ``n`` elements computes
    (a power of two): one, except on the GPUs for large launches (``SEVERAL_FROM``), where
    enough of them to read about 32 bytes (``reads``: the dtypes one element reads, as
    ``generator`` stores them), at most ``generator.elements_per_invocation``. A memory-bound
    kernel reaches the memory's bandwidth only with enough bytes in flight: on an H200, an
    exponential of 64M float32 values takes 209 us with one element per invocation, 132 with
    eight (PyTorch's vectorized kernel: 135); bfloat16, 188 against 77."""
    most = generator.elements_per_invocation
    if most == 1 or n < SEVERAL_FROM:
        return 1
    read_bytes = sum(generator.storage_numpy(name).itemsize for name in reads)
    several = 1
    while several * 2 <= most and several * 2 * read_bytes <= 32:
        several *= 2
    return several


def each_element(k: KernelBuilder, count: ir.Expr, several: int,
                 compute: Callable[[ir.Expr], Any], store: Callable[[ir.Expr, Any], None]) -> None:
    """The body of an elementwise kernel whose invocations take ``several`` elements each
    (``elements_per_invocation``) of ``count``: ``compute(i)`` reads and evaluates element
    ``i``, ``store(i, computed)`` writes it. With several, an invocation's elements are a
    workgroup apart (each of its loads is coalesced with its neighbours'), all are read before
    any is stored (so their loads are in flight together), and those past the end read the last
    element instead and store nothing."""
    if several == 1:
        i = k.global_index()
        with k.if_(i >= count):
            k.return_()
        store(i, compute(i))
        return
    first = k.let(k.group_index() * (WORKGROUP * several) + k.local_id(0), "gid")
    last = k.let(count - 1, "last")
    computed = []
    for j in range(several):
        i = k.let(first + j * WORKGROUP, "gid")
        value = compute(k.let(ir.select(i < count, i, last), "at"))
        if isinstance(value, ir.Expr):
            value = k.let(value, "r")
        computed.append((i, value))
    for i, value in computed:
        with k.if_(i < count):
            store(i, value)


class _Plan:
    """What one call signature of ``elementwise`` always computes the same: the kernel's cache
    key and builder, the launch's metadata and grid, the output's size. Tiny ops are dominated
    by this bookkeeping, so it is done once per signature."""

    __slots__ = ("key", "build", "info", "groups", "shape", "strides", "n", "packer",
                 "runtime", "compiled", "out_nbytes")
    key: tuple
    build: Any
    info: Any
    groups: Any
    shape: tuple[int, ...]
    strides: Any
    n: int
    packer: Any
    runtime: Any
    compiled: Any
    out_nbytes: int


_PLANS: dict[tuple, _Plan] = {}
_PLAN_LIMIT = 8192


def elementwise(op: str, fn: Callable[[list[ir.Expr], list[ir.Expr]], ir.Expr],
                inputs: Sequence[JitTensor], out_dtype: DType,
                scalars: Sequence[tuple[object, DType]] = (),
                shape: tuple[int, ...] | None = None, out: JitTensor | None = None) -> JitTensor:
    """``out[i] = fn([x[i] for x in inputs], scalars)`` with the inputs broadcast to ``shape``
    (their broadcast shape when not given); ``fn(values, scalars, builder)`` when
    ``fn.uses_builder`` is true, for bodies with loops or variables. ``out``, when given, is
    written instead of a new tensor: a plain tensor of ``shape`` that is not one of ``inputs``
    (WebGPU forbids binding a buffer for writing and reading at once). With no inputs, ``out``
    and ``shape`` are needed. ``op`` names what ``fn`` computes: calls with one ``op`` share
    one kernel per dtypes and layout class."""
    first = inputs[0] if inputs else out
    runtime = first.runtime
    if out is None and _LAZY.depth:  # lazy.recording(), without the call: this runs per op
        if shape is None:
            shape = first.shape
            for x in inputs:
                if x.shape != shape:
                    shape = broadcast_shape(*[x.shape for x in inputs])
                    break
        if numel(shape):
            pending = lazy.record(op, fn, inputs, out_dtype, scalars, tuple(shape), runtime,
                                  first.device)
            if pending is not None:  # None: predicted to flush alone, so it runs now
                return pending
    # The generator is part of it: storage sizes differ by language (bfloat16 is 4 bytes in WGSL).
    # Built with plain loops (a comprehension is a function call in Python 3.11): this runs on
    # every op. The most frequent form, two inputs and no scalars (arithmetic, comparisons),
    # builds the same tuple in one step.
    pair = out is None and not scalars and len(inputs) == 2
    if pair:
        x, y = inputs
        signature = (runtime.generator, op, out_dtype, shape, 0, 0, x.dtype, x.shape, x.strides,
                     x.offset, y.dtype, y.shape, y.strides, y.offset)
    else:
        signature = [runtime.generator, op, out_dtype, shape,
                     out.offset if out is not None else 0, len(scalars)]
        for value in scalars:
            signature.append(value[1])
        for x in inputs:
            signature += (x.dtype, x.shape, x.strides, x.offset)
        signature = tuple(signature)
    plan = _PLANS.get(signature)
    if plan is None:
        plan = _plan(op, fn, inputs, out_dtype, scalars, shape, out, runtime)
        if len(_PLANS) >= _PLAN_LIMIT:
            _PLANS.clear()
        _PLANS[signature] = plan
    if out is None:
        # JitTensor(buffer, plan.shape, out_dtype, device, runtime, plan.strides), without the
        # call of its __init__ (the plan's shape and strides are tuples already).
        out = _new(JitTensor)
        out.buffer, out.shape, out.strides, out.offset = (runtime.pool.alloc(plan.out_nbytes),
                                                          plan.shape, plan.strides, 0)
        out.dtype, out.device, out.runtime = out_dtype, first.device, runtime
    if plan.n == 0:
        return out
    info = plan.info
    if scalars:
        info = plan.packer.info([value for value, _ in scalars])
    if plan.runtime is not runtime:
        plan.compiled = runtime.kernel(plan.key, plan.build)[0]
        plan.runtime = runtime
    if pair:
        handles = [out.buffer.handle, x.buffer.handle, y.buffer.handle]
    else:
        handles = [out.buffer.handle]
        for x in inputs:
            handles.append(x.buffer.handle)
    runtime.dispatch(plan.compiled, handles, info, plan.groups)
    return out


def _plan(op, fn, inputs, out_dtype, scalars, shape, out, runtime) -> _Plan:
    if shape is None:
        shapes = {x.shape for x in inputs}
        shape = shapes.pop() if len(shapes) == 1 else broadcast_shape(*shapes)
    shape = tuple(shape)
    n = numel(shape)
    plan = _Plan()
    plan.shape, plan.n, plan.runtime, plan.compiled = shape, n, None, None
    plan.strides = contiguous_strides(shape)
    plan.out_nbytes = n * runtime.generator.storage_numpy(out_dtype.name).itemsize
    out_offset = out.offset if out is not None else 0
    flat = all(x.shape == shape and x.is_contiguous() for x in inputs) and out_offset == 0
    if not flat:
        # Size-1 dims dropped and neighbours every input walks as one merged: fewer divisions
        # per element (a [N, C, H, W] by [1, C, 1, 1] product indexes as [N, C, H * W]).
        dims, layouts = coalesce(shape, *[broadcast_strides(x, shape) for x in inputs])
    ndim = 0 if flat else len(dims)
    in_dtypes = tuple(x.dtype.name for x in inputs)
    scalar_types = tuple(ir.compute_type(d) for _, d in scalars)
    # Inputs laid out as the output (contiguous over ``dims``) index as it does, without
    # dividing out coordinates: a [N, C] by [C] product divides for the [C] side only.
    plain = () if flat else tuple(tuple(strides) == contiguous_strides(tuple(dims))
                                  for strides in layouts)
    several = elements_per_invocation(runtime.generator, n, in_dtypes)
    rows = (not flat and ndim >= 2 and dims[-1] >= ROW_MIN
            and getattr(runtime.generator, "elementwise_rows", False))
    # In rows, each input's last stride as the walk takes it: 0, 1, or read from the info.
    inner = tuple(strides[-1] if strides[-1] in (0, 1) else 2 for strides in layouts) \
        if rows else ()
    plan.key = ("elementwise", op, in_dtypes, out_dtype.name, scalar_types,
                "flat" if flat else (ndim, plain, inner, ROW_CHUNK) if rows else (ndim, plain),
                several)

    info: list[int] = [n]
    if flat:
        info += [x.offset for x in inputs]
    else:
        info += dims
        for x, strides in zip(inputs, layouts):
            info.append(x.offset)
            info += strides
    if rows:
        cols = dims[-1]
        chunks = -(-cols // ROW_CHUNK)
        invocations = n // cols * chunks
        info += [invocations, chunks]
    scalar_at = len(info)
    # With scalars, each launch packs its own (``packer``); ``info`` serves launches without.
    plan.packer = ScalarPacker(info, [d for _, d in scalars])
    plan.info = np.asarray(info, dtype=np.int32)
    plan.info.flags.writeable = False  # launches may keep it by identity (cuda does)
    plan.groups = (grid(-(-max(invocations, 1) // ROW_WORKGROUP)) if rows
                   else grid(-(-max(n, 1) // (WORKGROUP * several))))

    def scalar_values_of(k: KernelBuilder) -> list[ir.Expr]:
        at, found = scalar_at, []
        for ty in scalar_types:
            found.append(info_scalar(k, at, ty))
            at += 2 if ty in ("i64", "f64") else 1
        return found

    def apply(values: list[ir.Expr], scalar_values: list[ir.Expr], k: KernelBuilder) -> Any:
        if getattr(fn, "uses_builder", False):
            return fn(values, scalar_values, k)
        return fn(values, scalar_values)

    def build_rows() -> ir.Kernel:
        """An invocation per chunk of a row of the last dim: each input's start in the row
        once, then a loop over the chunk."""
        k = KernelBuilder(f"ew_{op}", (ROW_WORKGROUP, 1, 1))
        out_buf = k.buffer("out", out_dtype, writable=True)
        bufs = [k.buffer("in", d) for d in in_dtypes]
        g = k.global_index()
        with k.if_(g >= k.info(scalar_at - 2)):
            k.return_()
        chunks, cols = k.info(scalar_at - 1), k.info(ndim)
        row = k.let(g / chunks, "row")
        start = k.let((g % chunks) * ROW_CHUNK, "c0")
        stop = k.let(ir.select(start + ROW_CHUNK < cols, start + ROW_CHUNK, cols), "c1")
        out_base = k.let(row * cols, "o")
        bases = []
        for j in range(len(bufs)):
            at = 1 + ndim + j * (ndim + 1)
            if plain[j]:
                bases.append(k.let(out_base + k.info(at), "b"))
            else:
                bases.append(strided_offset(k, row, ndim - 1, 1, at + 1, k.info(at)))
        scalar_values = scalar_values_of(k)
        with k.for_(start, stop, name="c") as c:
            values = []
            for j, buf in enumerate(bufs):
                at = 1 + ndim + j * (ndim + 1)
                step = inner[j]  # 1 for a plain input
                if step == 0:
                    values.append(buf[bases[j]])
                elif step == 1:
                    values.append(buf[bases[j] + c])
                else:
                    values.append(buf[bases[j] + c * k.info(at + ndim)])
            k.store(out_buf, out_base + c, apply(values, scalar_values, k))
        return k.build()

    def build() -> ir.Kernel:
        k = KernelBuilder(f"ew_{op}", (WORKGROUP, 1, 1))
        out_buf = k.buffer("out", out_dtype, writable=True)
        bufs = [k.buffer("in", d) for d in in_dtypes]

        def compute(i):
            values = []
            for j, buf in enumerate(bufs):
                at = 1 + ndim + j * (ndim + 1)
                if flat:
                    values.append(buf[i + k.info(1 + j)])
                elif plain[j]:
                    values.append(buf[i + k.info(at)])
                else:
                    pos = strided_offset(k, i, ndim, 1, at + 1, k.info(at))
                    values.append(buf[pos])
            return apply(values, scalar_values_of(k), k)

        each_element(k, k.info(0), several, compute,
                     lambda i, result: k.store(out_buf, i, result))
        return k.build()

    plan.build = build_rows if rows else build
    return plan
