"""Float math as elementwise kernels (half floats compute in float32 and round once)."""

from __future__ import annotations

from burnish.backend.float_ops import FloatOps
from burnish.dtype import bool_
from burnish.jit import ir
from burnish.jit.kernels.elementwise import elementwise
from burnish.jit.tensor import JitTensor


def _unary(name: str):
    def op(self, x: JitTensor, dtype=None) -> JitTensor:
        return elementwise(name, lambda v, s: ir.call(name, v[0]), [x], x.dtype)

    op.__name__ = name
    op.__doc__ = f"``{name}(x)`` elementwise."
    return op


class JitFloatOps(FloatOps):
    exp = _unary("exp")
    log = _unary("log")
    log1p = _unary("log1p")
    sqrt = _unary("sqrt")
    sin = _unary("sin")
    cos = _unary("cos")
    tan = _unary("tan")
    tanh = _unary("tanh")
    erf = _unary("erf")
    floor = _unary("floor")
    ceil = _unary("ceil")
    round = _unary("round")

    def rsqrt(self, x, dtype):
        return elementwise("rsqrt", lambda v, s: 1.0 / ir.call("sqrt", v[0]), [x], x.dtype)

    def recip(self, x, dtype):
        return elementwise("recip", lambda v, s: 1.0 / v[0], [x], x.dtype)

    def is_nan(self, x):
        return elementwise("is_nan", lambda v, s: ir.call("isnan", v[0]), [x], bool_)

    def is_inf(self, x):
        return elementwise("is_inf", lambda v, s: ir.call("isinf", v[0]), [x], bool_)
