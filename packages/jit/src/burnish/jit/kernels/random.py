"""Random numbers on the device: a counter-based generator (PCG's output hash of the element's
index, the seed and the draw number), so every element is drawn independently and a seed gives
the same values on every run and every launch split."""

from __future__ import annotations

import math

import numpy as np

from burnish.distribution import Distribution
from burnish.dtype import float32, float64
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import WORKGROUP, info_scalar, scalar_words
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


def fill(out: JitTensor, distribution: Distribution, seed: int, draw: int) -> None:
    """Fill the plain tensor ``out`` with draws from ``distribution``."""
    n = out.numel
    if n == 0:
        return
    dtype = out.dtype
    kind, a, b = distribution.kind, distribution.a, distribution.b
    ty = "f64" if dtype.name == "float64" else "f32"
    key = (seed * 0x9E3779B1 + draw * 0x85EBCA77) & 0xFFFFFFFF
    info = [n, key - (1 << 32) if key >= 1 << 31 else key]
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
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        key_word = k.info(1).bitcast("u32")
        step = 2 if ty == "f64" else 1
        pa, pb = info_scalar(k, 2, ty), info_scalar(k, 2 + step, ty)
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
                below = info_scalar(k, 2 + 2 * step, ty)
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
    out.runtime.launch(key_of, build, [out.buffer], info, invocations=n)


def _param_dtype(ty: str):
    return float64 if ty == "f64" else float32
