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

    __slots__ = ("name", "kind", "itemsize", "bits", "numpy", "signed", "_rank")

    def __init__(self, name: str, kind: Kind, numpy_dtype: Any, signed: bool, rank: int,
                 bits: int | None = None):
        self.name = name
        self.kind = kind
        self.numpy = np.dtype(numpy_dtype)
        #: Bytes one value takes in memory (int4 and uint4 hold one value per byte, as
        #: ml_dtypes does; records and packed kernels may store two per byte).
        self.itemsize = self.numpy.itemsize
        #: Bits of one value's encoding (4 for int4, 8 for float8, 8 x itemsize otherwise).
        self.bits = 8 * self.itemsize if bits is None else bits
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

# The dtypes of quantized models and ONNX files. float8 formats (OCP's e4m3fn and e5m2, and the
# "fnuz" variants with no negative zero and one NaN) rank below the half precisions, which hold
# every float8 value exactly; e8m0fnu (powers of two only, the scales of microscaling formats)
# does not fit a half precision. float4_e2m1fn, int4/uint4 and int2/uint2 take one byte per
# value in memory, as ml_dtypes holds them.
uint64 = DType("uint64", Kind.INT, np.uint64, False, 5)
uint32 = DType("uint32", Kind.INT, np.uint32, False, 4)
uint16 = DType("uint16", Kind.INT, np.uint16, False, 3)
float8_e4m3fn = DType("float8_e4m3fn", Kind.FLOAT, ml_dtypes.float8_e4m3fn, True, 6)
float8_e4m3fnuz = DType("float8_e4m3fnuz", Kind.FLOAT, ml_dtypes.float8_e4m3fnuz, True, 6)
float8_e5m2 = DType("float8_e5m2", Kind.FLOAT, ml_dtypes.float8_e5m2, True, 6)
float8_e5m2fnuz = DType("float8_e5m2fnuz", Kind.FLOAT, ml_dtypes.float8_e5m2fnuz, True, 6)
float8_e8m0fnu = DType("float8_e8m0fnu", Kind.FLOAT, ml_dtypes.float8_e8m0fnu, False, 6)
float4_e2m1fn = DType("float4_e2m1fn", Kind.FLOAT, ml_dtypes.float4_e2m1fn, True, 5, bits=4)
int4 = DType("int4", Kind.INT, ml_dtypes.int4, True, 1, bits=4)
uint4 = DType("uint4", Kind.INT, ml_dtypes.uint4, False, 1, bits=4)
int2 = DType("int2", Kind.INT, ml_dtypes.int2, True, 1, bits=2)
uint2 = DType("uint2", Kind.INT, ml_dtypes.uint2, False, 1, bits=2)

#: The dtypes every backend is expected to run and the general conformance cases cover.
STANDARD_DTYPES: tuple[DType, ...] = (
    float64, float32, float16, bfloat16, int64, int32, int16, int8, uint8, bool_,
)
#: The float8 formats.
FLOAT8_DTYPES: tuple[DType, ...] = (
    float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu,
)
#: The dtypes narrower than a byte (held one value per byte).
SUB_BYTE_DTYPES: tuple[DType, ...] = (float4_e2m1fn, int4, uint4, int2, uint2)
#: The dtypes of quantized models and ONNX files, which a backend may or may not list in
#: ``dtypes(device)``: wide unsigned ints, float8, float4 and 4- and 2-bit ints.
EXTENDED_DTYPES: tuple[DType, ...] = (uint16, uint32, uint64, *FLOAT8_DTYPES, *SUB_BYTE_DTYPES)
ALL_DTYPES: tuple[DType, ...] = STANDARD_DTYPES + EXTENDED_DTYPES
FLOAT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_float)
INT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_int)

_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"bool_": bool_, "f64": float64, "f32": float32, "f16": float16, "bf16": bfloat16,
                 "i64": int64, "i32": int32, "i16": int16, "i8": int8, "u8": uint8,
                 "u16": uint16, "u32": uint32, "u64": uint64, "i4": int4, "u4": uint4,
                 "i2": int2, "u2": uint2})
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


def finfo(dtype: DType | str) -> Any:
    """The float dtype's machine limits (``max``, ``min``, ``eps``, ``tiny``, ``bits``), from
    NumPy or, for bfloat16, float8 and float4, ml_dtypes. ``DTypeError`` for a non-float."""
    dtype = get_dtype(dtype)
    if not dtype.is_float:
        raise DTypeError(f"finfo needs a float dtype, got {dtype}")
    return ml_dtypes.finfo(dtype.numpy)


def iinfo(dtype: DType | str) -> Any:
    """The int dtype's range (``min``, ``max``, ``bits``), from NumPy or, for int4/uint4 and
    int2/uint2, ml_dtypes. ``DTypeError`` for a non-int."""
    dtype = get_dtype(dtype)
    if not dtype.is_int:
        raise DTypeError(f"iinfo needs an int dtype, got {dtype}")
    return ml_dtypes.iinfo(dtype.numpy)


@functools.cache
def promote(a: DType, b: DType) -> DType:
    """The dtype of a binary operation between tensors of dtypes ``a`` and ``b``.

    Rules (PyTorch's): bool < int < float by kind; within a kind the wider type wins; float16
    with bfloat16 gives float32; two different formats of 8 bits or fewer give float16, which holds
    all their values, except float8_e8m0fnu (powers of two up to 2**127), which only bfloat16 and
    wider hold (float32 when the other is narrower); int with float gives the float; an unsigned
    and a signed int give the narrowest signed int wider than the unsigned one (uint8 with int8
    gives int16, uint4 with int4 gives int8), and int64 for uint64 (no signed int holds every
    uint64).
    """
    if a is b:
        return a
    if a.kind is not b.kind:
        order = {Kind.BOOL: 0, Kind.INT: 1, Kind.FLOAT: 2}
        return a if order[a.kind] > order[b.kind] else b
    if a.kind is Kind.FLOAT:
        if {a, b} == {float16, bfloat16}:
            return float32
        if float8_e8m0fnu in (a, b):
            other = b if a is float8_e8m0fnu else a
            return other if other in (bfloat16, float32, float64) else float32
        if a.bits <= 8 and b.bits <= 8:
            return float16
        return a if a._rank >= b._rank else b
    if a.signed != b.signed:
        signed, unsigned = (a, b) if a.signed else (b, a)
        if signed.bits > unsigned.bits:
            return signed
        return {2: int4, 4: int8, 8: int16, 16: int32, 32: int64, 64: int64}[unsigned.bits]
    return a if a.bits >= b.bits else b


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
