"""Optimizer updates as single kernels: each invocation reads a parameter's element, its
gradient and its moments once and writes the new three (a dozen elementwise launches of
``burnish.optim`` become one)."""

from __future__ import annotations

import struct

import numpy as np

from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import (
    WORKGROUP,
    elementwise,
    info_scalar,
    scalar_words,
)
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

# info: the element count, the four inputs' offsets, then the scalars.
COUNT, OFFSETS, SCALARS = 0, 1, 5


def adam_step(value: JitTensor, grad: JitTensor, moment_1: JitTensor, moment_2: JitTensor,
              beta_1: float, beta_2: float, epsilon: float,
              step_size: float) -> tuple[JitTensor, JitTensor, JitTensor]:
    """``burnish.backend.OptimOps.adam_step`` in one kernel: new ``(value, m, v)``, computed
    in the dtype's compute type and rounded once each."""
    runtime, dtype, shape = value.runtime, value.dtype, value.shape
    plain = contiguous_strides(shape)
    inputs = [x if x.strides == plain else _plain(x) for x in (value, grad, moment_1, moment_2)]
    n = numel(shape)
    nbytes = n * runtime.generator.storage_numpy(dtype.name).itemsize
    outs = [JitTensor(runtime.pool.alloc(nbytes), shape, dtype, value.device, runtime)
            for _ in range(3)]
    if n == 0:
        return outs[0], outs[1], outs[2]
    info = [n] + [x.offset for x in inputs]
    info += _scalar_words(dtype, (beta_1, 1.0 - beta_1, beta_2, 1.0 - beta_2, epsilon,
                                  -step_size))
    runtime.launch(("adam_step", dtype.name), lambda: _adam_kernel(dtype),
                   [o.buffer for o in outs] + [x.buffer for x in inputs],
                   np.asarray(info, dtype=np.int32), invocations=n)
    return outs[0], outs[1], outs[2]


# The six scalars as the info words ``info_scalar`` reads back, in one pack per launch.
_PACKED = {"f32": (struct.Struct("<6f"), struct.Struct("<6i")),
           "f64": (struct.Struct("<6d"), struct.Struct("<12i"))}


def _scalar_words(dtype, scalars: tuple[float, ...]) -> list[int]:
    values, words = _PACKED[ir.compute_type(dtype)]
    try:
        return list(words.unpack(values.pack(*scalars)))
    except (OverflowError, struct.error):  # beyond float32: NumPy's rounding, as elsewhere
        return [word for scalar in scalars for word in scalar_words(scalar, dtype)]


def _plain(x: JitTensor) -> JitTensor:
    if x.is_contiguous():
        return x
    return elementwise("copy", lambda v, s: v[0], [x], x.dtype)


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
