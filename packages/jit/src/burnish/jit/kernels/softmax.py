"""Softmax, log-softmax and their gradients along one dim, each one kernel: one invocation per row.

A *row* is one position of every dim but ``dim``; its invocation walks the row (read through
the inputs' strides, as ``kernels.reduce`` reads them, so views need no copy) a few times:

- ``softmax`` / ``log_softmax`` of ``x``: the max (NaN wins, as the ``max`` reduction), the sum
  of ``exp(x - max)``, then ``exp(x - max) / sum`` or ``x - max - log(sum)`` written out;
- ``softmax_backward`` / ``log_softmax_backward`` of ``output`` and ``grad``: ``sum(grad *
  output)`` or ``sum(grad)``, then ``output * (grad - sum)`` or ``grad - exp(output) * sum``.

That is the protocol's composition (max, sub, exp, sum, log, sub: six launches; four for a
gradient) in one launch, and the intermediates never reach memory. Half floats compute in
float32 and round once, at the store. Outputs are new plain tensors.

Rows of at most ``MAX_LENGTH`` take one invocation each, which walks its row serially. Longer
rows (a language model's vocabulary) take a workgroup each: its invocations walk the row side
by side and combine the max and the sum through shared memory, as the reductions' tree does,
so the row is still read two or three times and written once, in one launch instead of the
composition's six (four for a gradient) passes over memory. Rows too long for that
(``MAX_GROUP_LENGTH``), or too few to fill a device (``MIN_GROUP_ROWS``), take the protocol's
composition, whose reductions split a row among several workgroups.
"""

from __future__ import annotations

import numpy as np

from burnish.dtype import DType
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.reduce import (
    MAX_ITERATIONS,
    WORKGROUP,
    coalesce,
    nan_max,
    strided_offsets,
)
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

#: The longest row one invocation walks. Up to it, rows are short enough that the serial walks
#: (three reads of a row of at most 4 KiB of float32, still in cache for the second and third)
#: cost less than the launches they save (five; three for a gradient); beyond it, one
#: invocation per row leaves most of a device idle when rows are few, while the composition's
#: reductions put a workgroup on each.
#: Three walks of ``MAX_LENGTH`` stay far below ``kernels.reduce.MAX_ITERATIONS`` (lavapipe's
#: limit on an invocation's loops; packages/jit/tests/test_softmax.py checks it).
MAX_LENGTH = 1024

#: The longest row a workgroup walks: each invocation's three walks of its share of the row
#: stay below ``kernels.reduce.MAX_ITERATIONS``.
MAX_GROUP_LENGTH = WORKGROUP * (MAX_ITERATIONS // 3)
#: The fewest rows that take a workgroup each: fewer leave most of a GPU idle, where the
#: composition's reductions split each row among many workgroups.
MIN_GROUP_ROWS = 64

#: op -> how many input tensors it reads (``x``; or ``output`` then ``grad``)
OPS = {"softmax": 1, "log_softmax": 1, "softmax_backward": 2, "log_softmax_backward": 2}

# info: [rows, length, per input: offset, stride along dim; output stride along dim,
#        row shape (ndim), per input and then the output: row strides (ndim)]

_PLANS: dict[tuple, tuple] = {}
_PLAN_LIMIT = 4096


def fits(x: JitTensor, dim: int) -> bool:
    """Whether one kernel takes ``x`` along ``dim``: rows of at most ``MAX_LENGTH``, or of at
    most ``MAX_GROUP_LENGTH`` when there are ``MIN_GROUP_ROWS`` of them or more."""
    n = x.shape[dim]
    return n <= MAX_LENGTH or (n <= MAX_GROUP_LENGTH
                               and numel(x.shape) // n >= MIN_GROUP_ROWS)


def softmax(op: str, inputs: list[JitTensor], dim: int) -> JitTensor:
    """``op`` (one of ``OPS``) of ``inputs`` (same shape and dtype) along ``dim``, as a new plain
    tensor of their shape and dtype; rows must be at most ``MAX_LENGTH`` long."""
    first = inputs[0]
    runtime = first.runtime
    signature = (runtime.generator, op, first.dtype, first.shape, dim,
                 tuple([(x.strides, x.offset) for x in inputs]))
    plan = _PLANS.get(signature)
    if plan is None:
        plan = _plan(op, inputs, dim)
        if len(_PLANS) >= _PLAN_LIMIT:
            _PLANS.clear()
        _PLANS[signature] = plan
    key, info, rows, nbytes, ndim = plan
    out = JitTensor(runtime.pool.alloc(nbytes), first.shape, first.dtype, first.device, runtime)
    if rows == 0:
        return out

    wide = key[-1]

    def build() -> ir.Kernel:
        return (_build_wide if wide else _build)(op, first.dtype, ndim)

    # ``.buffer`` computes a pending lazy input (``burnish.fusion``) before this launch.
    buffers = [out.buffer] + [x.buffer for x in inputs]
    if wide:
        runtime.launch(key, build, buffers, info, groups=rows)
    else:
        runtime.launch(key, build, buffers, info, invocations=rows)
    return out


def _header(n_in: int) -> int:
    return 2 + 2 * n_in + 1


def _plan(op: str, inputs: list[JitTensor], dim: int) -> tuple:
    """The kernel's key, the launch's ``info``, the rows, the output's bytes and the rank of
    the rows' (coalesced) shape."""
    first = inputs[0]
    shape = first.shape
    n = shape[dim]
    out_strides = contiguous_strides(shape)
    others = [d for d in range(len(shape)) if d != dim]
    row_shape, row_strides = coalesce([shape[d] for d in others],
                                      *[[x.strides[d] for d in others] for x in inputs],
                                      [out_strides[d] for d in others])
    rows = numel(tuple(row_shape)) if n else 0
    info = [rows, n]
    for x in inputs:
        info += [x.offset, x.strides[dim]]
    info.append(out_strides[dim])
    info += row_shape
    for strides in row_strides:
        info += strides
    itemsize = first.runtime.generator.storage_numpy(first.dtype.name).itemsize
    key = ("softmax", op, first.dtype.name, len(row_shape), n > MAX_LENGTH)
    return (key, np.asarray(info, dtype=np.int32), rows, max(numel(shape), 1) * itemsize,
            len(row_shape))


def _build(op: str, dtype: DType, ndim: int) -> ir.Kernel:
    n_in = OPS[op]
    k = KernelBuilder(f"{op}_rows", (WORKGROUP, 1, 1))
    out = k.buffer("out", dtype, writable=True)
    srcs = [k.buffer("in", dtype) for _ in range(n_in)]
    r = k.global_index()
    with k.if_(r >= k.info(0)):
        k.return_()
    n = k.info(1)
    shape_at = _header(n_in)
    strides_at = [shape_at + ndim * (t + 1) for t in range(n_in + 1)]
    bases = [k.info(2 + 2 * t) for t in range(n_in)] + [ir.lift(0, "i32")]
    starts = strided_offsets(k, r, ndim, shape_at, strides_at, bases)
    steps = [k.info(3 + 2 * t) for t in range(n_in)] + [k.info(2 + 2 * n_in)]

    def at(t: int, j: ir.Expr) -> ir.Expr:
        """Element ``j`` of the row in input ``t`` (the output is ``t = n_in``)."""
        return starts[t] + j * steps[t]

    ty = ir.compute_type(dtype)
    if n_in == 1:
        x = srcs[0]
        top = k.let(ir.const(float("-inf"), ty), "top")
        with k.for_(0, n, name="j") as j:
            k.assign(top, nan_max(top, x[at(0, j)], True))
        total = k.let(ir.const(0.0, ty), "total")
        with k.for_(0, n, name="j") as j:
            k.assign(total, total + ir.call("exp", x[at(0, j)] - top))
        if op == "log_softmax":
            log_total = k.let(ir.call("log", total), "lse")
        with k.for_(0, n, name="j") as j:
            shifted = k.let(x[at(0, j)] - top, "s")
            if op == "softmax":
                k.store(out, at(1, j), ir.call("exp", shifted) / total)
            else:
                k.store(out, at(1, j), shifted - log_total)
        return k.build()

    output, grad = srcs
    total = k.let(ir.const(0.0, ty), "total")
    with k.for_(0, n, name="j") as j:
        term = grad[at(1, j)] * output[at(0, j)] if op == "softmax_backward" else grad[at(1, j)]
        k.assign(total, total + term)
    with k.for_(0, n, name="j") as j:
        o, g = k.let(output[at(0, j)], "o"), k.let(grad[at(1, j)], "g")
        if op == "softmax_backward":
            k.store(out, at(2, j), o * (g - total))
        else:
            k.store(out, at(2, j), g - ir.call("exp", o) * total)
    return k.build()


def _build_wide(op: str, dtype: DType, ndim: int) -> ir.Kernel:
    """``_build``'s kernel with a workgroup per row: each invocation takes every
    ``WORKGROUP``-th element of the row, and the row's max and sum are combined in shared
    memory (no early return: every invocation reaches every barrier)."""
    n_in = OPS[op]
    k = KernelBuilder(f"{op}_wide_rows", (WORKGROUP, 1, 1))
    out = k.buffer("out", dtype, writable=True)
    srcs = [k.buffer("in", dtype) for _ in range(n_in)]
    t = k.local_id(0)
    g = k.group_index()
    rows = k.info(0)
    valid = k.let(g < rows, "valid")
    r = k.let(ir.select(valid, g, rows - 1), "r")
    n = k.info(1)
    shape_at = _header(n_in)
    strides_at = [shape_at + ndim * (i + 1) for i in range(n_in + 1)]
    bases = [k.info(2 + 2 * i) for i in range(n_in)] + [ir.lift(0, "i32")]
    starts = strided_offsets(k, r, ndim, shape_at, strides_at, bases)
    steps = [k.info(3 + 2 * i) for i in range(n_in)] + [k.info(2 + 2 * n_in)]
    ty = ir.compute_type(dtype)

    def at(i: int, j: ir.Expr) -> ir.Expr:
        return starts[i] + j * steps[i]

    def combined(value: ir.Var, combine) -> ir.Var:
        """``value`` of every invocation combined over the workgroup, known to each."""
        shared = k.shared(ty, WORKGROUP)
        k.shared_store(shared, t, value)
        k.barrier()
        step = WORKGROUP // 2
        while step:
            with k.if_(t < step):
                k.assign(value, combine(value, shared[t + step]))
                k.shared_store(shared, t, value)
            k.barrier()
            step //= 2
        return k.let(shared[ir.lift(0, "i32")], "whole")

    if n_in == 1:
        x = srcs[0]
        top = k.let(ir.const(float("-inf"), ty), "top")
        with k.for_(t, n, WORKGROUP, name="j") as j:
            k.assign(top, nan_max(top, x[at(0, j)], True))
        top = combined(top, lambda a, b: nan_max(a, b, True))
        total = k.let(ir.const(0.0, ty), "total")
        with k.for_(t, n, WORKGROUP, name="j") as j:
            k.assign(total, total + ir.call("exp", x[at(0, j)] - top))
        total = combined(total, lambda a, b: a + b)
        if op == "log_softmax":
            log_total = k.let(ir.call("log", total), "lse")
        with k.if_(valid):
            with k.for_(t, n, WORKGROUP, name="j") as j:
                shifted = k.let(x[at(0, j)] - top, "s")
                if op == "softmax":
                    k.store(out, at(1, j), ir.call("exp", shifted) / total)
                else:
                    k.store(out, at(1, j), shifted - log_total)
        return k.build()

    output, grad = srcs
    total = k.let(ir.const(0.0, ty), "total")
    with k.for_(t, n, WORKGROUP, name="j") as j:
        term = grad[at(1, j)] * output[at(0, j)] if op == "softmax_backward" else grad[at(1, j)]
        k.assign(total, total + term)
    total = combined(total, lambda a, b: a + b)
    with k.if_(valid):
        with k.for_(t, n, WORKGROUP, name="j") as j:
            o, gr = k.let(output[at(0, j)], "o"), k.let(grad[at(1, j)], "g")
            if op == "softmax_backward":
                k.store(out, at(2, j), o * (gr - total))
            else:
                k.store(out, at(2, j), gr - ir.call("exp", o) * total)
    return k.build()
