"""Fused kernels: one launch computes a group of lazy tensors of one shape from their inputs.

A group (``lazy._groups``) is a list of target tensors of one shape. The kernel runs one
invocation per element of that shape; every pending op the targets depend on is evaluated in
registers, in recording order, each through the same expression builder its eager kernel uses
(so results are the same: values of narrow dtypes are rounded or wrapped after every op, as a
store and a load would). Inputs that are already computed (and targets of earlier groups) are
read from memory through strides that map the kernel's coordinates onto them: pending ops of a
smaller shape broadcast into the group are evaluated at the broadcast coordinates.

The kernel depends only on the structure of the group (ops, dtypes, which values feed which,
whether every read is plain, the rank); shapes, strides, offsets and scalars travel in the
launch's ``info``, so a training loop compiles each of its fused programs once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from burnish.jit import ir, lazy
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import (
    WORKGROUP,
    ScalarPacker,
    broadcast_strides,
    each_element,
    elements_per_invocation,
    elementwise,
    info_scalar,
    scalar_words,
)
from burnish.jit.kernels.matmul import Epilogue, Layout, matmul
from burnish.jit.kernels.reduce import OneLaunch, Source, reduce
from burnish.jit.runtime import Runtime, grid
from burnish.jit.tensor import JitTensor, contiguous_strides, numel


@dataclass
class FusedProgram:
    """One fused kernel as users see it (``burnish.fusion.programs``): the ops it evaluates
    in order, the dtypes of its outputs, its rank (``None``: every read is plain), and how
    often it ran."""

    ops: tuple[str, ...]
    outputs: tuple[str, ...]
    rank: int | None
    key: tuple = field(repr=False)
    runtime: Runtime = field(repr=False)
    launches: int = 0

    @property
    def source(self) -> str:
        """The generated source (WGSL, OpenCL C or CUDA C)."""
        return self.runtime.source_of(self.key)

    def __str__(self) -> str:
        layout = "plain" if self.rank is None else f"strided rank {self.rank}"
        return (f"fused kernel: {len(self.ops)} ops ({', '.join(self.ops)}) -> "
                f"{len(self.outputs)} outputs ({', '.join(self.outputs)}), {layout}, "
                f"{self.launches} launches")


def run_groups(runtime: Runtime, groups: list[list[lazy.LazyTensor]],
               stream: lazy.Stream | None = None) -> list[Launch | Replan]:
    """Compute every group in order (recording is off meanwhile: the fallback runs eagerly).
    With ``stream``, the stream the groups were recorded in: the launches made, for
    ``replay`` to repeat on a flush of the same structure."""
    depth = lazy.suspend()
    try:
        return [_run(runtime, targets, stream) for targets in groups]
    finally:
        lazy.resume(depth)


def replay(runtime: Runtime, launches: list[Launch | Replan], live: list[lazy.LazyTensor | None],
           buffers: list) -> None:
    """Make the ``launches`` an earlier flush of the same structure made, for ``live`` (the
    recorded tensors, by position) reading ``buffers`` (the stream's computed inputs)."""
    for launch in launches:
        if type(launch) is Launch:  # launches its kernel itself: nothing to record
            launch.run(runtime, live, buffers)
            continue
        depth = lazy.suspend()  # the rest run elementwise ops, eagerly
        try:
            if type(launch) is Lone:
                _compute_lone(live[launch.target])
            else:
                _run(runtime, [live[p] for p in launch.targets])
        finally:
            lazy.resume(depth)


class Launch:
    """One fused kernel's launch as a flush planned it, in terms of stream positions: the
    targets it computes, the metadata words that precede the scalars, which recorded op's
    scalars follow them, and where each buffer it reads comes from (``(True, slot)``: the
    stream's computed inputs; ``(False, position)``: a target of an earlier launch)."""

    __slots__ = ("targets", "nbytes", "compiled", "program", "grid", "packer", "info",
                 "scalars", "sources")

    def __init__(self, plan: _Plan, stream: lazy.Stream, compiled, program: FusedProgram,
                 grid: tuple[int, int, int], nbytes: list[int]):
        self.targets = tuple(t.pos for t in plan.targets)
        self.nbytes, self.compiled, self.program, self.grid = tuple(nbytes), compiled, program, grid
        self.scalars = tuple((t.pos, j) for t in plan.nodes for j in range(len(t.node.scalars)))
        self.packer = ScalarPacker(plan.info_prefix(), [t.node.scalars[j][1] for t in plan.nodes
                                                        for j in range(len(t.node.scalars))])
        self.info = None if self.scalars else self.packer.info(())
        self.sources = tuple(
            (False, b.pos) if type(b) is lazy.LazyTensor and b.stream is stream
            else (True, stream.slots[(id(b.buffer), b.dtype)]) for b in plan.buffers)

    def run(self, runtime: Runtime, live: list[lazy.LazyTensor | None], buffers: list) -> None:
        info = self.info
        if info is None:
            info = self.packer.info([live[p].node.scalars[j][0] for p, j in self.scalars])
        outs = [runtime.pool.alloc(n) for n in self.nbytes]
        handles = [b.handle for b in outs]
        for in_stream, j in self.sources:
            handles.append(buffers[j].handle if in_stream else live[j].buffer.handle)
        runtime.dispatch(self.compiled, handles, info, self.grid)
        self.program.launches += 1
        for p, buffer in zip(self.targets, outs):
            t = live[p]
            t.buffer = buffer
            t.node = None


class Lone:
    """A group of one op reading only computed tensors: its own kernel (none for an alias)."""

    __slots__ = ("target",)

    def __init__(self, target: lazy.LazyTensor):
        self.target = target.pos


class Replan:
    """A group a flush computed some other way (too large for one launch): plan it again from
    its targets' positions."""

    __slots__ = ("targets",)

    def __init__(self, targets: list[lazy.LazyTensor]):
        self.targets = tuple(t.pos for t in targets)


def kernel_strides(x: JitTensor, node_shape: tuple[int, ...],
                   shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides that read ``x``, an input of an op of ``node_shape``, at the coordinates of
    a kernel over ``shape`` (which ``node_shape`` broadcasts to)."""
    seen = broadcast_strides(x, node_shape)
    lead = len(shape) - len(node_shape)
    return tuple(0 if d < lead or node_shape[d - lead] == 1 else seen[d - lead]
                 for d in range(len(shape)))


class _Plan:
    """A group laid out for one kernel: nodes in order, memory reads, buffers, metadata. A
    group that holds a product (``lazy.PRODUCT``) is the product's kernel, whose epilogue
    evaluates the group's other ops on each accumulated value (``product``: the product's
    position among the nodes and its ``Layout``). A group of a reduction (a ``lazy.Reduction``,
    its one target) is the reduction's kernel, which evaluates the group's other ops at each
    element it reads (``reduction``: its position and ``reduce.OneLaunch``); the group's shape
    is then that of the reduction's input."""

    def __init__(self, targets: list[lazy.LazyTensor]):
        self.targets = targets
        fn = targets[0].node.fn
        reduced = targets[0].node.inputs[0] if type(fn) is lazy.Reduction else None
        self.shape = shape = targets[0].shape if reduced is None else reduced.shape
        self.nodes = _in_order(targets)
        at = {id(t): j for j, t in enumerate(self.nodes)}
        plain = contiguous_strides(shape)
        self.buffers: list[JitTensor] = []  # one tensor per distinct buffer and dtype read
        buffer_at: dict[tuple, int] = {}
        self.reads: list[tuple[int, int, tuple[int, ...]]] = []  # (buffer, offset, strides)
        read_at: dict[tuple, int] = {}
        self.product: tuple[int, Layout] | None = None
        self.reduction: tuple[int, OneLaunch] | None = None
        structure = []
        for t in self.nodes:
            node, refs = t.node, []
            for x in node.inputs:
                if id(x) in at:
                    refs.append(("v", at[id(x)]))
                    continue
                buffer = x.buffer
                slot = buffer_at.setdefault((id(buffer), x.dtype), len(self.buffers))
                if slot == len(self.buffers):
                    self.buffers.append(x)
                if node.fn is lazy.PRODUCT or x is reduced:  # read by the product's (or the
                    refs.append(("m", slot))  # reduction's) kernel through its own layout
                    continue
                read = (slot, x.offset, kernel_strides(x, node.shape, shape))
                refs.append(("r", read_at.setdefault(read, len(self.reads))))
                if refs[-1][1] == len(self.reads):
                    self.reads.append(read)
            kind = None  # a product's or a reduction's: its kernel's structure
            if node.fn is lazy.PRODUCT:
                a, b = node.inputs
                layout = Layout(a, b, node.shape[:-2])
                if layout.tiled:
                    layout.tile()
                self.product = (len(structure), layout)
                kind = self.product[1].key()
            elif type(node.fn) is lazy.Reduction:
                self.reduction = (len(structure), OneLaunch(node.fn.op, node.fn.dim, shape))
                kind = self.reduction[1].key()
            structure.append((node.op, tuple(refs), tuple(x.dtype.name for x in node.inputs),
                              node.dtype.name, tuple(ir.compute_type(d) for _, d in node.scalars),
                              kind))
        self.flat = all(s == p for _, _, strides in self.reads
                        for s, p, size in zip(strides, plain, shape) if size != 1)
        self.outputs = tuple(at[id(t)] for t in targets)
        rank = None if self.flat else len(shape)
        self.several = 1  # elements an invocation computes, in a kernel of the group alone
        if self.product is None and self.reduction is None:
            self.several = elements_per_invocation(
                targets[0].runtime.generator, numel(shape),
                [self.buffers[slot].dtype.name for slot, _, _ in self.reads])
        self.key = ("fused", rank, tuple(structure), self.outputs,
                    tuple(b.dtype.name for b in self.buffers), self.several)
        self.rank = rank

    def info_prefix(self) -> list[int]:
        """The launch's metadata words before the ops' scalars: the product's or the
        reduction's, then size, shape, read layouts."""
        words = [] if self.product is None else list(self.product[1].info)
        if self.reduction is not None:
            words = list(self.reduction[1].info)
        words.append(numel(self.shape))
        if not self.flat:
            words += list(self.shape)
        for _, offset, strides in self.reads:
            words.append(offset)
            if not self.flat:
                words += list(strides)
        return words

    def info(self) -> np.ndarray:
        words = self.info_prefix()
        for t in self.nodes:
            for value, dtype in t.node.scalars:
                words += scalar_words(value, dtype)
        return np.asarray(words, dtype=np.int32)

    def grid(self) -> tuple[int, int, int]:
        """The launch's workgroups, split across x and y when there are many."""
        if self.product is not None:
            groups = self.product[1].workgroups()
        elif self.reduction is not None:
            groups = self.reduction[1].workgroups()
        else:
            groups = -(-numel(self.shape) // (WORKGROUP * self.several))
        return grid(groups)

    def declare(self, k: KernelBuilder) -> tuple[list[ir.Buffer], list[ir.Buffer]]:
        """The kernel's buffers: the targets written, then the buffers read."""
        outs = [k.buffer("out", t.dtype, writable=True) for t in self.targets]
        return outs, self.declare_reads(k)

    def declare_reads(self, k: KernelBuilder) -> list[ir.Buffer]:
        return [k.buffer("in", b.dtype) for b in self.buffers]

    def build(self) -> ir.Kernel:
        if self.product is not None:
            return self.product[1].kernel(_Epilogue(self))
        if self.reduction is not None:
            position, launch = self.reduction
            reduced = self.key[2][position][1][0][1]  # the reduction's input, a value ("v", j)
            return launch.kernel(self.nodes[reduced].dtype.name, self.targets[0].dtype.name,
                                 _Prologue(self, reduced))
        k = KernelBuilder("fused", (WORKGROUP, 1, 1))
        outs, bufs = self.declare(k)
        each_element(k, k.info(0), self.several, lambda i: self.values(k, bufs, i, 0),
                     lambda i, values: self.store(k, outs, i, values))
        return k.build()

    def evaluate(self, k: KernelBuilder, outs: list[ir.Buffer], bufs: list[ir.Buffer],
                 i: ir.Expr, base: int, product: ir.Expr | None = None) -> None:
        """Compute element ``i`` (row-major over the group's shape) of every target and store
        it; the group's metadata starts at ``info[base]``, and ``product`` is the product's
        accumulated value there (in a product's kernel)."""
        self.store(k, outs, i, self.values(k, bufs, i, base, product))

    def store(self, k: KernelBuilder, outs: list[ir.Buffer], i: ir.Expr,
              values: list[ir.Var | None]) -> None:
        """Write element ``i`` of every target from ``values`` (``values``' result)."""
        for buf, j in zip(outs, self.outputs):
            k.store(buf, i, values[j])

    def values(self, k: KernelBuilder, bufs: list[ir.Buffer], i: ir.Expr, base: int,
               product: ir.Expr | None = None) -> list[ir.Var | None]:
        """Every node's value at element ``i``, in order (``evaluate``'s; a reduction's own
        is ``None``: its kernel folds the values)."""
        ndim = len(self.shape)
        at = base + 1
        coords = []
        if not self.flat:
            at += ndim
            coords = [None] * ndim
            rest = k.let(i, "rest")
            for d in reversed(range(ndim)):
                coords[d] = k.let(rest % k.info(base + 1 + d), "c")
                if d:
                    k.assign(rest, rest / k.info(base + 1 + d))
        loaded = []
        for slot, _, _ in self.reads:
            if self.flat:
                pos = i + k.info(at)
                at += 1
            else:
                pos = k.info(at)
                for d in range(ndim):
                    pos = pos + coords[d] * k.info(at + 1 + d)
                at += 1 + ndim
            loaded.append(k.let(bufs[slot][pos], "x"))
        values = []
        for t, (_, refs, _, _, scalar_types, _) in zip(self.nodes, self.key[2]):
            node = t.node
            if type(node.fn) is lazy.Reduction:
                values.append(None)
                continue
            if node.fn is lazy.PRODUCT:
                result = product
            else:
                inputs = [values[j] if kind == "v" else loaded[j] for kind, j in refs]
                scalars = []
                for ty in scalar_types:
                    scalars.append(info_scalar(k, at, ty))
                    at += 2 if ty in ("i64", "f64") else 1
                if getattr(node.fn, "uses_builder", False):
                    result = node.fn(inputs, scalars, k)
                else:
                    result = node.fn(inputs, scalars)
            # Round or wrap to the op's dtype, as storing and loading it would.
            result = ir.lift(result, ir.compute_type(node.dtype)).cast(node.dtype)
            values.append(k.let(result, "f"))
        return values


class _Epilogue(Epilogue):
    """A product kernel's buffers and stores for a group holding the product: the group's
    targets are written at each accumulated value's element."""

    def __init__(self, plan: _Plan):
        self.plan = plan

    def declare(self, k: KernelBuilder, dtype: str, has_bias: bool) -> tuple[ir.Buffer, ...]:
        self.outs, self.bufs = self.plan.declare(k)
        position = self.plan.product[0]
        refs = self.plan.key[2][position][1]  # the product's operands: ("m", slot) each
        return tuple(self.bufs[slot] for _, slot in refs)

    def store(self, k: KernelBuilder, acc: ir.Expr, batch: ir.Expr, row: ir.Expr,
              col: ir.Expr, index: ir.Expr) -> None:
        self.plan.evaluate(k, self.outs, self.bufs, k.let(index, "e"),
                           len(self.plan.product[1].info), acc)


class _Prologue(Source):
    """A reduction kernel's elements for a group holding the reduction: node ``reduced`` of
    the group's plan evaluated at each element read."""

    def __init__(self, plan: _Plan, reduced: int):
        self.plan, self.reduced = plan, reduced

    def declare(self, k: KernelBuilder, dtype: str) -> None:
        self.bufs = self.plan.declare_reads(k)  # after the reduction's own outputs

    def load(self, k: KernelBuilder, position: ir.Expr) -> ir.Expr:
        base = len(self.plan.reduction[1].info)
        return self.plan.values(k, self.bufs, k.let(position, "e"), base)[self.reduced]


def _in_order(targets: list[lazy.LazyTensor]) -> list[lazy.LazyTensor]:
    """The pending tensors ``targets`` need, inputs before the ops that read them."""
    order, seen = [], set()
    for target in targets:
        stack = [(target, False)]
        while stack:
            t, ready = stack.pop()
            if ready:
                order.append(t)
                continue
            if id(t) in seen:
                continue
            seen.add(id(t))
            stack.append((t, True))
            for x in reversed(t.node.inputs):
                if lazy.pending(x) and id(x) not in seen:
                    stack.append((x, False))
    return order


def _run(runtime: Runtime, targets: list[lazy.LazyTensor],
         stream: lazy.Stream | None = None) -> Launch | Replan:
    if targets[0].node.fn is lazy.ALIAS:  # no kernel: the buffer of its input (a target)
        _compute_lone(targets[0])
        return Lone(targets[0])
    plan = _Plan(targets)
    if len(plan.nodes) == 1 and (plan.product is None or plan.product[1].runs() > 1):
        # A lone elementwise op: its own kernel, shared with unfused use of the backend. (A
        # lone product takes the product kernel below: a replayed launch costs less host time
        # than planning the product again, or than a vendor library's call; except one whose
        # tiles are too few to fill the device, which the product's own path tunes and may
        # split into runs of its inner dim.)
        _compute_lone(targets[0])
        return Lone(targets[0])
    info = plan.info()
    if (len(info) > runtime.max_info_words
            or len(plan.buffers) + len(targets) > runtime.max_buffers
            or plan.reduction is not None and not plan.reduction[1].fits):
        _split(runtime, plan)
        return Replan(targets)
    compiled = runtime.kernel(plan.key, plan.build)[0]
    program = runtime.fused_programs.get(plan.key)
    if program is None:
        program = runtime.fused_programs[plan.key] = FusedProgram(
            tuple(t.node.op for t in plan.nodes), tuple(t.dtype.name for t in targets),
            plan.rank, plan.key, runtime)
    program.launches += 1
    nbytes = [max(numel(t.shape), 1) * runtime.generator.storage_numpy(t.dtype.name).itemsize
              for t in targets]
    outs = [runtime.pool.alloc(size) for size in nbytes]
    handles = [b.handle for b in outs] + [x.buffer.handle for x in plan.buffers]
    workgroups = plan.grid()
    launch = None if stream is None else Launch(plan, stream, compiled, program, workgroups,
                                                nbytes)
    runtime.dispatch(compiled, handles, info, workgroups)
    for t, buffer in zip(targets, outs):
        t.buffer = buffer
        t.node = None
    return launch


def _split(runtime: Runtime, plan: _Plan) -> None:
    """Run a group too large for one launch as two: the first half of its ops (with what the
    second half reads from them as outputs), then the rest reading those from memory. A
    product's group: the product alone, then the rest; a reduction's: its input stored by a
    kernel of its own, then the reduction as without fusion."""
    if plan.reduction is not None:
        reduced = plan.targets[0].node.inputs[0]
        if lazy.pending(reduced):
            _run(runtime, [reduced])
        _compute_lone(plan.targets[0])
        return
    if plan.product is not None:
        _compute_lone(plan.nodes[plan.product[0]])
        rest = [t for t in plan.targets if lazy.pending(t)]
        if rest:
            _run(runtime, rest)
        return
    half = len(plan.nodes) // 2
    first = {id(t) for t in plan.nodes[:half]}
    wanted = {id(t) for t in plan.targets}
    for t in plan.nodes[half:]:
        wanted.update(id(x) for x in t.node.inputs if id(x) in first)
    cut = [t for t in plan.nodes[:half] if id(t) in wanted and t.shape == plan.shape]
    if not cut:
        _run_eagerly(plan)
        return
    _run(runtime, cut)
    rest = [t for t in plan.targets if lazy.pending(t)]
    if rest:
        _run(runtime, rest)


def _compute_lone(t: lazy.LazyTensor) -> None:
    """Compute ``t``, whose inputs are all computed, with its op's own kernel (an alias: its
    input's buffer)."""
    node = t.node
    t.buffer = (node.inputs[0] if node.fn is lazy.ALIAS else _eager(t, node.inputs)).buffer
    t.node = None


def _eager(t: lazy.LazyTensor, inputs) -> JitTensor:
    """``t``'s op run by its own kernel over ``inputs`` (computed)."""
    node = t.node
    if node.fn is lazy.PRODUCT:
        return matmul(*inputs, library=False)
    if type(node.fn) is lazy.Reduction:
        return reduce(node.fn.op, inputs[0], node.fn.dim)[0]
    out = None
    if not inputs:  # a constant: elementwise needs somewhere to write
        itemsize = t.runtime.generator.storage_numpy(t.dtype.name).itemsize
        out = JitTensor(t.runtime.pool.alloc(t.numel * itemsize), t.shape, t.dtype, t.device,
                        t.runtime)
    return elementwise(node.op, node.fn, inputs, node.dtype, node.scalars, node.shape, out=out)


def _run_eagerly(plan: _Plan) -> None:
    """One launch per op: for groups whose metadata or buffers exceed what a launch carries."""
    done: dict[int, JitTensor] = {}
    for t in plan.nodes:
        done[id(t)] = _eager(t, [done.get(id(x), x) for x in t.node.inputs])
    for t in plan.targets:
        t.buffer = done[id(t)].buffer
        t.node = None
