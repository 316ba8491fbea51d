"""Optimizer updates as single kernels: each invocation reads a parameter's element, its
gradient and its moments once and writes the new three (a dozen elementwise launches of
``burnish.optim`` become one)."""

from __future__ import annotations

from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP, ScalarPacker, info_scalar, plain
from burnish.jit.runtime import MAX_GROUPS_X
from burnish.jit.tensor import JitTensor, numel

# info: the element count, the four inputs' offsets, then the scalars.
COUNT, OFFSETS, SCALARS = 0, 1, 5


def adam_step(value: JitTensor, grad: JitTensor, moment_1: JitTensor, moment_2: JitTensor,
              beta_1: float, beta_2: float, epsilon: float,
              step_size: float) -> tuple[JitTensor, JitTensor, JitTensor]:
    """``burnish.backend.OptimOps.adam_step`` in one kernel: new ``(value, m, v)``, computed
    in the dtype's compute type and rounded once each."""
    runtime, dtype, shape, device = value.runtime, value.dtype, value.shape, value.device
    inputs = [plain(x) for x in (value, grad, moment_1, moment_2)]
    n = numel(shape)
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
    info = packer.info((beta_1, 1.0 - beta_1, beta_2, 1.0 - beta_2, epsilon, -step_size),
                       (n, *[x.offset for x in inputs]))
    compiled = runtime.kernel(("adam_step", dtype.name), lambda: _adam_kernel(dtype))[0]
    groups = -(-n // WORKGROUP)
    gx = min(groups, MAX_GROUPS_X)
    runtime.dispatch(compiled, [outs[0].buffer.handle, outs[1].buffer.handle,
                                outs[2].buffer.handle] + [x.buffer.handle for x in inputs],
                     info, (gx, -(-groups // gx), 1))
    return outs


#: Per dtype: the launch's info in one pack, the count and offsets, then the six scalars.
_PACKERS: dict = {}


def _adam_kernel(dtype) -> ir.Kernel:
    k = KernelBuilder("adam_step", (WORKGROUP, 1, 1))
    outs = [k.buffer(name, dtype, writable=True) for name in ("value", "m", "v")]
    value, grad, m, v = (k.buffer(name, dtype) for name in ("value", "grad", "m", "v"))
    i = k.global_index()
    with k.if_(i >= k.info(COUNT)):
        k.return_()
    ty = ir.compute_type(dtype)
    width = 2 if ty == "f64" else 1
    beta_1, keep_1, beta_2, keep_2, epsilon, step = (
        k.let(info_scalar(k, SCALARS + j * width, ty), "s") for j in range(6))
    g = k.let(grad[i + k.info(OFFSETS + 1)], "g")
    m_new = k.let(m[i + k.info(OFFSETS + 2)] * beta_1 + g * keep_1, "m")
    v_new = k.let(v[i + k.info(OFFSETS + 3)] * beta_2 + g * g * keep_2, "v")
    update = m_new / (ir.call("sqrt", v_new) + epsilon) * step
    k.store(outs[0], i, update + value[i + k.info(OFFSETS)])
    k.store(outs[1], i, m_new)
    k.store(outs[2], i, v_new)
    return k.build()
