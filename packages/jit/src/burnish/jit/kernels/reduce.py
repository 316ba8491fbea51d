"""Reductions (sum, prod, mean, max, min, any, all, and the arg forms) over one dim or every
element, read straight through the input's strides.

The input is seen as *kept* dims (one output element each) and *reduced* dims, both coalesced
on the host (size-1 dims dropped, neighbours that the strides walk as one merged), so a plain
tensor reduced over any dim has at most two kept dims and one reduced dim, and views (permuted,
sliced, flipped, broadcast) need no copy. Two strategies:

- ``loop``: one invocation per output element walks the reduced dim: best for many outputs,
  and for strided reduced runs (column sums), whose neighbouring outputs neighbouring
  invocations then read side by side. Where outputs are too few to fill the device, the
  reduced dim is split into chunks, an invocation per output and chunk, and a second pass
  combines the chunks' states.
- ``tree``: one workgroup per output element (or per chunk of one), each invocation folds a
  strided share of the reduced dim and the workgroup combines the shares in workgroup memory:
  best for few outputs with long reduced dims. When there are too few outputs to fill the
  device, the reduced dim is split into chunks whose partial results (in the accumulation
  type, with int32 positions for the arg forms) a second ``tree`` pass combines.

``burnish.jit.autotune`` times both once per op, dtype, layout class and shape class; with
tuning off, the heuristic in ``_default_strategy`` picks. Half floats accumulate in float32 and
round once at the end; ints accumulate in their compute type and wrap to their dtype at the
store, which is what accumulating in the dtype itself gives.
"""

from __future__ import annotations

from collections.abc import Sequence

from burnish.dtype import DType, bool_, get_dtype, int64
from burnish.jit import autotune, ir, lazy
from burnish.jit.builder import KernelBuilder
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

#: Invocations per workgroup of both strategies.
WORKGROUP = 256
#: The tree strategy splits a reduced dim into chunks until about this many workgroups run.
TARGET_GROUPS = 1024
#: ... and gives every invocation at least this many elements of a chunk.
MIN_PER_INVOCATION = 4
#: The loop strategy splits a reduced dim into chunks until about this many invocations run...
LOOP_TARGET = 1 << 16
#: ... each walking at least this many elements.
LOOP_MIN_CHUNK = 64
#: The most loop iterations one invocation makes: Mesa's llvmpipe (lavapipe, the software
#: Vulkan that wgpu runs on in CI) silently ends an invocation's loops after 65535 iterations
#: counted together, so longer walks are split between invocations on every device.
MAX_ITERATIONS = 1 << 15

#: op -> (kind of accumulation, whether positions are tracked)
_OPS = {
    "sum": "sum", "mean": "sum", "prod": "prod", "max": "max", "min": "min",
    "any": "any", "all": "all",
    "argmax": "argmax", "argmin": "argmin",
    "max_with_indices": "argmax", "min_with_indices": "argmin",
}

_TYPE_DTYPE = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64",
               "u32": "uint32"}


# -- layouts ------------------------------------------------------------------------------------


def coalesce(shape: Sequence[int], *strides: Sequence[int]) -> tuple[list[int], list[list[int]]]:
    """``shape`` without its size-1 dims and with neighbouring dims merged where every one of
    ``strides`` walks them as one dim; returns the new shape and each stride list for it.
    Row-major enumeration of the result visits elements in the original row-major order."""
    dims: list[tuple[int, list[int]]] = []
    for d, size in enumerate(shape):
        if size == 1:
            continue
        st = [s[d] for s in strides]
        if dims:
            prev_size, prev_st = dims[-1]
            if all(p == s * size for p, s in zip(prev_st, st)):
                dims[-1] = (prev_size * size, st)
                continue
        dims.append((size, st))
    return [n for n, _ in dims], [[st[i] for _, st in dims] for i in range(len(strides))]


def strided_offsets(k: KernelBuilder, index: ir.Expr, ndim: int, shape_at: int,
                    strides_at: Sequence[int], bases: Sequence[ir.Expr]) -> list[ir.Var]:
    """The positions of row-major element ``index`` of the shape at ``info[shape_at:]`` in
    several tensors at once: tensor ``t`` starts at ``bases[t]`` with strides at
    ``info[strides_at[t]:]``."""
    positions = [k.let(base, "pos") for base in bases]
    if ndim == 0:
        return positions
    rest = k.let(index, "rest")
    for d in reversed(range(ndim)):
        size = k.info(shape_at + d)
        coord = k.let(rest % size, "c") if d else rest
        for pos, at in zip(positions, strides_at):
            k.assign(pos, pos + coord * k.info(at + d))
        if d:
            k.assign(rest, rest / size)
    return positions


# -- what each op accumulates ------------------------------------------------------------------


def nan_max(a: ir.Expr, b: ir.Expr, larger: bool) -> ir.Expr:
    """The larger (or smaller) of ``a`` and ``b``; NaN wins for floats."""
    pick = (a > b) if larger else (a < b)
    if not ir.is_float(a.ty):
        return ir.select(pick, a, b)
    return ir.select(ir.call("isnan", a).or_(pick), a, b)


def _extreme(ty: str, largest: bool) -> float | int:
    if ir.is_float(ty):
        return float("inf") if largest else float("-inf")
    if ty == "u32":
        return (1 << 32) - 1 if largest else 0
    bits = 64 if ty == "i64" else 32
    return (1 << (bits - 1)) - 1 if largest else -(1 << (bits - 1))


class _Accumulator:
    """How one op folds elements: the state's types, its start, and combining it with another
    state (an element is a state of one)."""

    def __init__(self, op: str, in_ty: str):
        self.op = op
        self.kind = _OPS[op]
        self.in_ty = in_ty
        if self.kind in ("any", "all"):
            self.types = ("i32",)
        elif self.kind in ("argmax", "argmin"):
            self.types = (in_ty, "i32")
        else:
            self.types = (in_ty,)

    @property
    def tracks_positions(self) -> bool:
        return self.kind in ("argmax", "argmin")

    def start(self, k: KernelBuilder) -> list[ir.Var]:
        ty = self.types[0]
        value = {"sum": 0, "prod": 1, "any": 0, "all": 1, "argmax": 0, "argmin": 0,
                 "max": _extreme(ty, False), "min": _extreme(ty, True)}[self.kind]
        state = [k.let(ir.const(value, ty), "acc")]
        if self.tracks_positions:
            state.append(k.let(-1, "at"))
        return state

    def element(self, value: ir.Expr, position: ir.Expr) -> list[ir.Expr]:
        """An input element (as loaded) as a state."""
        if self.kind in ("any", "all") and value.ty != "i32":
            value = ir.select(value.cast("bool"), 1, 0, "i32")
        return [value, position] if self.tracks_positions else [value]

    def combine(self, k: KernelBuilder, state: list[ir.Var], other: list[ir.Expr]) -> None:
        acc, value = state[0], other[0]
        kind = self.kind
        if kind == "sum":
            k.assign(acc, acc + value)
        elif kind == "prod":
            k.assign(acc, acc * value)
        elif kind in ("max", "min"):
            k.assign(acc, nan_max(acc, value, kind == "max"))
        elif kind == "any":
            k.assign(acc, ir.call("max", acc, value))
        elif kind == "all":
            k.assign(acc, ir.call("min", acc, value))
        else:
            at, position = state[1], other[1]
            with k.if_(_better(value, position, acc, at, kind == "argmax")):
                k.assign(acc, value)
                k.assign(at, position)


def _better(w: ir.Expr, j: ir.Expr, v: ir.Expr, i: ir.Expr, largest: bool) -> ir.Expr:
    """Whether element ``w`` at position ``j`` beats the current ``v`` at ``i`` (``i < 0``: no
    element yet): larger (smaller), NaN beats everything, and the first position wins ties."""
    earlier = j < i
    wins = (w > v) if largest else (w < v)
    if ir.is_float(w.ty):
        w_nan, v_nan = ir.call("isnan", w), ir.call("isnan", v)
        rule = w_nan.and_(v_nan.not_().or_(earlier)).or_(
            w_nan.not_().and_(v_nan.not_()).and_(wins.or_(w.eq(v).and_(earlier))))
    else:
        rule = wins.or_(w.eq(v).and_(earlier))
    return (j >= 0).and_((i < 0).or_(rule))


# -- the kernels --------------------------------------------------------------------------------
# info: [outputs, reduced count, chunks, chunk length, mean count, input offset,
#        kept shape (n_kept), kept strides (n_kept), reduced shape (n_red), reduced strides (n_red)]

_HEADER = 6


class Source:
    """Where a reduction kernel's elements come from: by default its input buffer; ``kernels.
    fused`` gives one that computes each element from the elementwise ops recorded before the
    reduction instead (a prologue: the input is never stored)."""

    def declare(self, k: KernelBuilder, dtype: str) -> None:
        """Declare the buffers read (after the outputs)."""
        self.x = k.buffer("x", dtype)

    def load(self, k: KernelBuilder, position: ir.Expr) -> ir.Expr:
        """The input's element at ``position`` (its offset included)."""
        return self.x[position]


def _build(op: str, in_dtype: str, out_dtypes: tuple[str, ...], n_kept: int, n_red: int,
           strategy: str, stage: str, source: Source | None = None) -> ir.Kernel:
    """``stage``: ``final`` writes the op's results, ``partial`` writes accumulator states per
    chunk, ``combine`` reads such states (values, then int32 positions) and writes results."""
    acc = _Accumulator(op, ir.compute_type(in_dtype))
    k = KernelBuilder(f"reduce_{op}_{strategy}", (WORKGROUP, 1, 1))
    outs = [k.buffer("out", d, writable=True) for d in out_dtypes]
    source = source or Source()
    source.declare(k, in_dtype)
    src_positions = k.buffer("at", "int32") if stage == "combine" and acc.tracks_positions \
        else None
    kept_shape, kept_strides = _HEADER, _HEADER + n_kept
    red_shape, red_strides = _HEADER + 2 * n_kept, _HEADER + 2 * n_kept + n_red

    def element_at(base: ir.Expr, j: ir.Expr) -> list[ir.Expr]:
        if n_red == 0:
            pos = base
        elif n_red == 1:
            pos = base + j * k.info(red_strides)
        else:
            pos = strided_offsets(k, j, n_red, red_shape, [red_strides], [base])[0]
        position = src_positions[pos] if src_positions is not None else j
        return acc.element(source.load(k, pos), position)

    if strategy == "loop" and stage == "partial":
        # An invocation per (output, chunk), neighbouring invocations on neighbouring outputs.
        i = k.global_index()
        with k.if_(i >= k.info(0) * k.info(2)):
            k.return_()
        o = k.let(i % k.info(0), "o")
        c = k.let(i / k.info(0), "c")
        start = k.let(c * k.info(3), "start")
        stop = k.let(ir.call("min", start + k.info(3), k.info(1)), "stop")
        base = strided_offsets(k, o, n_kept, kept_shape, [kept_strides], [k.info(5)])[0]
        state = acc.start(k)
        with k.for_(start, stop, name="j") as j:
            acc.combine(k, state, element_at(base, j))
        _store(k, acc, stage, outs, o * k.info(2) + c, state)
        return k.build()
    if strategy == "loop":
        o = k.global_index()
        with k.if_(o >= k.info(0)):
            k.return_()
        base = strided_offsets(k, o, n_kept, kept_shape, [kept_strides], [k.info(5)])[0]
        state = acc.start(k)
        with k.for_(0, k.info(1), name="j") as j:
            acc.combine(k, state, element_at(base, j))
        _store(k, acc, stage, outs, o, state)
        return k.build()

    # tree: no early return, so every invocation reaches every barrier.
    shared = [k.shared(ty, WORKGROUP) for ty in acc.types]
    t = k.local_id(0)
    g = k.group_index()
    chunks = k.info(2)
    total = k.let(k.info(0) * chunks, "total")
    gc = k.let(ir.select(g < total, g, total - 1), "g")
    o = k.let(gc / chunks, "o")
    start = k.let((gc % chunks) * k.info(3), "start")
    stop = k.let(ir.call("min", start + k.info(3), k.info(1)), "stop")
    base = strided_offsets(k, o, n_kept, kept_shape, [kept_strides], [k.info(5)])[0]
    state = acc.start(k)
    with k.for_(start + t, stop, WORKGROUP, name="j") as j:
        acc.combine(k, state, element_at(base, j))
    for arr, var in zip(shared, state):
        k.shared_store(arr, t, var)
    k.barrier()
    step = WORKGROUP // 2
    while step:
        with k.if_(t < step):
            acc.combine(k, state, [arr[t + step] for arr in shared])
            for arr, var in zip(shared, state):
                k.shared_store(arr, t, var)
        k.barrier()
        step //= 2
    with k.if_(t.eq(0).and_(g < total)):
        _store(k, acc, stage, outs, g, state)
    return k.build()


def _store(k: KernelBuilder, acc: _Accumulator, stage: str, outs: list[ir.Buffer],
           at: ir.Expr, state: list[ir.Var]) -> None:
    if stage == "partial":
        for buf, var in zip(outs, state):
            k.store(buf, at, var)
        return
    value = state[0]
    if acc.op == "mean":
        count = k.info(4)
        nan = ir.const(float("nan"), value.ty)
        value = ir.select(count.eq(0), nan, value / count.cast(value.ty))
    elif acc.kind in ("any", "all"):
        value = value.ne(0)
    if acc.op in ("argmax", "argmin"):
        k.store(outs[0], at, state[1].cast("i64"))
    elif acc.tracks_positions:
        k.store(outs[0], at, value)
        k.store(outs[1], at, state[1].cast("i64"))
    else:
        k.store(outs[0], at, value)


# -- launching ----------------------------------------------------------------------------------


def _out_dtypes(op: str, dtype: DType) -> tuple[DType, ...]:
    if op in ("any", "all"):
        return (bool_,)
    if op in ("argmax", "argmin"):
        return (int64,)
    if op in ("max_with_indices", "min_with_indices"):
        return (dtype, int64)
    return (dtype,)


def _launch(op: str, src: JitTensor, extra: JitTensor | None, outs: Sequence[JitTensor],
            kept: tuple[list[int], list[int]], red: tuple[list[int], list[int]],
            n_out: int, n_red: int, count: int, strategy: str, stage: str,
            chunks: int = 1, chunk: int = 0) -> tuple:
    """One launch of a reduction kernel; returns ``Runtime.launch``'s (compiled kernel,
    metadata, grid)."""
    runtime = src.runtime
    out_names = tuple(o.dtype.name for o in outs)
    key = ("reduce", op, src.dtype.name, out_names, len(kept[0]), len(red[0]), strategy, stage)
    info = [n_out, n_red, chunks, chunk or n_red, count, src.offset,
            *kept[0], *kept[1], *red[0], *red[1]]

    def build() -> ir.Kernel:
        return _build(op, src.dtype.name, out_names, len(kept[0]), len(red[0]), strategy, stage)

    buffers = [o.buffer for o in outs] + [src.buffer] + ([extra.buffer] if extra else [])
    if strategy == "loop":
        return runtime.launch(key, build, buffers, info, invocations=n_out * chunks)
    return runtime.launch(key, build, buffers, info, groups=n_out * chunks)


def _alloc(like: JitTensor, shape: tuple[int, ...], dtype: DType) -> JitTensor:
    runtime = like.runtime
    itemsize = runtime.generator.storage_numpy(dtype.name).itemsize
    return JitTensor(runtime.pool.alloc(max(numel(shape), 1) * itemsize), shape, dtype,
                     like.device, runtime)


def _run(op: str, x: JitTensor, out_shape: tuple[int, ...], kept, red, n_out: int, n_red: int,
         strategy: str, plan_as: tuple | None = None) -> list[JitTensor]:
    """Computes the reduction; with ``plan_as``, a reduction done in one launch is remembered
    under that signature, to be launched again without the planning (``_replay``)."""
    outs = [_alloc(x, out_shape, d) for d in _out_dtypes(op, x.dtype)]
    loop_chunks = _loop_chunks(n_out, n_red, _unit(red)) if strategy == "loop" else 1
    if loop_chunks > 1:
        return _run_chunked_loop(op, x, outs, kept, red, n_out, n_red, loop_chunks)
    single = strategy == "loop" and n_red <= MAX_ITERATIONS
    if single or _chunks(n_out, n_red) == 1:
        launched = _launch(op, x, None, outs, kept, red, n_out, n_red, n_red,
                           "loop" if single else "tree", "final")
        if plan_as is not None:
            launched[1].flags.writeable = False  # launches may keep it by identity (cuda does)
            if len(_PLANS) >= _PLAN_LIMIT:
                _PLANS.clear()
            _PLANS[plan_as] = (x.runtime, out_shape, [(o.dtype, o.buffer.nbytes) for o in outs],
                               *launched)
        return outs
    chunks = _chunks(n_out, n_red)
    # Two passes: per-chunk states, then one workgroup per output combines its chunks.
    acc = _Accumulator(op, ir.compute_type(x.dtype))
    chunk = -(-n_red // chunks)
    chunks = -(-n_red // chunk)
    partials = [_alloc(x, (n_out, chunks), get_dtype(_TYPE_DTYPE[ty])) for ty in acc.types]
    _launch(op, x, None, partials, kept, red, n_out, n_red, n_red, "tree", "partial",
            chunks, chunk)
    kept2 = ([n_out], [chunks]) if n_out > 1 else ([], [])
    red2 = ([chunks], [1])
    extra = partials[1] if acc.tracks_positions else None
    _launch(op, partials[0], extra, outs, kept2, red2, n_out, chunks, n_red, "tree", "combine")
    return outs


def _run_chunked_loop(op: str, x: JitTensor, outs: list[JitTensor], kept, red, n_out: int,
                      n_red: int, chunks: int) -> list[JitTensor]:
    """The loop strategy in two passes: per (output, chunk) states for about ``chunks``
    chunks, then per output their combination."""
    acc = _Accumulator(op, ir.compute_type(x.dtype))
    chunk = -(-n_red // chunks)
    chunks = -(-n_red // chunk)
    partials = [_alloc(x, (n_out, chunks), get_dtype(_TYPE_DTYPE[ty])) for ty in acc.types]
    _launch(op, x, None, partials, kept, red, n_out, n_red, n_red, "loop", "partial", chunks,
            chunk)
    kept2 = ([n_out], [chunks]) if n_out > 1 else ([], [])
    red2 = ([chunks], [1])
    extra = partials[1] if acc.tracks_positions else None
    strategy = _default_strategy(n_out, chunks, unit=True)
    _launch(op, partials[0], extra, outs, kept2, red2, n_out, chunks, n_red, strategy,
            "combine")
    return outs


def _loop_chunks(n_out: int, n_red: int, unit: bool) -> int:
    """How many chunks the loop strategy splits each reduced run into (1: none). Only strided
    runs are split (``unit``: a contiguous one, which a workgroup per output reads best, keeps
    one pass where the loop is chosen anyway, as autotuning may for short runs)."""
    if unit or n_out >= LOOP_TARGET or n_red < 2 * LOOP_MIN_CHUNK:
        return -(-n_red // MAX_ITERATIONS)
    wanted = min(-(-LOOP_TARGET // n_out), n_red // LOOP_MIN_CHUNK)
    return max(1, wanted, -(-n_red // MAX_ITERATIONS))


def _chunks(n_out: int, n_red: int) -> int:
    """How many chunks the tree strategy splits each reduced run into."""
    fewest = -(-n_red // (WORKGROUP * MAX_ITERATIONS))
    if n_out >= TARGET_GROUPS:
        return fewest
    most = max(1, n_red // (WORKGROUP * MIN_PER_INVOCATION))
    wanted = min(most, -(-TARGET_GROUPS // n_out), WORKGROUP * MIN_PER_INVOCATION)
    return max(1, fewest, wanted)


def _default_strategy(n_out: int, n_red: int, unit: bool = False) -> str:
    """Without timings: the loads of a warp should fall side by side. Where the reduced run is
    contiguous (``unit``: a full reduction, the rows of a LayerNorm or a softmax) a workgroup
    per output, whose invocations share out its run (an invocation per output would have each
    read its own row, every load of a warp touching as many cache lines as it has
    invocations); where it is strided (column sums: bias gradients) an invocation per output,
    neighbours reading neighbouring columns, the run split into chunks where outputs are too
    few to fill a device. Short contiguous runs: an invocation per output."""
    if n_red > MAX_ITERATIONS or unit and n_red >= 64:
        return "tree"
    return "loop"


def _unit(red: tuple) -> bool:
    """Whether the reduced dims (``_split_dims``'s ``red``) end in a unit-stride run."""
    return bool(red[1]) and red[1][-1] == 1


def reduce(op: str, x: JitTensor, dim: int | None, strategy: str | None = None
           ) -> list[JitTensor]:
    """``op`` of ``x`` over ``dim`` (``None``: every element, a 0-d result; an int: that dim,
    kept with size 1). Returns the op's outputs: one tensor, or values and int64 positions for
    ``max_with_indices``/``min_with_indices``. ``strategy`` (``loop`` or ``tree``) overrides
    the tuned choice (reduced runs longer than ``MAX_ITERATIONS`` always take ``tree``). While
    ``burnish.fusion`` records, a reduction of a pending input (one that ``SINGLE`` names) is
    recorded instead, to read the ops that make its input in its kernel (on runtimes whose
    reductions share runs among a workgroup: a fused reduction folds each result in one)."""
    if op not in _OPS:
        raise ValueError(f"unknown reduction {op!r}")
    if (type(x) is lazy.LazyTensor and x.node is not None and lazy.RECORDING.depth
            and x.stream is x.runtime.lazy_stream and strategy is None and op in SINGLE
            and x.numel and x.runtime.workgroup_reductions):
        fn = _recorded(op, dim)
        pending = lazy.record(fn.name, fn, (x,), _out_dtypes(op, x.dtype)[0], (),
                              out_shape_of(x.shape, dim), x.runtime, x.device)
        if pending is not None:  # None: predicted to be flushed alone, so it runs now
            return [pending]
    signature = (x.runtime.generator, op, x.dtype, x.shape, x.strides, x.offset, dim, strategy)
    plan = _PLANS.get(signature)
    if plan is not None and plan[0] is x.runtime:
        return _replay(plan, x)
    out_shape, kept, red, n_out, n_red = _split_dims(x.shape, x.strides, dim)
    if n_out == 0:
        return [_alloc(x, out_shape, d) for d in _out_dtypes(op, x.dtype)]
    # The plan may skip the tuned choice from then on: only once it is final (given, forced by
    # the size, or left to a tuner that times or remembers).
    final = strategy is not None or n_red <= 1 or n_red > MAX_ITERATIONS or autotune.enabled()
    if strategy is None:
        strategy = _choose(op, x, out_shape, kept, red, n_out, n_red)
    return _run(op, x, out_shape, kept, red, n_out, n_red, strategy,
                signature if final else None)


def out_shape_of(shape: tuple[int, ...], dim: int | None) -> tuple[int, ...]:
    """A reduction's result shape: 0-d over every element, else ``dim`` kept with size 1."""
    return () if dim is None else shape[:dim] + (1,) + shape[dim + 1:]


def _split_dims(shape: tuple[int, ...], strides: tuple[int, ...], dim: int | None) -> tuple:
    """A reduction's result shape, its kept and reduced dims (coalesced shapes and strides),
    and the result's and each reduced run's element counts."""
    out_shape = out_shape_of(shape, dim)
    if dim is None:
        kept: tuple[list[int], list[int]] = ([], [])
        red_dims, red_strides = shape, strides
    else:
        kept_dims = [d for d in range(len(shape)) if d != dim]
        kept_shape, (kept_strides,) = coalesce([shape[d] for d in kept_dims],
                                               [strides[d] for d in kept_dims])
        kept = (kept_shape, kept_strides)
        red_dims, red_strides = (shape[dim],), (strides[dim],)
    n_out, n_red = numel(out_shape), numel(red_dims)
    red: tuple[list[int], list[int]] = ([], [])
    if n_red:
        red_shape, (strides_of_red,) = coalesce(red_dims, red_strides)
        red = (red_shape, strides_of_red)
    return out_shape, kept, red, n_out, n_red


# -- reductions under fusion ---------------------------------------------------------------------

#: The reductions that give one tensor: those ``burnish.fusion`` records.
SINGLE = frozenset({"sum", "mean", "prod", "max", "min", "any", "all", "argmax", "argmin"})
#: Elements per result beyond which a recorded reduction does not take its prologue into its
#: kernel (one workgroup folds each result there): the prologue is stored by a kernel of its
#: own and the reduction runs as without fusion, in as many passes as it takes.
FUSED_MAX_RUN = WORKGROUP * 256

_RECORDED: dict[tuple, lazy.Reduction] = {}


def _recorded(op: str, dim: int | None) -> lazy.Reduction:
    found = _RECORDED.get((op, dim))
    if found is None:
        found = _RECORDED[(op, dim)] = lazy.Reduction(op, dim)
    return found


class OneLaunch:
    """A reduction of a plain input of ``shape`` in one launch, its elements read from a
    ``Source``: how ``kernels.fused`` runs a recorded reduction together with the elementwise
    ops it reads (its prologue). ``fits`` says whether one launch can do it; ``info`` holds the
    launch's metadata words."""

    def __init__(self, op: str, dim: int | None, shape: tuple[int, ...]):
        _, kept, red, n_out, n_red = _split_dims(shape, contiguous_strides(shape), dim)
        self.op, self.n_out = op, n_out
        self.strategy = _default_strategy(n_out, n_red, _unit(red))
        if self.strategy == "loop":  # a chunked loop takes two launches
            self.fits = n_red <= MAX_ITERATIONS and _loop_chunks(n_out, n_red, _unit(red)) == 1
        else:
            self.fits = n_red <= FUSED_MAX_RUN
        self.dims = (len(kept[0]), len(red[0]))
        self.info = [n_out, n_red, 1, n_red, n_red, 0, *kept[0], *kept[1], *red[0], *red[1]]

    def key(self) -> tuple:
        return ("reduce", self.op, *self.dims, self.strategy)

    def workgroups(self) -> int:
        return -(-self.n_out // WORKGROUP) if self.strategy == "loop" else self.n_out

    def kernel(self, in_dtype: str, out_dtype: str, source: Source) -> ir.Kernel:
        return _build(self.op, in_dtype, (out_dtype,), *self.dims, self.strategy, "final",
                      source)


#: Reductions done in one launch, by call signature (generator, op, dtype, layout, dim,
#: strategy): (runtime, output shape, output dtypes and sizes, compiled kernel, metadata,
#: grid). Tiny reductions (a loss's mean, a bias gradient) are dominated by planning.
_PLANS: dict[tuple, tuple] = {}
_PLAN_LIMIT = 4096


def _replay(plan: tuple, x: JitTensor) -> list[JitTensor]:
    runtime, shape, outputs, compiled, meta, grid = plan
    pool, device = runtime.pool, x.device
    outs = [JitTensor(pool.alloc(nbytes), shape, dtype, device, runtime)
            for dtype, nbytes in outputs]
    runtime.dispatch(compiled, [o.buffer.handle for o in outs] + [x.buffer.handle], meta, grid)
    return outs


def _choose(op: str, x: JitTensor, out_shape, kept, red, n_out: int, n_red: int) -> str:
    default = _default_strategy(n_out, n_red, _unit(red))
    if n_red <= 1:
        return "loop"
    if n_red > MAX_ITERATIONS:
        return "tree"
    if not x.runtime.workgroup_reductions:
        return "loop"
    candidates = [default] + [s for s in ("loop", "tree") if s != default]
    plain = "unit" if _unit(red) else "strided"
    key = (f"reduce-{_OPS[op]}-{x.dtype.name}-{len(kept[0])}x{len(red[0])}-{plain}-"
           f"{autotune.shape_class(n_out, n_red)}")
    runtime = x.runtime
    return autotune.choose(runtime.device_name, key, candidates,
                           lambda s: _run(op, x, out_shape, kept, red, n_out, n_red, s),
                           runtime.sync)
