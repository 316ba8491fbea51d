"""ONNX's elementwise operators on burnish tensors, where they differ from the Tensor API's
own (integer division, Pow's dtype, fmod, inverse trigonometry, variadic Max/Min/Sum/Mean)."""

from __future__ import annotations

import math
from functools import reduce

import numpy as np

import burnish as bn
from burnish import Tensor
from burnish.onnx.ops.core import host


def _is_int(x: Tensor) -> bool:
    return x.kind is bn.Kind.INT


def _trunc(x: Tensor) -> Tensor:
    return x.sign() * x.abs().floor()


def div(a: Tensor, b: Tensor) -> Tensor:
    """ONNX Div: true division for floats, truncation toward zero for ints."""
    if _is_int(a) and _is_int(b):
        return _trunc(a.double() / b.double()).cast(a.dtype)
    return a / b


def pow(a: Tensor, b: Tensor | float) -> Tensor:
    """ONNX Pow: the result has the base's dtype, whatever the exponent's."""
    if isinstance(b, Tensor):
        if _is_int(a) or a.kind is bn.Kind.BOOL:
            return (a.double() ** b.double()).round().cast(a.dtype)
        return a ** b.cast(a.dtype)
    if _is_int(a):
        return (a.double() ** b).round().cast(a.dtype)
    return a ** b


def mod(a: Tensor, b: Tensor, fmod: int = 0) -> Tensor:
    """ONNX Mod: the divisor's sign (``fmod=0``, Python's ``%``) or the dividend's (``fmod=1``,
    C's ``fmod``)."""
    if not fmod:
        return a % b
    if _is_int(a):
        return a - b * _trunc(a.double() / b.double()).cast(a.dtype)
    return a - b * _trunc(a / b)


def maximum(*tensors: Tensor) -> Tensor:
    """ONNX Max of any number of inputs, broadcast."""
    return reduce(lambda x, y: x.maximum(y), tensors)


def minimum(*tensors: Tensor) -> Tensor:
    """ONNX Min of any number of inputs, broadcast."""
    return reduce(lambda x, y: x.minimum(y), tensors)


def total(*tensors: Tensor) -> Tensor:
    """ONNX Sum of any number of inputs, broadcast."""
    return reduce(lambda x, y: x + y, tensors)


def mean(*tensors: Tensor) -> Tensor:
    """ONNX Mean of any number of inputs, broadcast."""
    return total(*tensors) / len(tensors)


def _powers_of_two(shift: Tensor) -> Tensor:
    """``2 ** shift`` for int64 shifts in ``[0, 31]``, looked up in a table."""
    table = Tensor.from_data(np.array([1 << k for k in range(32)], np.int64), device=shift.device)
    return table.select(0, shift.reshape([-1])).reshape(list(shift.shape))


def bit_shift(x: Tensor, y: Tensor, direction: str) -> Tensor:
    """ONNX BitShift: left shifts drop the bits shifted out (two's complement wrapping for
    signed ints), right shifts are arithmetic for signed ints; a shift that is negative or
    not below the bit width gives 0 (-1 for a negative value shifted right)."""
    bits = 8 * x.dtype.itemsize
    signed = x.dtype.name.startswith("int")
    wide = x.cast(bn.int64)
    shift = y.cast(bn.int64)
    valid = (shift >= 0) & (shift < bits)
    shift = bn.where(valid, shift, shift.zeros_like())
    # Two factors below 2**32 each, so that no factor overflows int64 (2**63 would).
    low = shift // 2
    high, low = _powers_of_two(shift - low), _powers_of_two(low)
    if direction == "LEFT":
        out = wide * low * high
        if bits < 64:
            out = out % (1 << bits)
            if signed:
                out = bn.where(out >= 1 << (bits - 1), out - (1 << bits), out)
        outside = out.zeros_like()
    else:
        out = wide // low // high
        outside = bn.where(wide < 0, wide.ones_like() * -1, wide.zeros_like()) if signed \
            else wide.zeros_like()
    return bn.where(valid, out, outside).cast(x.dtype)


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """ONNX Elu: ``alpha * (exp(x) - 1)`` below 0, ``x`` above; float16 and bfloat16 are
    computed in float32 and rounded once, as ONNX's reference does."""
    wide = x.cast(bn.float32) if x.dtype in (bn.float16, bn.bfloat16) else x
    return bn.where(wide < 0, (wide.exp() - 1) * alpha, wide).cast(x.dtype)


def sinh(x: Tensor) -> Tensor:
    return (x.exp() - (-x).exp()) / 2


def cosh(x: Tensor) -> Tensor:
    return (x.exp() + (-x).exp()) / 2


def asinh(x: Tensor) -> Tensor:
    return (x + (x * x + 1).sqrt()).log()


def acosh(x: Tensor) -> Tensor:
    return (x + (x * x - 1).sqrt()).log()


def atanh(x: Tensor) -> Tensor:
    return ((1 + x) / (1 - x)).log() / 2


def atan(x: Tensor) -> Tensor:
    """arctan from the Tensor API's ops: ``atan(1/a) = pi/2 - atan(a)`` for ``|x| > 1``, the
    half-angle formula, then the Taylor series (error below 1e-9)."""
    a = x.abs()
    outside = a > 1
    t = bn.where(outside, 1 / a.clamp_min(1e-30), a)
    u = t / (1 + (1 + t * t).sqrt())
    u2 = u * u
    series = u.zeros_like()
    for k in reversed(range(10)):
        series = series * u2 + ((-1) ** k) / (2 * k + 1)
    angle = 2 * u * series
    angle = bn.where(outside, math.pi / 2 - angle, angle)
    return angle * x.sign()


def asin(x: Tensor) -> Tensor:
    return atan(x / (1 - x * x).sqrt().clamp_min(1e-30)) * ((x.abs() < 1).float()) + \
        (x.abs() >= 1).float() * x.sign() * (math.pi / 2)


def acos(x: Tensor) -> Tensor:
    return math.pi / 2 - asin(x)


def is_inf(x: Tensor, detect_negative: int = 1, detect_positive: int = 1) -> Tensor:
    found = x.is_inf()
    if not detect_negative:
        found = found & (x > 0)
    if not detect_positive:
        found = found & (x < 0)
    return found


def sign(x: Tensor) -> Tensor:
    return x.sign()


def clip(x: Tensor, low: Tensor | None = None, high: Tensor | None = None) -> Tensor:
    """ONNX Clip: ``min(max(x, low), high)`` with either bound optional."""
    if low is not None:
        x = x.maximum(low.cast(x.dtype))
    if high is not None:
        x = x.minimum(high.cast(x.dtype))
    return x


def where(condition: Tensor, a: Tensor, b: Tensor) -> Tensor:
    return bn.where(condition, a, b)


def shrink(x: Tensor, bias: float = 0.0, lambd: float = 0.5) -> Tensor:
    out = bn.where(x < -lambd, x + bias, bn.where(x > lambd, x - bias, x.zeros_like()))
    return out.cast(x.dtype)


def erf(x: Tensor) -> Tensor:
    return x.erf()


def bitwise_not(x: Tensor) -> Tensor:
    return ~x


def nonzero(x: Tensor) -> Tensor:
    """ONNX NonZero: the indices of the non-zero elements, ``[rank, count]`` int64 (the count
    depends on the data, so it is read on the host)."""
    indices = host(x).nonzero()

    return Tensor.from_data(np.array(indices, dtype=np.int64).reshape(len(indices), -1),
                            device=x.device)
