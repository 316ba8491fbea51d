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

An invocation walks its row serially, so this wins only while rows are short: ``MAX_LENGTH``
bounds them, and the backend falls back to the composition (whose reductions share a long row
among a workgroup) beyond it.
"""

from __future__ import annotations

import numpy as np

from burnish.dtype import DType
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.reduce import WORKGROUP, coalesce, nan_max, strided_offsets
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

#: The longest row one invocation walks. Up to it, rows are short enough that the serial walks
#: (three reads of a row of at most 4 KiB of float32, still in cache for the second and third)
#: cost less than the launches they save (five; three for a gradient); beyond it, one
#: invocation per row leaves most of a device idle when rows are few, while the composition's
#: reductions put a workgroup on each.
#: Three walks of ``MAX_LENGTH`` stay far below ``kernels.reduce.MAX_ITERATIONS`` (lavapipe's
#: limit on an invocation's loops; packages/jit/tests/test_softmax.py checks it).
MAX_LENGTH = 1024

#: op -> how many input tensors it reads (``x``; or ``output`` then ``grad``)
OPS = {"softmax": 1, "log_softmax": 1, "softmax_backward": 2, "log_softmax_backward": 2}

# info: [rows, length, per input: offset, stride along dim; output stride along dim,
#        row shape (ndim), per input and then the output: row strides (ndim)]

_PLANS: dict[tuple, tuple] = {}
_PLAN_LIMIT = 4096


def fits(x: JitTensor, dim: int) -> bool:
    """Whether the one-kernel form takes ``x`` along ``dim`` (rows of at most ``MAX_LENGTH``)."""
    return x.shape[dim] <= MAX_LENGTH


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

    def build() -> ir.Kernel:
        return _build(op, first.dtype, ndim)

    # ``.buffer`` computes a pending lazy input (``burnish.fusion``) before this launch.
    buffers = [out.buffer] + [x.buffer for x in inputs]
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
    key = ("softmax", op, first.dtype.name, len(row_shape))
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
