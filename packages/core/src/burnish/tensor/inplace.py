"""In-place arithmetic (``add_``, ``sub_``, ``mul_``, ``div_``): rebinding that may reuse memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from burnish.dtype import Kind, promote, scalar_dtype
from burnish.errors import DTypeError, ShapeError
from burnish.shape import broadcast_shapes, show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor.tensor import Tensor

_SCALARS = (bool, int, float)


class InPlaceMixin:
    """PyTorch-named in-place operators. ``x.add_(y)`` rebinds ``x`` to ``x + y`` and returns
    ``x``; the result keeps ``x``'s dtype and shape, so an operand that would promote the dtype
    or broadcast ``x`` to a larger shape raises (DTypeError, ShapeError). The Tensor object is
    rebound, so every name for that object sees the new value (some ops, such as a ``reshape``
    to the same shape, return their input object). Other Tensor objects keep their values even
    when they share ``x``'s memory: the backend writes into that memory only when it can prove
    that nothing else references it, so that an optimizer's moments update without
    allocating."""

    __slots__ = ()

    def add_(self, other: Tensor | bool | int | float) -> Tensor:
        """``self = self + other``, broadcasting ``other`` into ``self``'s shape."""
        return self._assign(other, "add_", "add_assign", "add_scalar_assign")

    def sub_(self, other: Tensor | bool | int | float) -> Tensor:
        """``self = self - other``, broadcasting ``other`` into ``self``'s shape."""
        return self._assign(other, "sub_", "sub_assign", None)

    def mul_(self, other: Tensor | bool | int | float) -> Tensor:
        """``self = self * other``, broadcasting ``other`` into ``self``'s shape."""
        return self._assign(other, "mul_", "mul_assign", "mul_scalar_assign")

    def div_(self, other: Tensor | bool | int | float) -> Tensor:
        """``self = self / other`` (true division, so ``self`` must be a float tensor)."""
        if not self._dtype.is_float:
            raise DTypeError(f"div_: true division makes a float, but the tensor is "
                             f"{self._dtype}; use .float() first")
        return self._assign(other, "div_", "div_assign", None)

    def _assign(self, other: Any, name: str, op: str, scalar_op: str | None) -> Tensor:
        dtype, device = self._dtype, self._device
        if dtype.kind is Kind.BOOL:
            raise DTypeError(f"{name} is not defined for bool tensors; cast with .int() or "
                             ".float() first")
        backend = device.backend
        if type(other) is _core.Tensor:
            _core.same_device(self, other, name)
            if promote(dtype, other._dtype) is not dtype:
                raise DTypeError(f"{name}: the result must keep the tensor's dtype {dtype}, but "
                                 f"an operand of {other._dtype} promotes it to "
                                 f"{promote(dtype, other._dtype)}")
            operand = other._prim if other._dtype is dtype else other.cast(dtype)._prim
            shape = self._prim.shape
            if operand.shape != shape and broadcast_shapes(shape, operand.shape) != shape:
                raise ShapeError(f"{name}: an operand of shape {show(operand.shape)} would "
                                 f"broadcast the tensor of shape {show(shape)} to a larger one")
            fn = getattr(backend, op)
        elif isinstance(other, _SCALARS):
            if scalar_dtype(dtype, other) is not dtype:
                raise DTypeError(f"{name}: the result must keep the tensor's dtype {dtype}, but "
                                 f"the scalar {other!r} makes it {scalar_dtype(dtype, other)}")
            if scalar_op is None:
                # No scalar form in the protocol: the scalar as a 0-d operand, as ``x - 2``
                # gives the same value.
                fn, operand = getattr(backend, op), backend.full((), other, dtype, device)
            else:
                fn, operand = getattr(backend, scalar_op), None
        else:
            raise TypeError(f"{name}: expected a Tensor or a Python scalar, got "
                            f"{type(other).__name__}")
        # Donate the primitive: this tensor lets go of it first, so that when no other tensor
        # shares it, the backend sees it unreferenced and may write into it. Plain calls, not
        # ``fn(prim, *args)``: an argument tuple would hold one more reference.
        prim = self._prim
        self._prim = None
        try:
            if operand is None:
                self._prim = fn(prim, other, dtype)
            else:
                self._prim = fn(prim, operand)
        except BaseException:
            self._prim = prim
            raise
        return self
