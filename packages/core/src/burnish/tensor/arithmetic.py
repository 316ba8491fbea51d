"""Tensor arithmetic: operators, elementwise math, comparisons, logic and matmul."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from burnish import amp as _amp
from burnish.dtype import DEFAULT_FLOAT, Kind, bool_, promote, scalar_dtype, uint8
from burnish.errors import DivisionByZeroError, DTypeError, ShapeError
from burnish.shape import broadcast_shapes, show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor.tensor import Tensor

_FLOAT, _INT, _BOOL = Kind.FLOAT, Kind.INT, Kind.BOOL
_NUMERIC = (_FLOAT, _INT)
_SCALARS = (bool, int, float)
Operand = Any  # a Tensor or a Python scalar
#: The float functions that compute in float32 under autocast (PyTorch's autocast list).
_AUTOCAST_FLOAT32 = frozenset({"exp", "log", "log1p", "rsqrt", "recip", "tan"})
_new = object.__new__


def _operator(op: str, doc: str) -> Any:
    """``add``, ``sub`` or ``mul``: two tensors of one dtype, device and shape go straight to
    the backend (the most frequent call of a model, and one whose every step shows on a GPU's
    tiny ops), everything else through ``_binary``'s checks and promotions."""

    def method(self: Tensor, other: Operand) -> Tensor:
        if type(other) is _core.Tensor:
            dtype, device = self._dtype, self._device
            if dtype is other._dtype and device is other._device and dtype.kind is not _BOOL:
                a, b = self._prim, other._prim
                if a.shape == b.shape:
                    out = _new(_core.Tensor)  # _core.make, without the call
                    out._prim = getattr(device.backend, op)(a, b)
                    out._device = device
                    out._dtype = dtype
                    return out
        return self._binary(other, op, op, op + "_scalar")

    method.__name__, method.__qualname__ = op, f"ArithmeticMixin.{op}"
    method.__doc__ = doc
    return method


class ArithmeticMixin:
    """Operators and elementwise math. Mixed dtypes promote (see ``burnish.dtype.promote``);
    Python scalars are weak: they never widen a tensor's dtype, only its kind."""

    __slots__ = ()

    # -- the arithmetic core --------------------------------------------------------------------

    def _binary(self, other: Operand, op: str, name: str, scalar_op: str | None = None) -> Tensor:
        if type(other) is _core.Tensor:
            dtype = self._dtype
            if dtype is other._dtype and self._device is other._device and dtype.kind is not _BOOL:
                a, b = self._prim, other._prim
                if a.shape != b.shape:
                    broadcast_shapes(a.shape, b.shape)
                return _core.make(getattr(self._device.backend, op)(a, b), self._device, dtype)
            a, b, dtype = _core.unify(self, other, name)
            _no_bool(dtype, name)
            if a.shape != b.shape:
                broadcast_shapes(a.shape, b.shape)
            return _core.make(getattr(self._device.backend, op)(a, b), self._device, dtype)
        if isinstance(other, _SCALARS):
            dtype = self._dtype
            if dtype.kind is not _FLOAT or type(other) is bool:
                dtype = scalar_dtype(dtype, other)
                _no_bool(dtype, name)
            x = self if dtype is self._dtype else self.cast(dtype)
            fn = getattr(self._device.backend, scalar_op or op + "_scalar")
            return _core.make(fn(x._prim, other, dtype), self._device, dtype)
        raise TypeError(f"{name}: expected a Tensor or a Python scalar, got {type(other).__name__}")

    def _reflected(self, other: Operand, op: str, name: str) -> Tensor:
        """``scalar OP tensor``: the scalar becomes a 0-d tensor on the same device."""
        if not isinstance(other, _SCALARS):
            return NotImplemented
        dtype = scalar_dtype(self._dtype, other)
        _no_bool(dtype, name)
        x = self if dtype is self._dtype else self.cast(dtype)
        backend = self._device.backend
        scalar = backend.full((), other, dtype, self._device)
        return _core.make(getattr(backend, op)(scalar, x._prim), self._device, dtype)

    add = _operator("add", "``self + other``, broadcast.")
    sub = _operator("sub", "``self - other``, broadcast.")
    mul = _operator("mul", "``self * other``, broadcast.")

    def mul_add(self, a: Tensor, b: Tensor) -> Tensor:
        """``self * a + b`` as one op (one kernel on the GPU backends), the three broadcast
        together; dtypes promote as ``self * a + b`` would (bool is refused)."""
        for name, operand in (("a", a), ("b", b)):
            if type(operand) is not _core.Tensor:
                raise TypeError(f"mul_add: {name} must be a Tensor, got "
                                f"{type(operand).__name__} (for a scalar, use * and +)")
            _core.same_device(self, operand, "mul_add")
        dtype = promote(promote(self._dtype, a._dtype), b._dtype)
        _no_bool(dtype, "mul_add")
        broadcast_shapes(broadcast_shapes(self._prim.shape, a._prim.shape), b._prim.shape)
        x, a, b = (t._prim if t._dtype is dtype else t.cast(dtype)._prim for t in (self, a, b))
        return _core.make(self._device.backend.mul_add(x, a, b), self._device, dtype)

    def div(self, other: Operand) -> Tensor:
        """True division ``self / other``: ints and bools become the default float first."""
        return self._as_float_for(other)._binary(other, "div", "div")

    def floor_div(self, other: Operand) -> Tensor:
        """``self // other``: floor of the quotient (exact for ints).

        An int division by zero raises ``DivisionByZeroError``, as PyTorch does on the CPU:
        always for a Python scalar divisor, for a tensor divisor where the backend keeps its
        values on the host (ndarray) or in debug mode (``BURNISH_DEBUG=1``); elsewhere its
        result is unspecified. Float division by zero gives inf or NaN."""
        if self._dtype.is_float or _is_float_operand(other):
            return self.div(other).floor()
        _check_divisor(self, other, "floor_div", "//")
        return self._binary(other, "div", "floor_div")

    def remainder(self, other: Operand) -> Tensor:
        """``self % other`` with Python's sign rule (the result has the divisor's sign).

        An int remainder by zero raises ``DivisionByZeroError`` where ``floor_div`` does."""
        if not (self._dtype.is_float or _is_float_operand(other)):
            _check_divisor(self, other, "remainder", "%")
        if isinstance(other, _SCALARS):
            return self._binary(_core_full_like(self, other), "remainder", "remainder")
        return self._binary(other, "remainder", "remainder")

    def pow(self, exponent: Operand) -> Tensor:
        """``self ** exponent``, with a tensor or a scalar exponent (float32 under autocast)."""
        if _amp.entered:
            return _amp.full(self)._binary(exponent, "pow", "pow")
        return self._binary(exponent, "pow", "pow")

    def powf(self, exponent: Operand) -> Tensor:
        """``self ** exponent`` computed in float (ints become the default float)."""
        return self.float().pow(exponent)

    def maximum(self, other: Operand) -> Tensor:
        """The elementwise larger of ``self`` and ``other`` (NaN wins); Burn's ``max_pair``."""
        return self._binary(_tensor_operand(self, other), "maximum", "maximum")

    def minimum(self, other: Operand) -> Tensor:
        """The elementwise smaller of ``self`` and ``other`` (NaN wins); Burn's ``min_pair``."""
        return self._binary(_tensor_operand(self, other), "minimum", "minimum")

    max_pair = maximum
    min_pair = minimum

    __add__ = add
    __sub__ = sub
    __mul__ = mul
    __truediv__ = div
    __floordiv__ = floor_div
    __mod__ = remainder
    __pow__ = pow

    def __radd__(self, other: Operand) -> Tensor:
        return self._reflected(other, "add", "add")

    def __rsub__(self, other: Operand) -> Tensor:
        return self._reflected(other, "sub", "sub")

    def __rmul__(self, other: Operand) -> Tensor:
        return self._reflected(other, "mul", "mul")

    def __rtruediv__(self, other: Operand) -> Tensor:
        return self._as_float_for(other)._reflected(other, "div", "div")

    def __rfloordiv__(self, other: Operand) -> Tensor:
        if self._dtype.is_float or isinstance(other, float):
            return self.__rtruediv__(other).floor()
        if isinstance(other, _SCALARS):
            _check_divisor(other, self, "floor_div", "//")
        return self._reflected(other, "div", "floor_div")

    def __rmod__(self, other: Operand) -> Tensor:
        if not (self._dtype.is_float or isinstance(other, float)) and isinstance(other, _SCALARS):
            _check_divisor(other, self, "remainder", "%")
        return self._reflected(other, "remainder", "remainder")

    def __rpow__(self, other: Operand) -> Tensor:
        return self._reflected(other, "pow", "pow")

    def _as_float_for(self, other: Operand) -> Tensor:
        if self._dtype.is_float or _is_float_operand(other):
            return self
        return self.cast(DEFAULT_FLOAT)

    # -- unary math -----------------------------------------------------------------------------

    def neg(self) -> Tensor:
        """``-self``."""
        _core.require_kind(self, _NUMERIC, "neg")
        return _core.make(self._device.backend.neg(self._prim, self._dtype), self._device,
                          self._dtype)

    __neg__ = neg

    def __pos__(self) -> Tensor:
        return self

    def abs(self) -> Tensor:
        """``|self|``."""
        return self._numeric_unary("abs")

    __abs__ = abs

    def sign(self) -> Tensor:
        """-1, 0 or 1 by sign (NaN stays NaN)."""
        return self._numeric_unary("sign")

    def _numeric_unary(self, op: str) -> Tensor:
        _core.require_kind(self, _NUMERIC, op)
        return _core.make(getattr(self._device.backend, op)(self._prim), self._device,
                          self._dtype)

    def _float_unary(self, op: str, with_dtype: bool = False) -> Tensor:
        x = self if self._dtype.kind is _FLOAT else self.cast(DEFAULT_FLOAT)
        if _amp.entered and op in _AUTOCAST_FLOAT32:
            x = _amp.full(x)
        fn = getattr(x._device.backend, op)
        prim = fn(x._prim, x._dtype) if with_dtype else fn(x._prim)
        return _core.make(prim, x._device, x._dtype)

    def exp(self) -> Tensor:
        """``e ** self`` (ints become the default float, as for every float function)."""
        return self._float_unary("exp")

    def log(self) -> Tensor:
        """Natural logarithm."""
        return self._float_unary("log")

    def log1p(self) -> Tensor:
        """``log(1 + self)``, accurate near 0."""
        return self._float_unary("log1p", True)

    def sqrt(self) -> Tensor:
        """Square root."""
        return self._float_unary("sqrt")

    def rsqrt(self) -> Tensor:
        """``1 / sqrt(self)``."""
        return self._float_unary("rsqrt", True)

    def recip(self) -> Tensor:
        """``1 / self``."""
        return self._float_unary("recip", True)

    def sin(self) -> Tensor:
        """Sine."""
        return self._float_unary("sin")

    def cos(self) -> Tensor:
        """Cosine."""
        return self._float_unary("cos")

    def tan(self) -> Tensor:
        """Tangent."""
        return self._float_unary("tan")

    def tanh(self) -> Tensor:
        """Hyperbolic tangent."""
        return self._float_unary("tanh")

    def erf(self) -> Tensor:
        """The error function."""
        return self._float_unary("erf")

    def sigmoid(self) -> Tensor:
        """``1 / (1 + exp(-self))``."""
        return self._float_unary("sigmoid", True)

    def floor(self) -> Tensor:
        """Round down (ints are returned unchanged)."""
        return self if self._dtype.kind is _INT else self._float_unary("floor")

    def ceil(self) -> Tensor:
        """Round up (ints are returned unchanged)."""
        return self if self._dtype.kind is _INT else self._float_unary("ceil")

    def round(self) -> Tensor:
        """Round to nearest, halves to even (ints are returned unchanged)."""
        return self if self._dtype.kind is _INT else self._float_unary("round")

    def clamp(self, min: bool | int | float | None = None,
              max: bool | int | float | None = None) -> Tensor:
        """Limit values to ``[min, max]``; either bound may be ``None``. NaN stays NaN."""
        _core.require_kind(self, _NUMERIC, "clamp")
        if min is None and max is None:
            raise ValueError("clamp needs min, max or both")
        if min is not None and max is not None and min > max:
            raise ValueError(f"clamp: min ({min}) is greater than max ({max})")
        dtype = self._dtype
        for bound in (min, max):
            if bound is not None:
                dtype = promote(dtype, scalar_dtype(self._dtype, bound))
        x = self.cast(dtype)
        prim = x._device.backend.clamp(x._prim, min, max, dtype)
        return _core.make(prim, x._device, dtype)

    def clamp_min(self, min: bool | int | float) -> Tensor:
        """``max(self, min)``."""
        return self.clamp(min, None)

    def clamp_max(self, max: bool | int | float) -> Tensor:
        """``min(self, max)``."""
        return self.clamp(None, max)

    def is_nan(self) -> Tensor:
        """Bool: the value is NaN (never for ints and bools)."""
        if self._dtype.kind is not _FLOAT:
            return _core.Tensor.zeros(self.shape, device=self._device, dtype=bool_)
        return _core.make(self._device.backend.is_nan(self._prim), self._device, bool_)

    def is_inf(self) -> Tensor:
        """Bool: the value is +inf or -inf (never for ints and bools)."""
        if self._dtype.kind is not _FLOAT:
            return _core.Tensor.zeros(self.shape, device=self._device, dtype=bool_)
        return _core.make(self._device.backend.is_inf(self._prim), self._device, bool_)

    def is_finite(self) -> Tensor:
        """Bool: neither NaN nor infinite."""
        return (self.is_nan() | self.is_inf()).logical_not()

    # -- comparisons ----------------------------------------------------------------------------

    def _compare(self, other: Operand, op: str) -> Tensor:
        if isinstance(other, _SCALARS):
            other = _core_full_like(self, other)
        elif type(other) is not _core.Tensor:
            raise TypeError(f"{op}: expected a Tensor or a Python scalar, got "
                            f"{type(other).__name__}")
        a, b, dtype = _core.unify(self, other, op)
        if op not in ("equal", "not_equal") and dtype.kind is _BOOL:
            a = self._device.backend.cast(a, bool_, uint8)
            b = self._device.backend.cast(b, bool_, uint8)
        if a.shape != b.shape:
            broadcast_shapes(a.shape, b.shape)
        return _core.make(getattr(self._device.backend, op)(a, b), self._device, bool_)

    def equal(self, other: Operand) -> Tensor:
        """Bool: ``self == other`` elementwise."""
        return self._compare(other, "equal")

    def not_equal(self, other: Operand) -> Tensor:
        """Bool: ``self != other`` elementwise."""
        return self._compare(other, "not_equal")

    def greater(self, other: Operand) -> Tensor:
        """Bool: ``self > other`` elementwise."""
        return self._compare(other, "greater")

    def greater_equal(self, other: Operand) -> Tensor:
        """Bool: ``self >= other`` elementwise."""
        return self._compare(other, "greater_equal")

    def lower(self, other: Operand) -> Tensor:
        """Bool: ``self < other`` elementwise."""
        return self._compare(other, "lower")

    def lower_equal(self, other: Operand) -> Tensor:
        """Bool: ``self <= other`` elementwise."""
        return self._compare(other, "lower_equal")

    def __eq__(self, other: object) -> Tensor:  # type: ignore[override]
        if not isinstance(other, (_core.Tensor, *_SCALARS)):
            return NotImplemented
        return self._compare(other, "equal")

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        if not isinstance(other, (_core.Tensor, *_SCALARS)):
            return NotImplemented
        return self._compare(other, "not_equal")

    __gt__ = greater
    __ge__ = greater_equal
    __lt__ = lower
    __le__ = lower_equal

    def all_close(self, other: Tensor, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
        """True when ``|self - other| <= atol + rtol * |other|`` everywhere (NaN never matches)."""
        a, b = self.float(), other.float()
        return bool(((a - b).abs() <= (b.abs() * rtol + atol)).all().item())

    # -- logic ----------------------------------------------------------------------------------

    def _logic(self, other: Operand, logical: str, bitwise: str) -> Tensor:
        if isinstance(other, _SCALARS):
            other = _core_full_like(self, other)
        elif type(other) is not _core.Tensor:
            return NotImplemented
        a, b, dtype = _core.unify(self, other, bitwise)
        if dtype.kind is _FLOAT:
            raise DTypeError(f"{bitwise} needs bool or int tensors, got {self._dtype} and "
                             f"{other._dtype}")
        if a.shape != b.shape:
            broadcast_shapes(a.shape, b.shape)
        op = logical if dtype.kind is _BOOL else bitwise
        return _core.make(getattr(self._device.backend, op)(a, b), self._device, dtype)

    def logical_and(self, other: Operand) -> Tensor:
        """``self and other`` on bools (``&``; bitwise and on ints)."""
        return self._logic(other, "logical_and", "bitwise_and")

    def logical_or(self, other: Operand) -> Tensor:
        """``self or other`` on bools (``|``; bitwise or on ints)."""
        return self._logic(other, "logical_or", "bitwise_or")

    def logical_xor(self, other: Operand) -> Tensor:
        """``self != other`` on bools (``^``; bitwise xor on ints)."""
        return self._logic(other, "logical_xor", "bitwise_xor")

    def logical_not(self) -> Tensor:
        """``not self`` on bools (``~``; bitwise not on ints)."""
        if self._dtype.kind is _FLOAT:
            raise DTypeError(f"logical_not needs a bool or int tensor, got {self._dtype}")
        op = "logical_not" if self._dtype.kind is _BOOL else "bitwise_not"
        return _core.make(getattr(self._device.backend, op)(self._prim), self._device,
                          self._dtype)

    bitwise_and = logical_and
    bitwise_or = logical_or
    bitwise_xor = logical_xor
    bitwise_not = logical_not
    bool_and = logical_and
    bool_or = logical_or
    bool_not = logical_not
    __and__ = __rand__ = logical_and
    __or__ = __ror__ = logical_or
    __xor__ = __rxor__ = logical_xor
    __invert__ = logical_not

    # -- matrix product -------------------------------------------------------------------------

    def matmul(self, other: Tensor) -> Tensor:
        """Matrix product. 2-d and up: over the last two dims, batch dims broadcast; a 1-d
        operand is a vector (as in NumPy and PyTorch). A ``QuantizedTensor`` operand gives
        ``burnish.quantization.matmul``."""
        if type(other) is not _core.Tensor:
            from burnish.quantization import QuantizedTensor, matmul

            if isinstance(other, QuantizedTensor):
                return matmul(self, other)
            raise TypeError(f"matmul: expected a Tensor, got {type(other).__name__}")
        if _amp.entered and (low := _amp.state.dtype) is not None:
            self, other = _amp.low(self, low), _amp.low(other, low)
        a, b, dtype = _core.unify(self, other, "matmul")
        _no_bool(dtype, "matmul")
        sa, sb = a.shape, b.shape
        if not sa or not sb:
            raise ShapeError(f"matmul needs tensors of at least 1 dim, got {show(sa)} @ {show(sb)}")
        backend = self._device.backend
        if len(sa) == 1:
            a = backend.reshape(a, (1, sa[0]))
        if len(sb) == 1:
            b = backend.reshape(b, (sb[0], 1))
        if a.shape[-1] != b.shape[-2]:
            raise ShapeError(f"matmul: {show(sa)} @ {show(sb)}: inner dims differ "
                             f"({a.shape[-1]} vs {b.shape[-2]})")
        try:
            batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ShapeError:
            raise ShapeError(f"matmul: {show(sa)} @ {show(sb)}: the batch dims "
                             f"{show(a.shape[:-2])} and {show(b.shape[:-2])} cannot be broadcast "
                             "together") from None
        out = backend.matmul(a, b)
        if len(sa) == 1 or len(sb) == 1:
            shape = batch + ((sa[-2],) if len(sa) > 1 else ()) + ((sb[-1],) if len(sb) > 1 else ())
            out = backend.reshape(out, shape)
        return _core.make(out, self._device, dtype)

    __matmul__ = matmul

    def __rmatmul__(self, other: Tensor) -> Tensor:
        return other.matmul(self)


def _no_bool(dtype, name: str) -> None:
    if dtype.kind is _BOOL:
        raise DTypeError(f"{name} is not defined for bool tensors; cast with .int() or .float(), "
                         "or use logical_and/logical_or")


def _check_divisor(dividend: Operand, divisor: Operand, name: str, symbol: str) -> None:
    """Raise DivisionByZeroError when an int ``//`` or ``%`` divides by zero: a scalar divisor
    always, a tensor divisor where its values can be read for free (or in debug mode)."""
    if type(divisor) is not _core.Tensor:
        if isinstance(divisor, _SCALARS) and divisor == 0:
            raise DivisionByZeroError(
                f"{name}: integer division by zero: {_describe(dividend)} {symbol} {divisor!r}; "
                "cast to float first for inf/NaN results"
            )
        return
    if divisor._dtype.kind is _FLOAT or not _core.checks_values(divisor._device):
        return
    from burnish.replay import guard

    message = (f"{name}: integer division by zero: {_describe(dividend)} {symbol} "
               f"{_describe(divisor)}, whose value{{at}} is 0; cast to float first for inf/NaN "
               "results")
    guard(functools.partial(_no_zero, message=message), divisor, key=message)


def _no_zero(values: np.ndarray, message: str) -> None:
    """Raise DivisionByZeroError (``message``, with the first zero's index) where ``values``
    holds a zero."""
    if values.all():
        return
    where = [int(i) for i in np.argwhere(values == 0)[0]]
    raise DivisionByZeroError(message.format(at=f" at index {where}" if where else ""))


def _describe(operand: Operand) -> str:
    if type(operand) is _core.Tensor:
        return f"{operand._dtype} tensor {show(operand._prim.shape)}"
    return repr(operand)


def _is_float_operand(other: Operand) -> bool:
    if type(other) is _core.Tensor:
        return other._dtype.kind is _FLOAT
    return isinstance(other, float)


def _core_full_like(tensor: Tensor, value: bool | int | float) -> Tensor:
    """A 0-d tensor of ``value`` on ``tensor``'s device, in the dtype the pair promotes to."""
    dtype = scalar_dtype(tensor._dtype, value)
    backend = tensor._device.backend
    return _core.make(backend.full((), value, dtype, tensor._device), tensor._device, dtype)


def _tensor_operand(tensor: Tensor, other: Operand) -> Tensor:
    return _core_full_like(tensor, other) if isinstance(other, _SCALARS) else other

