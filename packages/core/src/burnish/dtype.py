"""Element types: the dtypes burnish knows, their kinds, and the promotion rules between them."""

from __future__ import annotations

import functools
from enum import Enum
from typing import Any

import ml_dtypes
import numpy as np

from burnish.errors import DTypeError


class Kind(Enum):
    """What a dtype holds: a tensor's kind decides which operations it accepts."""

    FLOAT = "float"
    INT = "int"
    BOOL = "bool"


class DType:
    """One element type. Instances are singletons (compare with ``is`` or ``==``)."""

    __slots__ = ("name", "kind", "itemsize", "numpy", "signed", "_rank")

    def __init__(self, name: str, kind: Kind, numpy_dtype: np.dtype, signed: bool, rank: int):
        self.name = name
        self.kind = kind
        self.numpy = np.dtype(numpy_dtype)
        self.itemsize = self.numpy.itemsize
        self.signed = signed
        self._rank = rank

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        return self.kind is Kind.INT

    @property
    def is_bool(self) -> bool:
        return self.kind is Kind.BOOL

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (get_dtype, (self.name,))


float64 = DType("float64", Kind.FLOAT, np.float64, True, 9)
float32 = DType("float32", Kind.FLOAT, np.float32, True, 8)
float16 = DType("float16", Kind.FLOAT, np.float16, True, 7)
bfloat16 = DType("bfloat16", Kind.FLOAT, ml_dtypes.bfloat16, True, 7)
int64 = DType("int64", Kind.INT, np.int64, True, 5)
int32 = DType("int32", Kind.INT, np.int32, True, 4)
int16 = DType("int16", Kind.INT, np.int16, True, 3)
int8 = DType("int8", Kind.INT, np.int8, True, 2)
uint8 = DType("uint8", Kind.INT, np.uint8, False, 2)
bool_ = DType("bool", Kind.BOOL, np.bool_, False, 1)

ALL_DTYPES: tuple[DType, ...] = (
    float64, float32, float16, bfloat16, int64, int32, int16, int8, uint8, bool_,
)
FLOAT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_float)
INT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_int)

_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"bool_": bool_, "f64": float64, "f32": float32, "f16": float16, "bf16": bfloat16,
                 "i64": int64, "i32": int32, "i16": int16, "i8": int8, "u8": uint8})
_BY_NUMPY = {d.numpy: d for d in ALL_DTYPES}

#: The dtype a float tensor gets when none is asked for (Burn: FloatElem = f32).
DEFAULT_FLOAT = float32
#: The dtype an int tensor gets when none is asked for (Burn: IntElem = i64).
DEFAULT_INT = int64


def get_dtype(value: DType | str | np.dtype | type) -> DType:
    """The ``DType`` for a DType, its name (``"float32"``, ``"f32"``), a NumPy dtype or a type.

    Raises ``DTypeError`` naming the value when it is not a dtype burnish supports.
    """
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        found = _BY_NAME.get(value)
        if found is None:
            known = ", ".join(d.name for d in ALL_DTYPES)
            raise DTypeError(f"unknown dtype {value!r}; known: {known}")
        return found
    if value is bool:
        return bool_
    if value is float:
        return DEFAULT_FLOAT
    if value is int:
        return DEFAULT_INT
    try:
        npd = np.dtype(value)
    except TypeError:
        raise DTypeError(f"{value!r} is not a dtype") from None
    found = _BY_NUMPY.get(npd)
    if found is None:
        raise DTypeError(
            f"NumPy dtype {npd} has no burnish equivalent; "
            f"supported: {', '.join(d.name for d in ALL_DTYPES)}"
        )
    return found


@functools.cache
def promote(a: DType, b: DType) -> DType:
    """The dtype of a binary operation between tensors of dtypes ``a`` and ``b``.

    Rules (PyTorch's): bool < int < float by kind; within a kind the wider type wins; float16
    with bfloat16 gives float32; int with float gives the float; an unsigned and a signed int of
    the same width give the next wider signed int (uint8 with int8 gives int16).
    """
    if a is b:
        return a
    if a.kind is not b.kind:
        order = {Kind.BOOL: 0, Kind.INT: 1, Kind.FLOAT: 2}
        return a if order[a.kind] > order[b.kind] else b
    if a.kind is Kind.FLOAT:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a._rank >= b._rank else b
    if a.signed != b.signed:
        signed, unsigned = (a, b) if a.signed else (b, a)
        if signed.itemsize > unsigned.itemsize:
            return signed
        return {1: int16, 2: int32, 4: int64, 8: int64}[unsigned.itemsize]
    return a if a.itemsize >= b.itemsize else b


def scalar_dtype(tensor_dtype: DType, scalar: bool | int | float) -> DType:
    """The dtype of an operation between a tensor and a Python scalar.

    Scalars are weak (as in PyTorch and NumPy 2): they never widen the tensor's dtype, only its
    kind. ``int_tensor * 0.5`` is float (the default float), ``float16_tensor * 2.0`` stays float16.
    """
    if isinstance(scalar, bool):
        return tensor_dtype
    if isinstance(scalar, int):
        return DEFAULT_INT if tensor_dtype.is_bool else tensor_dtype
    if isinstance(scalar, float):
        return tensor_dtype if tensor_dtype.is_float else DEFAULT_FLOAT
    raise DTypeError(f"expected a Python bool, int or float scalar, got {type(scalar).__name__}")
