"""Optimizer updates as single kernels: each invocation reads a parameter's element, its
gradient and its moments once and writes the new three (a dozen elementwise launches of
``burnish.optim`` become one).

Under ``burnish.fusion`` the updates are deferred instead (``lazy.defer_update``): an optimizer
step's updates of one dtype and step size then run together, several parameters per launch
(``run_updates``), the way a fused multi-tensor optimizer does; each element is computed
exactly as the single update's kernel computes it."""

from __future__ import annotations

import numpy as np

from burnish.jit import ir, lazy
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP, ScalarPacker, info_scalar, plain
from burnish.jit.runtime import Runtime, grid
from burnish.jit.tensor import JitTensor, numel

# info: the element count, the four inputs' offsets, then the scalars.
COUNT, OFFSETS, SCALARS = 0, 1, 5
#: Buffers one update binds: the new value, m and v, then value, grad, m and v.
UPDATE_BUFFERS = 7


def adam_step(value: JitTensor, grad: JitTensor, moment_1: JitTensor, moment_2: JitTensor,
              beta_1: float, beta_2: float, epsilon: float, step_size: float,
              factors: JitTensor | None = None) -> tuple[JitTensor, JitTensor, JitTensor]:
    """``burnish.backend.OptimOps.adam_step`` in one kernel: new ``(value, m, v)``, computed
    in the dtype's compute type and rounded once each (deferred while recording, where a launch
    can carry two updates or more). With ``factors`` (float32 ``[2]``), ``epsilon`` and
    ``step_size`` are read from it on the device instead (``adam_step_device``)."""
    runtime, dtype, shape, device = value.runtime, value.dtype, value.shape, value.device
    inputs = [plain(x) for x in (value, grad, moment_1, moment_2)]
    n = numel(shape)
    scalars = (beta_1, 1.0 - beta_1, beta_2, 1.0 - beta_2, epsilon, -step_size)
    if factors is not None:
        inputs.append(plain(factors))
    elif lazy.RECORDING.depth and n and updates_per_launch(runtime) >= 2:
        return lazy.defer_update(inputs, scalars, shape, dtype, device, runtime)
    nbytes = n * runtime.generator.storage_numpy(dtype.name).itemsize
    pool = runtime.pool
    outs = (JitTensor(pool.alloc(nbytes), shape, dtype, device, runtime),
            JitTensor(pool.alloc(nbytes), shape, dtype, device, runtime),
            JitTensor(pool.alloc(nbytes), shape, dtype, device, runtime))
    if n == 0:
        return outs
    packer = _PACKERS.get(dtype)
    if packer is None:
        packer = _PACKERS[dtype] = ScalarPacker((), [dtype] * 6, head=5)
    info = packer.info(scalars, (n, *[x.offset for x in inputs[:4]]))
    if factors is None:
        compiled = runtime.kernel(("adam_step", dtype.name), lambda: _adam_kernel(dtype))[0]
    else:
        info = np.append(info, inputs[4].offset).astype(np.int32)
        compiled = runtime.kernel(("adam_step_device", dtype.name),
                                  lambda: _adam_kernel(dtype, device_factors=True))[0]
    runtime.dispatch(compiled, [outs[0].buffer.handle, outs[1].buffer.handle,
                                outs[2].buffer.handle] + [x.buffer.handle for x in inputs],
                     info, grid(-(-n // WORKGROUP)))
    return outs


#: Per dtype: the launch's info in one pack, the count and offsets, then the six scalars.
_PACKERS: dict = {}


def _update(k: KernelBuilder, scalars: list[ir.Expr], outs: list[ir.Buffer],
            ins: list[ir.Buffer], i: ir.Expr, at: list[ir.Expr]) -> None:
    """Element ``i`` of one update: reads ``ins`` at ``i + at[j]``, writes ``outs`` at ``i``."""
    beta_1, keep_1, beta_2, keep_2, epsilon, step = scalars
    value, grad, m, v = ins
    g = k.let(grad[i + at[1]], "g")
    m_new = k.let(m[i + at[2]] * beta_1 + g * keep_1, "m")
    v_new = k.let(v[i + at[3]] * beta_2 + g * g * keep_2, "v")
    update = m_new / (ir.call("sqrt", v_new) + epsilon) * step
    k.store(outs[0], i, update + value[i + at[0]])
    k.store(outs[1], i, m_new)
    k.store(outs[2], i, v_new)


def _scalars(k: KernelBuilder, dtype, at: int) -> list[ir.Expr]:
    ty = ir.compute_type(dtype)
    width = 2 if ty == "f64" else 1
    return [k.let(info_scalar(k, at + j * width, ty), "s") for j in range(6)]


def _buffers(k: KernelBuilder, dtype) -> tuple[list[ir.Buffer], list[ir.Buffer]]:
    outs = [k.buffer(name, dtype, writable=True) for name in ("value", "m", "v")]
    ins = [k.buffer(name, dtype) for name in ("value", "grad", "m", "v")]
    return outs, ins


def _adam_kernel(dtype, device_factors: bool = False) -> ir.Kernel:
    """One update; ``device_factors``: epsilon and the step size come from a float32 buffer
    (two elements at the offset in the info word after the scalars), not from info."""
    k = KernelBuilder("adam_step_device" if device_factors else "adam_step",
                      (WORKGROUP, 1, 1))
    outs, ins = _buffers(k, dtype)
    i = k.global_index()
    with k.if_(i >= k.info(COUNT)):
        k.return_()
    scalars = _scalars(k, dtype, SCALARS)
    if device_factors:
        factors = k.buffer("factors", "float32")
        ty = ir.compute_type(dtype)
        at = k.info(SCALARS + 6 * (2 if ty == "f64" else 1))
        scalars[4] = k.let(factors[at].cast(ty), "eps")
        scalars[5] = k.let(-factors[at + 1].cast(ty), "step")
    _update(k, scalars, outs, ins, i, [k.info(OFFSETS + j) for j in range(4)])
    return k.build()


# -- several updates per launch ------------------------------------------------------------------


def _adam_many_kernel(dtype, count: int) -> ir.Kernel:
    """``count`` updates in one launch over their elements laid end to end. info: per update
    the end of its range and its four inputs' offsets (five words), then the six scalars."""
    k = KernelBuilder("adam_steps", (WORKGROUP, 1, 1))
    buffers = [_buffers(k, dtype) for _ in range(count)]
    i = k.global_index()
    scalars = _scalars(k, dtype, 5 * count)
    start: ir.Expr = ir.lift(0, "i32")
    for j, (outs, ins) in enumerate(buffers):
        end = k.info(5 * j)
        with k.if_(i < end):
            _update(k, scalars, outs, ins, k.let(i - start, "e"),
                    [k.info(5 * j + 1 + w) for w in range(4)])
            k.return_()
        start = end
    return k.build()


def updates_per_launch(runtime: Runtime) -> int:
    """How many updates one launch of ``runtime`` carries: seven buffers and five info words
    each, and the scalars take up to twelve words more."""
    return min(runtime.max_buffers // UPDATE_BUFFERS, (runtime.max_info_words - 12) // 5)


def run_updates(runtime: Runtime, updates: list[lazy.Update]) -> None:
    """Compute deferred updates: those of one dtype and scalars together, as many per launch as
    the runtime binds buffers for."""
    batches: dict[tuple, list[lazy.Update]] = {}
    for update in updates:
        batches.setdefault((update.dtype, update.scalars), []).append(update)
    per_launch = updates_per_launch(runtime)
    for (dtype, scalars), batch in batches.items():
        for first in range(0, len(batch), per_launch):
            _launch(runtime, dtype, scalars, batch[first:first + per_launch])


def _launch(runtime: Runtime, dtype, scalars: tuple, batch: list[lazy.Update]) -> None:
    count = len(batch)
    packer = _MANY_PACKERS.get((dtype, count))
    if packer is None:
        packer = _MANY_PACKERS[(dtype, count)] = ScalarPacker((), [dtype] * 6, head=5 * count)
    itemsize = runtime.generator.storage_numpy(dtype.name).itemsize
    alloc = runtime.pool.alloc
    words, handles, total = [], [], 0
    for update in batch:
        nbytes = numel(update.shape) * itemsize
        total += nbytes
        words.append(total // itemsize)
        for result in update.outs:
            result.buffer = buffer = alloc(nbytes)
            result.node = None
            handles.append(buffer.handle)
        for x in update.inputs:
            words.append(x.offset)
            handles.append(x.buffer.handle)
    compiled = runtime.kernel(("adam_steps", dtype.name, count),
                              lambda: _adam_many_kernel(dtype, count))[0]
    elements = total // itemsize
    runtime.dispatch(compiled, handles, packer.info(scalars, words),
                     grid(-(-elements // WORKGROUP)))


#: Per dtype and update count: a launch's info in one pack.
_MANY_PACKERS: dict = {}
