"""Recurrent cells (``burnish.backend.RecurrentOps``), each one kernel: one invocation per
element ``(b, j)`` of the ``[batch, d_hidden]`` state.

An invocation reads its unit's gate pre-activations (``gates`` of them per row, ``d_hidden``
apart) from both gate operands and the state, and writes every output of its unit: an LSTM
step's new hidden state and cell, a GRU step's new hidden state, or a step's gradients. That is
the protocol's composition (a dozen elementwise launches, or twenty for a gradient) in one
launch, and the gates never reach memory. Operands are read through their row stride, so a time
step of a ``[batch, seq, gates * d_hidden]`` projection (a view) needs no copy; an operand whose
last dim is not contiguous is copied first. Half floats compute in float32 and round once, at
the store. Outputs are new plain tensors.

sigmoid is computed from ``exp(-|x|)`` (no overflow at any ``x``), tanh by the generators'
``tanh`` (WGSL's through a helper that holds at large ``|x|``).
"""

from __future__ import annotations

import numpy as np

from burnish.dtype import DType
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP, plain
from burnish.jit.tensor import JitTensor

#: op -> (gates per row, inputs with their widths in units of ``d_hidden``, outputs' widths)
OPS = {
    "lstm_cell": (4, (4, 4, 1), (1, 1)),
    "lstm_cell_backward": (4, (4, 4, 1, 1, 1), (4, 1)),
    "gru_cell": (3, (3, 3, 1), (1,)),
    "gru_cell_backward": (3, (3, 3, 1, 1), (3, 3, 1)),
}

# info: [units (batch * d_hidden), d_hidden, per input: offset, row stride]


def cell(op: str, inputs: list[JitTensor]) -> tuple[JitTensor, ...]:
    """``op`` (one of ``OPS``) of ``inputs`` (one float dtype; gate operands ``[batch, gates *
    d_hidden]``, states ``[batch, d_hidden]``), as new plain tensors."""
    inputs = [x if x.ndim == 2 and (x.shape[1] <= 1 or x.strides[1] == 1) else plain(x)
              for x in inputs]
    state = inputs[2]
    runtime, dtype, device = state.runtime, state.dtype, state.device
    batch, d = state.shape
    _, _, widths = OPS[op]
    itemsize = runtime.generator.storage_numpy(dtype.name).itemsize
    outs = tuple(JitTensor(runtime.pool.alloc(max(batch * w * d, 1) * itemsize), (batch, w * d),
                           dtype, device, runtime) for w in widths)
    units = batch * d
    if units == 0:
        return outs
    info = [units, d]
    for x in inputs:
        info += [x.offset, x.strides[0] if batch > 1 else 0]

    def build() -> ir.Kernel:
        return _build(op, dtype)

    # ``.buffer`` computes a pending lazy input (``burnish.fusion``) before this launch.
    buffers = [out.buffer for out in outs] + [x.buffer for x in inputs]
    runtime.launch(("recurrent", op, dtype.name), build, buffers,
                   np.asarray(info, dtype=np.int32), invocations=units)
    return outs


def _sigmoid(k: KernelBuilder, x: ir.Expr) -> ir.Expr:
    """``1 / (1 + exp(-x))`` from ``e = exp(-|x|)``: ``1 / (1 + e)`` or ``e / (1 + e)``."""
    x = k.let(x, "x")
    e = k.let(ir.call("exp", -ir.call("abs", x)), "e")
    return k.let(ir.select(x >= 0.0, 1.0 / (1.0 + e), e / (1.0 + e)), "sig")


def _build(op: str, dtype: DType) -> ir.Kernel:
    gates, in_widths, out_widths = OPS[op]
    k = KernelBuilder(op, (WORKGROUP, 1, 1))
    outs = [k.buffer("out", dtype, writable=True) for _ in out_widths]
    srcs = [k.buffer("in", dtype) for _ in in_widths]
    u = k.global_index()
    with k.if_(u >= k.info(0)):
        k.return_()
    d = k.info(1)
    b = k.let(u / d, "b")
    j = k.let(u - b * d, "j")
    rows = [k.let(k.info(2 + 2 * t) + b * k.info(3 + 2 * t) + j, "row")
            for t in range(len(in_widths))]

    def load(t: int, gate: int = 0) -> ir.Var:
        """Input ``t``'s value of this unit in gate ``gate`` (0 for states)."""
        return k.let(srcs[t][rows[t] + gate * d], "v")

    def store(t: int, value: ir.Expr, gate: int = 0) -> None:
        """Output ``t`` (plain, ``out_widths[t] * d`` wide) at this unit in gate ``gate``."""
        k.store(outs[t], b * (out_widths[t] * d) + gate * d + j, value)

    tanh = lambda x: k.let(ir.call("tanh", x), "t")
    if op.startswith("lstm"):
        i, f, g, o = (load(0, q) + load(1, q) for q in range(gates))
        i, f, o, g = _sigmoid(k, i), _sigmoid(k, f), _sigmoid(k, o), tanh(g)
        c = load(2)
        new_cell = k.let(f * c + i * g, "c")
        tanh_cell = tanh(new_cell)
        if op == "lstm_cell":
            store(0, o * tanh_cell)
            store(1, new_cell)
            return k.build()
        grad_h = load(3)
        grad_new = k.let(load(4) + grad_h * o * (1.0 - tanh_cell * tanh_cell), "dc")
        store(0, grad_new * g * i * (1.0 - i), 0)
        store(0, grad_new * c * f * (1.0 - f), 1)
        store(0, grad_new * i * (1.0 - g * g), 2)
        store(0, grad_h * tanh_cell * o * (1.0 - o), 3)
        store(1, grad_new * f)
        return k.build()
    r = _sigmoid(k, load(0, 0) + load(1, 0))
    z = _sigmoid(k, load(0, 1) + load(1, 1))
    h_n = load(1, 2)
    n = tanh(load(0, 2) + r * h_n)
    h = load(2)
    if op == "gru_cell":
        store(0, n + z * (h - n))
        return k.build()
    grad = load(3)
    grad_n = k.let(grad * (1.0 - z) * (1.0 - n * n), "dn")
    grad_r = k.let(grad_n * h_n * r * (1.0 - r), "dr")
    grad_z = k.let(grad * (h - n) * z * (1.0 - z), "dz")
    for t in (0, 1):
        store(t, grad_r, 0)
        store(t, grad_z, 1)
    store(0, grad_n, 2)
    store(1, grad_n * r, 2)
    store(2, grad * z)
    return k.build()
