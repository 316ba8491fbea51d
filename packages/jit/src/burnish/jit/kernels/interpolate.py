"""Resizing ``[batch, channels, height, width]``: nearest, bilinear and bicubic, as PyTorch.

The source indices and weights of each output row and column (1, 2 or 4 taps) come from
``burnish.backend.interpolation``, computed on the host as PyTorch computes them, and travel
to the kernel as two small tables; each invocation blends its taps, width first and then
height (PyTorch's order of the inner and outer sums), in float32 for half floats. Nearest
copies values without arithmetic, so it is exact for every dtype.
"""

from __future__ import annotations

import numpy as np

from burnish.backend.interpolation import taps
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP
from burnish.jit.tensor import JitTensor, numel

TAPS = {"nearest": 1, "bilinear": 2, "bicubic": 4}

# info layout
TOTAL, CHANNELS, OUT_H, OUT_W, X_OFF, X_SB, X_SC, X_SH, X_SW = range(9)


def interpolate(x: JitTensor, size: tuple[int, int], mode: str, align_corners: bool
                ) -> JitTensor:
    """``x`` resized to ``size`` by ``mode`` with PyTorch's ``align_corners`` meaning."""
    if mode not in TAPS:
        raise ValueError(f"interpolate: unknown mode {mode!r}; expected one of {sorted(TAPS)}")
    runtime = x.runtime
    batch, channels, height, width = x.shape
    out_h, out_w = size
    shape = (batch, channels, out_h, out_w)
    total = numel(shape)
    gen = runtime.generator
    out = JitTensor(runtime.pool.alloc(total * gen.storage_numpy(x.dtype.name).itemsize),
                    shape, x.dtype, x.device, runtime)
    if total == 0:
        return out
    wide = ir.compute_type(x.dtype) == "f64"
    opmath = np.dtype(np.float64 if wide else np.float32)
    rows = taps(mode, height, out_h, align_corners, opmath)
    cols = taps(mode, width, out_w, align_corners, opmath)
    # Tap-major tables: rows' taps, then columns' ([tap, out_h] then [tap, out_w]).
    indices = np.concatenate([i for i, _ in rows] + [i for i, _ in cols]).astype(np.int32)
    index_table = _upload(runtime, indices)
    buffers = [out.buffer, x.buffer, index_table]
    weights_dtype = "float64" if wide else "float32"
    if mode != "nearest":
        weights = np.concatenate([w for _, w in rows] + [w for _, w in cols]).astype(opmath)
        buffers.append(_upload(runtime, weights))
    info = [total, channels, out_h, out_w, x.offset, *x.strides]
    key = ("interpolate", mode, x.dtype.name, weights_dtype)
    runtime.launch(key, lambda: _kernel(mode, x.dtype.name, weights_dtype), buffers, info,
                   invocations=total)
    return out


def _upload(runtime, values: np.ndarray):
    """A pooled device buffer holding ``values`` (dropped after the launch is enqueued: the
    queue is in order, so a later reuse cannot overtake it)."""
    buffer = runtime.pool.alloc(values.nbytes)
    runtime.write(buffer.handle, 0, values)
    return buffer


def _kernel(mode: str, dtype: str, weights_dtype: str) -> ir.Kernel:
    count = TAPS[mode]
    k = KernelBuilder(f"interpolate_{mode}", (WORKGROUP, 1, 1))
    out = k.buffer("out", dtype, writable=True)
    x = k.buffer("x", dtype)
    index = k.buffer("index", "int32")
    weight = k.buffer("weight", weights_dtype) if mode != "nearest" else None
    i = k.global_index()
    with k.if_(i >= k.info(TOTAL)):
        k.return_()
    out_h, out_w = k.info(OUT_H), k.info(OUT_W)
    col = k.let(i % out_w, "col")
    rest = k.let(i / out_w, "r")
    row = k.let(rest % out_h, "row")
    rest2 = k.let(rest / out_h, "r")
    channel = k.let(rest2 % k.info(CHANNELS), "c")
    sample = k.let(rest2 / k.info(CHANNELS), "b")
    base = k.let(k.info(X_OFF) + sample * k.info(X_SB) + channel * k.info(X_SC), "base")
    cols_at = count * out_h  # where the columns' table starts

    def source(j: int, which: str) -> ir.Expr:
        """Tap ``j``'s table position for this output's row or column."""
        return j * out_h + row if which == "row" else cols_at + j * out_w + col

    if weight is None:
        at = base + index[source(0, "row")] * k.info(X_SH) + index[source(0, "col")] * k.info(
            X_SW)
        k.store(out, i, x[at])
        return k.build()

    ty = ir.compute_type(dtype)
    acc = k.let(ir.lift(0, ty), "acc", ty)
    for j in range(count):
        line = k.let(base + index[source(j, "row")] * k.info(X_SH), "line")
        blend = k.let(ir.lift(0, ty), "blend", ty)
        for t in range(count):
            at = line + index[source(t, "col")] * k.info(X_SW)
            k.assign(blend, blend + x[at] * weight[source(t, "col")])
        k.assign(acc, acc + blend * weight[source(j, "row")])
    k.store(out, i, acc)
    return k.build()
