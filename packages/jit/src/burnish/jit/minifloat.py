"""The float8 and float4 formats as kernel IR: each format's code (a ``u32`` holding its byte)
decoded to ``f32`` and ``f32`` encoded to the nearest code, with ml_dtypes' rounding, overflow
and NaN rules, so every code generator renders the same conversion.

Encoding rounds to nearest, ties to even, on the float32 bits: a value at or above the format's
smallest normal keeps the format's mantissa bits of its float32 mantissa (the dropped bits
decide the rounding, a carry moves into the exponent as it should); one below it is a multiple
of the smallest subnormal, found by ``round`` of the exactly scaled value. A value past the
largest finite one becomes NaN (``e4m3fn`` and the ``fnuz`` formats, which have no infinity),
infinity (``e5m2``) or the largest value (``float4_e2m1fn``, which has neither).
"""

from __future__ import annotations

from dataclasses import dataclass

from burnish.jit import ir


@dataclass(frozen=True)
class Format:
    """One small float format: ``bits`` in all, a sign bit (but ``e8m0fnu``), ``exponent`` and
    ``mantissa`` bits, the exponent ``bias``; ``overflow`` says what a too-large value becomes
    (``"nan"``, ``"inf"`` or ``"saturate"``); ``fnuz`` formats have one NaN (the code of
    negative zero, ``0x80``) and no negative zero."""

    bits: int
    exponent: int
    mantissa: int
    bias: int
    overflow: str
    fnuz: bool = False

    @property
    def magnitude_mask(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @property
    def largest(self) -> int:
        """The magnitude code of the largest finite value."""
        if self.overflow == "nan" and not self.fnuz:  # e4m3fn: all ones is NaN
            return self.magnitude_mask - 1
        if self.overflow == "inf":  # e5m2: the top exponent holds infinity and NaN
            return ((1 << self.exponent) - 1 << self.mantissa) - 1
        return self.magnitude_mask


#: The formats by burnish dtype name (``float8_e8m0fnu``, unsigned powers of two, apart).
FORMATS = {
    "float8_e4m3fn": Format(8, 4, 3, 7, "nan"),
    "float8_e4m3fnuz": Format(8, 4, 3, 8, "nan", fnuz=True),
    "float8_e5m2": Format(8, 5, 2, 15, "inf"),
    "float8_e5m2fnuz": Format(8, 5, 2, 16, "nan", fnuz=True),
    "float4_e2m1fn": Format(4, 2, 1, 1, "saturate"),
}
#: Every dtype this module converts.
DTYPES = frozenset({*FORMATS, "float8_e8m0fnu"})

_U32 = "u32"
_F32 = "f32"


def _u(value: int) -> ir.Expr:
    return ir.const(value, _U32)


def decode(code: ir.Expr, dtype: str) -> ir.Expr:
    """The ``f32`` value of ``code`` (``u32``), a code of small float ``dtype``."""
    nan = ir.const(float("nan"), _F32)
    if dtype == "float8_e8m0fnu":  # 2**(code - 127); code 0 is float32's subnormal 2**-127
        bits = ir.select(code.eq(0), _u(0x400000), code << 23)
        return ir.select(code.eq(255), nan, bits.bitcast(_F32))
    f = FORMATS[dtype]
    magnitude = code & f.magnitude_mask
    exponent = magnitude >> f.mantissa
    mantissa = magnitude & ((1 << f.mantissa) - 1)
    normal = (((exponent + (127 - f.bias)) << 23) | (mantissa << (23 - f.mantissa)))
    subnormal = mantissa.cast(_F32) * 2.0 ** (1 - f.bias - f.mantissa)
    value = ir.select(exponent.eq(0), subnormal, normal.bitcast(_F32))
    if f.overflow == "inf":
        top = (1 << f.exponent) - 1 << f.mantissa
        value = ir.select(magnitude >= top, ir.select(magnitude.eq(top), ir.const(
            float("inf"), _F32), nan), value)
    elif f.overflow == "nan" and not f.fnuz:
        value = ir.select(magnitude.eq(f.magnitude_mask), nan, value)
    # The sign goes in as a bit: negating a NaN constant gives a positive NaN where a compiler
    # folds it (NVRTC does), and ml_dtypes keeps the sign of NaN.
    sign = (code >> (f.bits - 1)) << 31
    signed = (value.bitcast(_U32) | sign).bitcast(_F32)
    if f.fnuz:
        return ir.select(code.eq(0x80), nan, signed)
    return signed


def encode(x: ir.Expr, dtype: str) -> ir.Expr:
    """The code (``u32``) of small float ``dtype`` nearest to ``x`` (``f32``)."""
    bits = x.bitcast(_U32)
    if dtype == "float8_e8m0fnu":
        # No mantissa, no sign, no zero: the nearest power of two, halfway cases rounding up as
        # ml_dtypes does (below float32's smallest normal, anything above 2**-127 gives
        # 2**-126, as there); zero, negatives, infinity and NaN are NaN. Tested on the bits: a
        # device that flushes subnormals (NVRTC's kernels did) would take 2**-127 for zero.
        code = ir.select(bits < 0x800000, ir.select(bits > 0x400000, _u(1), _u(0)),
                         (bits + 0x400000) >> 23)
        positive = bits.ne(0).and_(bits < 0x80000000)
        return ir.select(positive.and_(code < 255), code, _u(255))
    f = FORMATS[dtype]
    shift = 23 - f.mantissa
    absolute = bits & 0x7FFFFFFF
    magnitude_f32 = absolute.bitcast(_F32)
    normal = ((absolute + ((1 << (shift - 1)) - 1) + ((absolute >> shift) & 1)) >> shift) - (
        (127 - f.bias) << f.mantissa)
    subnormal = ir.call("round", magnitude_f32 * 2.0 ** (f.bias - 1 + f.mantissa)).cast(_U32)
    magnitude = ir.select(magnitude_f32 < 2.0 ** (1 - f.bias), subnormal, normal)
    too_large = {"nan": 0x80 if f.fnuz else f.magnitude_mask, "saturate": f.largest,
                 "inf": f.largest + 1}[f.overflow]
    magnitude = ir.select(magnitude > f.largest, _u(too_large), magnitude)
    sign = bits >> 31
    isnan = ir.call("isnan", x)
    if f.fnuz:  # one NaN, 0x80, and zero is unsigned
        plain = ir.select(magnitude.eq(0).or_(magnitude.eq(0x80)), magnitude,
                          magnitude | (sign << 7))
        return ir.select(isnan, _u(0x80), plain)
    top = f.bits - 1
    if f.overflow == "saturate":  # no NaN: ml_dtypes gives the zero of the opposite sign
        return ir.select(isnan, (sign ^ 1) << top, magnitude | (sign << top))
    nan = f.magnitude_mask if f.overflow == "nan" else f.largest + 3  # e5m2: 0x7e
    return ir.select(isnan, _u(nan), magnitude) | (sign << top)
