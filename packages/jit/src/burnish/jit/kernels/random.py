"""Random numbers on the device: a counter-based generator (PCG's output hash of the element's
index, the seed and the draw number), so every element is drawn independently and a seed gives
the same values on every run and every launch split.

The seed and the draw number live on the device (``Runtime.random_state``, two words): a draw
reads them and a one-invocation kernel counts the draw. No host number goes into a launch, so a
captured step that draws (dropout) replays with fresh values each time, the same values an
eager run with that seed would draw."""

from __future__ import annotations

import math

import numpy as np

from burnish.distribution import Distribution
from burnish.dtype import float32, float64, int32
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP, info_scalar, scalar_words
from burnish.jit.runtime import DeviceBuffer, Runtime
from burnish.jit.tensor import JitTensor


def _pcg(k: KernelBuilder, v: ir.Expr) -> ir.Expr:
    state = k.let(v * 747796405 + 2891336453, "st")
    word = k.let(((state >> ((state >> 28) + 4)) ^ state) * 277803737, "w")
    return k.let((word >> 22) ^ word, "h")


def _uniform(k: KernelBuilder, counter: ir.Expr, key: ir.Expr, ty: str) -> ir.Expr:
    """A uniform draw in [0, 1) of compute type ``ty`` for stream position ``counter``."""
    h1 = _pcg(k, _pcg(k, counter ^ key) + key)
    if ty != "f64":
        return (h1 >> 8).cast("f32") * (1.0 / 16777216.0)
    h2 = _pcg(k, h1 ^ 0x9E3779B9)
    high = (h1 >> 5).cast("f64") * 67108864.0
    return (high + (h2 >> 6).cast("f64")) * (1.0 / 9007199254740992.0)


def state(runtime: Runtime, seed: int) -> DeviceBuffer:
    """``runtime``'s generator state, made with ``seed`` and no draws if it has none yet."""
    if runtime.random_state is None:
        runtime.random_state = runtime.pool.alloc(8)
        # Not recorded when a captured call makes it: a replay must not reset the draws.
        type(runtime).write(runtime, runtime.random_state.handle, 0, _words(seed))
    return runtime.random_state


def reseed(runtime: Runtime, seed: int) -> None:
    """Set ``runtime``'s generator state (if made) to ``seed`` with no draws."""
    if runtime.random_state is not None:
        runtime.write(runtime.random_state.handle, 0, _words(seed))


def _words(seed: int) -> np.ndarray:
    return np.array([seed & 0xFFFFFFFF, 0], np.uint32).view(np.int32)


def fill(out: JitTensor, distribution: Distribution, seed: int) -> None:
    """Fill the plain tensor ``out`` with draws from ``distribution``: the next draw of the
    device's generator (made with ``seed`` if the device has none yet)."""
    n = out.numel
    if n == 0:
        return
    runtime = out.runtime
    generator = state(runtime, seed)
    _count(runtime, generator)
    dtype = out.dtype
    kind, a, b = distribution.kind, distribution.a, distribution.b
    ty = "f64" if dtype.name == "float64" else "f32"
    info = [n]
    params = [a, b]
    if kind == "uniform" and dtype.is_float:
        # Rounding to a narrow float can reach b: the largest value below it keeps [a, b).
        below = np.nextafter(np.array(b, dtype.numpy), np.array(-np.inf, dtype.numpy))
        params.append(float(below))
    for value in params:
        info += scalar_words(value, _param_dtype(ty))

    def build() -> ir.Kernel:
        k = KernelBuilder(f"random_{kind}", (WORKGROUP, 1, 1))
        buf = k.buffer("out", dtype, writable=True)
        words = k.buffer("state", int32)
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        seed_word, draw_word = words[0].bitcast("u32"), words[1].bitcast("u32")
        key_word = k.let(seed_word * 0x9E3779B1 + draw_word * 0x85EBCA77, "key")
        step = 2 if ty == "f64" else 1
        pa, pb = info_scalar(k, 1, ty), info_scalar(k, 1 + step, ty)
        counter = i.bitcast("u32")
        if kind == "bernoulli":
            value = _uniform(k, counter, key_word, ty) < pa
        elif kind == "normal":
            u1 = 1.0 - _uniform(k, counter * 2, key_word, ty)  # (0, 1]: log is finite
            u2 = _uniform(k, counter * 2 + 1, key_word, ty)
            radius = ir.call("sqrt", ir.call("log", u1) * -2.0)
            value = radius * ir.call("cos", u2 * (2.0 * math.pi)) * pb + pa
        else:
            value = _uniform(k, counter, key_word, ty) * (pb - pa) + pa
            if dtype.is_float:
                below = info_scalar(k, 1 + 2 * step, ty)
                value = ir.call("min", value.cast(dtype), below)
        if dtype.is_bool:
            value = value.cast("bool") if value.ty != "bool" else value
        elif not dtype.is_float:
            value = (ir.call("floor", value) if value.ty != "bool" else value).cast(dtype)
        else:
            value = value.cast(dtype) if value.ty != ir.compute_type(dtype) else value
        k.store(buf, i, value)
        return k.build()

    key_of = ("random", kind, dtype.name)
    runtime.launch(key_of, build, [out.buffer, generator], info, invocations=n)


def _count(runtime: Runtime, generator: DeviceBuffer) -> None:
    """Count one draw in the device's generator state (before the draw reads it: the first draw
    after seeding is draw 1)."""

    def build() -> ir.Kernel:
        k = KernelBuilder("random_count", (1, 1, 1))
        words = k.buffer("state", int32, writable=True)
        k.store(words, 1, words[1] + 1)
        return k.build()

    runtime.launch(("random_count",), build, [generator], [1], invocations=1)


def _param_dtype(ty: str):
    return float64 if ty == "f64" else float32
