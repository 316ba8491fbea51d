"""Arithmetic and comparisons as elementwise kernels, with NumPy's semantics for every dtype
(ints: floor division and Python's remainder, zero divisors give 0; NaN wins max and min).
Reductions, scans and sorting are in ``reduce_ops``."""

from __future__ import annotations

from burnish.backend.numeric_ops import NumericOps
from burnish.dtype import DType, bool_
from burnish.jit import ir
from burnish.jit.kernels.elementwise import elementwise
from burnish.jit.tensor import JitTensor


def floor_div(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """Python's ``//`` on ints (0 for a zero divisor, as NumPy gives)."""
    safe = ir.select(b.eq(0), 1, b)
    q = a / safe
    adjust = (q * safe).ne(a).and_((a < 0).ne(safe < 0))
    return ir.select(b.eq(0), 0, ir.select(adjust, q - 1, q))


def remainder(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """Python's ``%``: the result takes the divisor's sign (0 for a zero int divisor)."""
    if ir.is_float(a.ty):
        r = ir.call("fmod", a, b)
        fix = r.ne(0.0).and_((r < 0.0).ne(b < 0.0))
        return ir.select(fix, r + b, r)
    safe = ir.select(b.eq(0), 1, b)
    r = a - (a / safe) * safe  # not %: NVIDIA's Vulkan driver got signed remainders wrong
    fix = r.ne(0).and_((r < 0).ne(safe < 0))
    return ir.select(b.eq(0), 0, ir.select(fix, r + safe, r))


def nan_max(a: ir.Expr, b: ir.Expr, larger: bool) -> ir.Expr:
    """The larger (or smaller) of ``a`` and ``b``; NaN wins for floats."""
    pick = (a > b) if larger else (a < b)
    if not ir.is_float(a.ty):
        return ir.select(pick, a, b)
    return ir.select(ir.call("isnan", a).or_(pick), a, b)


_ARITHMETIC = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
}


def _pairwise(fn):
    """The kernel body ``fn(values[0], values[1])``."""
    return lambda v, s: fn(v[0], v[1])


# Made once: add, sub and mul are the most frequent ops there are.
_PAIRWISE = {name: _pairwise(fn) for name, fn in _ARITHMETIC.items()}


class JitNumericOps(NumericOps):
    """Arithmetic and comparisons; scalar forms pass the scalar in the launch's metadata."""

    def _binary(self, name: str, fn, lhs: JitTensor, rhs: JitTensor,
                out_dtype: DType | None = None) -> JitTensor:
        return elementwise(name, lambda v, s: fn(v[0], v[1]), [lhs, rhs],
                           out_dtype or lhs.dtype)

    def _scalar(self, name: str, fn, x: JitTensor, value, dtype: DType) -> JitTensor:
        return elementwise(name + "_scalar", lambda v, s: fn(v[0], s[0]), [x], x.dtype,
                           scalars=[(value, x.dtype)])

    def add(self, lhs, rhs):
        return elementwise("add", _PAIRWISE["add"], [lhs, rhs], lhs.dtype)

    def sub(self, lhs, rhs):
        return elementwise("sub", _PAIRWISE["sub"], [lhs, rhs], lhs.dtype)

    def mul(self, lhs, rhs):
        return elementwise("mul", _PAIRWISE["mul"], [lhs, rhs], lhs.dtype)

    def div(self, lhs, rhs):
        if lhs.dtype.is_float:
            return self._binary("div", lambda a, b: a / b, lhs, rhs)
        return self._binary("floordiv", floor_div, lhs, rhs)

    def remainder(self, lhs, rhs):
        return self._binary("remainder", remainder, lhs, rhs)

    def pow(self, lhs, rhs):
        if lhs.dtype.is_float:
            return self._binary("pow", lambda a, b: ir.call("pow", a, b), lhs, rhs)
        return self._int_pow(lhs, rhs)

    def _int_pow(self, lhs: JitTensor, rhs: JitTensor) -> JitTensor:
        def fn(v, s, k):
            a, b = v
            result = k.let(ir.lift(1, a.ty), "r", a.ty)
            base = k.let(a, "base")
            exp = k.let(b, "e")
            # Exponentiation by squaring; negative exponents give 0 except for bases 1 and -1.
            with k.while_(exp > 0):
                with k.if_((exp & 1).eq(1)):
                    k.assign(result, result * base)
                k.assign(base, base * base)
                k.assign(exp, exp >> 1)
            odd = (b & 1).eq(1)
            negative = ir.select(a.eq(1), 1, ir.select(a.eq(-1), ir.select(odd, -1, 1, a.ty), 0))
            return ir.select(b < 0, negative, result)

        fn.uses_builder = True
        return elementwise("int_pow", fn, [lhs, rhs], lhs.dtype)

    def add_scalar(self, x, value, dtype):
        return self._scalar("add", _ARITHMETIC["add"], x, value, dtype)

    def sub_scalar(self, x, value, dtype):
        return self._scalar("sub", _ARITHMETIC["sub"], x, value, dtype)

    def mul_scalar(self, x, value, dtype):
        return self._scalar("mul", _ARITHMETIC["mul"], x, value, dtype)

    def div_scalar(self, x, value, dtype):
        if x.dtype.is_float:
            return self._scalar("div", lambda a, b: a / b, x, value, dtype)
        return self._scalar("floordiv", floor_div, x, value, dtype)

    def neg(self, x, dtype):
        return elementwise("neg", lambda v, s: -v[0], [x], x.dtype)

    def abs(self, x):
        if x.dtype.is_bool:
            return x
        return elementwise("abs", lambda v, s: ir.call("abs", v[0]), [x], x.dtype)

    def sign(self, x):
        def fn(v, s):
            a = v[0]
            signed = ir.select(a > 0, 1, ir.select(a < 0, -1, 0, a.ty))
            return ir.select(ir.call("isnan", a), a, signed) if ir.is_float(a.ty) else signed

        return elementwise("sign", fn, [x], x.dtype)

    def maximum(self, lhs, rhs):
        return self._binary("maximum", lambda a, b: nan_max(a, b, True), lhs, rhs)

    def minimum(self, lhs, rhs):
        return self._binary("minimum", lambda a, b: nan_max(a, b, False), lhs, rhs)

    def mul_add(self, x, a, b):
        return elementwise("mul_add", lambda v, s: v[0] * v[1] + v[2], [x, a, b], x.dtype)

    def clamp(self, x, low, high, dtype):
        def fn(v, s):
            out = v[0]
            at = 0
            if low is not None:
                out = ir.select(out < s[at], s[at], out)
                at += 1
            if high is not None:
                out = ir.select(out > s[at], s[at], out)
            return out  # NaN compares false both ways and stays

        scalars = [(b, x.dtype) for b in (low, high) if b is not None]
        name = f"clamp_{low is not None}_{high is not None}"
        return elementwise(name, fn, [x], x.dtype, scalars=scalars)

    # -- comparisons ----------------------------------------------------------------------------

    def greater(self, lhs, rhs):
        return self._binary("greater", lambda a, b: a > b, lhs, rhs, bool_)

    def greater_equal(self, lhs, rhs):
        return self._binary("greater_equal", lambda a, b: a >= b, lhs, rhs, bool_)

    def lower(self, lhs, rhs):
        return self._binary("lower", lambda a, b: a < b, lhs, rhs, bool_)

    def lower_equal(self, lhs, rhs):
        return self._binary("lower_equal", lambda a, b: a <= b, lhs, rhs, bool_)

    def equal(self, lhs, rhs):
        return self._binary("equal", lambda a, b: a.eq(b), lhs, rhs, bool_)

    def not_equal(self, lhs, rhs):
        return self._binary("not_equal", lambda a, b: a.ne(b), lhs, rhs, bool_)
