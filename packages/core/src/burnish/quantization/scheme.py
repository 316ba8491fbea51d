"""Quantization schemes: which integers hold the values, how many values share a scale, and
whether zero is pinned (symmetric) or shifted (affine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from burnish.dtype import DType, float16, float32, get_dtype, int8, uint8
from burnish.errors import DTypeError, ShapeError

#: The integer types a quantized tensor can hold, with their ranges ``(qmin, qmax)``.
VALUE_RANGES: dict[str, tuple[int, int]] = {"int8": (-128, 127), "uint8": (0, 255),
                                            "int4": (-8, 7)}
#: The storage dtype of each value type (int4 values are packed two to a uint8 byte).
STORAGE: dict[str, DType] = {"int8": int8, "uint8": uint8, "int4": uint8}
#: The dtype zero points are stored in (they lie in the value type's range).
ZERO_POINT_DTYPE: dict[str, DType] = {"int8": int8, "uint8": uint8, "int4": int8}
MODES = ("symmetric", "affine")
SCALE_DTYPES = (float32, float16)


@dataclass(frozen=True)
class PerTensor:
    """One scale (and zero point) for the whole tensor; ``scales`` is 0-d."""

    def describe(self) -> str:
        return "per tensor"


@dataclass(frozen=True)
class PerChannel:
    """One scale per index of ``axis`` (a linear weight's output features, a conv weight's
    output channels); ``scales`` is 1-d, of the size of that dim. A negative axis counts from
    the end."""

    axis: int = 0

    def describe(self) -> str:
        return f"per channel along axis {self.axis}"


@dataclass(frozen=True)
class PerBlock:
    """One scale per ``size`` consecutive values along ``axis`` (the last dim by default; the
    size must divide that dim); ``scales`` has the tensor's shape with that dim divided by
    ``size``. A linear weight ``[d_input, d_output]`` takes ``axis=0``: blocks along the dim
    its product sums over, as group-wise quantization of language models does."""

    size: int = 32
    axis: int = -1

    def __post_init__(self) -> None:
        if type(self.size) is not int or self.size < 1:
            raise ShapeError(f"a block size is a positive int, got {self.size!r}")

    def describe(self) -> str:
        where = "" if self.axis == -1 else f" along axis {self.axis}"
        return f"per block of {self.size}{where}"


Granularity = PerTensor | PerChannel | PerBlock


@dataclass(frozen=True)
class QuantScheme:
    """How a float tensor becomes integers (Burn's ``QuantScheme``).

    ``value``: ``"int8"`` (-128..127), ``"uint8"`` (0..255) or ``"int4"`` (-8..7, stored two
    values a byte in row-major order, the even index in the low nibble). ``granularity``:
    ``PerTensor()``, ``PerChannel(axis)`` or ``PerBlock(size, axis)``. ``mode``: ``"symmetric"``
    (zero maps to the integer zero: the zero point is 0, or 128 for uint8, and scale is
    ``max|x| / L`` with ``L`` 127 for 8 bits and 7 for int4, the values clamped to
    ``zero_point ± L``, so that ``-x`` quantizes to ``-q``) or
    ``"affine"`` (the range ``[min(x, 0), max(x, 0)]`` spans the whole integer range: scale is
    ``(max - min) / (qmax - qmin)``, the zero point ``qmin - round(min / scale)``).
    ``scale_dtype``: float32 or float16 scales.

    Rounding, for every backend: ``q = clamp(round(x / scale) + zero_point, qmin, qmax)``
    with ``round`` to the nearest integer, halves to even (NumPy's ``rint``, PyTorch's
    ``round``), computed in float32 with the scale as stored (a float16 scale is rounded
    first); ``dequantize`` gives ``(q - zero_point) * scale``. A group whose values are all
    zero gets scale 1. NaN and infinity have no integer: quantizing them gives unspecified
    values (backends do not read tensors to check).
    """

    value: str = "int8"
    granularity: Granularity = field(default_factory=PerTensor)
    mode: str = "symmetric"
    scale_dtype: DType = float32

    def __post_init__(self) -> None:
        if self.value not in VALUE_RANGES:
            raise DTypeError(f"unknown quantized value type {self.value!r}; known: "
                             f"{', '.join(VALUE_RANGES)}")
        if not isinstance(self.granularity, PerTensor | PerChannel | PerBlock):
            raise TypeError(f"granularity is PerTensor(), PerChannel(axis) or PerBlock(size), "
                            f"got {self.granularity!r}")
        if self.mode not in MODES:
            raise ValueError(f"unknown quantization mode {self.mode!r}; known: "
                             f"{', '.join(MODES)}")
        try:
            scale_dtype = get_dtype(self.scale_dtype)
        except DTypeError:
            scale_dtype = None
        if scale_dtype not in SCALE_DTYPES:
            raise DTypeError(f"scales are float32 or float16, got {self.scale_dtype!r}")
        object.__setattr__(self, "scale_dtype", scale_dtype)

    @property
    def range(self) -> tuple[int, int]:
        """``(qmin, qmax)`` of the value type."""
        return VALUE_RANGES[self.value]

    @property
    def symmetric_limit(self) -> int:
        """The largest magnitude symmetric mode uses: 127 for 8 bits, 7 for int4."""
        return 7 if self.value == "int4" else 127

    @property
    def storage_dtype(self) -> DType:
        """The dtype of the stored values (uint8 for packed int4)."""
        return STORAGE[self.value]

    @property
    def zero_point_dtype(self) -> DType:
        """The dtype zero points are stored in."""
        return ZERO_POINT_DTYPE[self.value]

    @property
    def packed(self) -> bool:
        """Whether two values share a byte (int4)."""
        return self.value == "int4"

    @property
    def symmetric_zero(self) -> int:
        """The zero point of symmetric mode: 0 for signed types, 128 for uint8."""
        return 128 if self.value == "uint8" else 0

    def to_dict(self) -> dict[str, Any]:
        """The scheme as JSON-compatible values (what records store)."""
        granularity = self.granularity
        level: dict[str, Any] = {"level": "tensor"}
        if isinstance(granularity, PerChannel):
            level = {"level": "channel", "axis": granularity.axis}
        elif isinstance(granularity, PerBlock):
            level = {"level": "block", "size": granularity.size, "axis": granularity.axis}
        return {"value": self.value, "granularity": level, "mode": self.mode,
                "scale_dtype": self.scale_dtype.name}

    @classmethod
    def from_dict(cls, value: Any) -> QuantScheme:
        """The scheme ``to_dict`` gave; ValueError naming what is wrong otherwise."""
        try:
            level = value["granularity"]
            kind = level["level"]
            granularity: Granularity
            if kind == "tensor":
                granularity = PerTensor()
            elif kind == "channel":
                granularity = PerChannel(int(level["axis"]))
            elif kind == "block":
                granularity = PerBlock(int(level["size"]), int(level.get("axis", -1)))
            else:
                raise ValueError(f"unknown granularity level {kind!r}")
            return cls(value["value"], granularity, value["mode"], value["scale_dtype"])
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a quantization scheme: {value!r} ({error})") from None

    def __str__(self) -> str:
        return (f"{self.value} {self.granularity.describe()}, {self.mode}, "
                f"{self.scale_dtype} scales")


def scales_shape(scheme: QuantScheme, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of the scales (and zero points) of a tensor of ``shape`` under ``scheme``;
    ShapeError when the granularity does not fit the shape (an axis out of range, a block size
    that does not divide its dim)."""
    granularity = scheme.granularity
    if isinstance(granularity, PerTensor):
        return ()
    axis = channel_axis(granularity, shape)
    if isinstance(granularity, PerChannel):
        return (shape[axis],)
    if shape[axis] % granularity.size:
        raise ShapeError(f"quantization blocks of {granularity.size} do not divide dim {axis} "
                         f"of shape {list(shape)}")
    return tuple(n // granularity.size if d == axis else n for d, n in enumerate(shape))


def channel_axis(granularity: PerChannel | PerBlock, shape: tuple[int, ...]) -> int:
    """The non-negative axis of a per-channel or per-block granularity for ``shape``;
    ShapeError when it is out of range."""
    axis = granularity.axis + len(shape) if granularity.axis < 0 else granularity.axis
    if not 0 <= axis < len(shape):
        raise ShapeError(f"quantization {granularity.describe()} of a tensor of shape "
                         f"{list(shape)}: the axis is out of range")
    return axis
