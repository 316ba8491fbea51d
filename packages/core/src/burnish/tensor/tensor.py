"""The Tensor class: identity, properties, conversions, devices and display."""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from burnish.device import Device
from burnish.dtype import DEFAULT_FLOAT, DEFAULT_INT, DType, Kind, bool_, float16, float64
from burnish.dtype import get_dtype as _get_dtype
from burnish.errors import BurnishError, DTypeError
from burnish.shape import Shape, show
from burnish.tensor import core as _core
from burnish.tensor.arithmetic import ArithmeticMixin
from burnish.tensor.autodiff import AutodiffMixin
from burnish.tensor.creation import CreationMixin
from burnish.tensor.display import format_tensor
from burnish.tensor.habits import TENSOR_HABITS, missing_attribute
from burnish.tensor.inplace import InPlaceMixin
from burnish.tensor.layout import LayoutMixin
from burnish.tensor.named import NamedTensor
from burnish.tensor.reduction import ReductionMixin

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.quantization import QuantizedTensor, QuantScheme
    from burnish.tensor_data import TensorData


class Tensor(CreationMixin, ArithmeticMixin, InPlaceMixin, ReductionMixin, LayoutMixin,
             AutodiffMixin):
    """An n-dimensional array on a device of some backend, with a dtype of kind float, int or bool.

    Tensors are values: operations return new tensors and leave their inputs alone (``x[i] = v``
    rebinds ``x`` to an updated copy). Arguments are checked here, once, with errors that name both
    sides; then the backend runs the operation. On asynchronous backends operations are queued,
    and reading values (``to_numpy``, ``item``, ``print``) waits for them.
    """

    __slots__ = ("_prim", "_device", "_dtype", "__weakref__")
    # What every mixin reads: the backend's primitive (None only while an in-place op runs), the
    # device and the dtype. Annotations only: the slots hold the values.
    _prim: Any
    _device: Device
    _dtype: DType

    # Comparison operators return tensors, so identity hashing keeps tensors usable as dict keys.
    __hash__ = object.__hash__
    # NumPy must defer to our reflected operators (``np_array + tensor`` gives a Tensor).
    __array_priority__ = 1000

    def __init__(self, *args: Any, **kwargs: Any):
        raise TypeError(
            "make tensors with Tensor.from_data(values, device=...), Tensor.zeros(shape, ...), "
            "Tensor.random(shape, distribution, ...) and the other constructors"
        )

    # -- identity -----------------------------------------------------------------------------

    @property
    def shape(self) -> Shape:
        """The shape, e.g. ``[2, 3]``."""
        return Shape(self._prim.shape)

    def dims(self) -> list[int]:
        """The shape as a list of ints (Burn's ``dims()``)."""
        return list(self._prim.shape)

    def size(self, dim: int | None = None) -> Shape | int:
        """The shape, or the size of one dim (negative dims count from the end)."""
        shape = self._prim.shape
        if dim is None:
            return Shape(shape)
        from burnish.shape import normalize_dim

        return shape[normalize_dim(dim, len(shape))]

    @property
    def ndim(self) -> int:
        """The number of dims (0 for a scalar tensor)."""
        return len(self._prim.shape)

    def numel(self) -> int:
        """The number of elements."""
        n = 1
        for d in self._prim.shape:
            n *= d
        return n

    @property
    def dtype(self) -> DType:
        """The element type, e.g. ``burnish.float32``."""
        return self._dtype

    @property
    def kind(self) -> Kind:
        """``Kind.FLOAT``, ``Kind.INT`` or ``Kind.BOOL``."""
        return self._dtype.kind

    @property
    def device(self) -> Device:
        """Where the tensor lives; it belongs to one backend."""
        return self._device

    @property
    def backend(self) -> Backend:
        """The backend that owns the tensor's device."""
        return self._device.backend

    @property
    def primitive(self) -> Any:
        """The backend's own handle for this tensor (a NumPy array on ndarray, and so on)."""
        return self._prim

    def named(self, *names: str | Sequence[str]) -> NamedTensor:
        """This tensor with a name for each dim, ``x.named("batch", "seq")`` (or one sequence of
        names): a ``NamedTensor``, whose operations match dims by name. Raises ShapeError when
        the number of names is not ``ndim`` or a name repeats."""
        return NamedTensor(self, names[0] if len(names) == 1 and not isinstance(names[0], str)
                           else names)  # type: ignore[arg-type]  # several names: all str

    @classmethod
    def from_primitive(cls, primitive: Any, device: Device, dtype: DType | str) -> Tensor:
        """Wrap a backend primitive made by ``device.backend`` (for backend and op authors)."""
        return _core.make(primitive, device, _get_dtype(dtype))

    # -- dtypes -------------------------------------------------------------------------------

    def cast(self, dtype: DType | str) -> Tensor:
        """The values converted to ``dtype``: floats to ints truncate toward zero, nonzero is
        True."""
        dtype = _get_dtype(dtype)
        if dtype is self._dtype:
            return self
        backend = self._device.backend
        _core.check_supported(backend, dtype, self._device)
        return _core.make(backend.cast(self._prim, self._dtype, dtype), self._device, dtype)

    def float(self) -> Tensor:
        """Cast to the default float dtype (float32) unless already float."""
        return self if self._dtype.is_float else self.cast(DEFAULT_FLOAT)

    def int(self) -> Tensor:
        """Cast to the default int dtype (int64) unless already int."""
        return self if self._dtype.is_int else self.cast(DEFAULT_INT)

    def bool(self) -> Tensor:
        """Cast to bool: nonzero is True."""
        return self.cast(bool_)

    def half(self) -> Tensor:
        """Cast to float16."""
        return self.cast(float16)

    def double(self) -> Tensor:
        """Cast to float64."""
        return self.cast(float64)

    def quantize(self, scheme: QuantScheme | None = None, *, scales: Tensor | None = None,
                 zero_points: Tensor | None = None) -> QuantizedTensor:
        """This float tensor as a ``QuantizedTensor`` under ``scheme`` (a
        ``burnish.quantization.QuantScheme``; int8 per tensor, symmetric by default), with
        scales from its minimum and maximum unless given (``burnish.quantization.quantize``)."""
        from burnish.quantization import quantize

        return quantize(self, scheme, scales=scales, zero_points=zero_points)

    # -- devices and backends -----------------------------------------------------------------

    def to_device(self, device: Device | str) -> Tensor:
        """This tensor on ``device``, which may belong to another backend (values are copied)."""
        from burnish.tensor.creation import resolve_device

        device = resolve_device(device)
        if device == self._device:
            return self
        if device.backend is self._device.backend:
            prim = device.backend.to_device(self._prim, self._dtype, device)
            return _core.make(prim, device, self._dtype)
        _core.check_supported(device.backend, self._dtype, device)
        return _core.make(device.backend.from_data(self.into_data(), device), device, self._dtype)

    def to(self, target: Device | DType | str) -> Tensor:
        """``cast`` when given a dtype, ``to_device`` when given a device, backend or its name."""
        if isinstance(target, DType):
            return self.cast(target)
        if isinstance(target, str):
            try:
                return self.cast(_get_dtype(target))
            except DTypeError:
                pass
        return self.to_device(target)

    # -- reading values -----------------------------------------------------------------------

    def into_data(self) -> TensorData:
        """The values on the host as ``TensorData`` (waits for queued work)."""
        return self._device.backend.into_data(self._prim, self._dtype)

    to_data = into_data

    def to_numpy(self) -> np.ndarray:
        """The values as a NumPy array (bfloat16 uses ml_dtypes' dtype)."""
        return self.into_data().to_numpy()

    def tolist(self) -> Any:
        """The values as nested Python lists (a Python scalar for a 0-d tensor)."""
        return self.into_data().tolist()

    def item(self) -> builtins.bool | builtins.int | builtins.float:
        """The only value of a one-element tensor, as a Python scalar."""
        if self.numel() != 1:
            raise BurnishError(
                "item() needs a tensor with exactly one element, got shape "
                f"{show(self._prim.shape)}"
            )
        value = self.to_numpy().reshape(())
        if self._dtype.is_float:
            return float(value)
        return bool(value) if self._dtype.is_bool else int(value)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.to_numpy()
        return array if dtype is None else array.astype(dtype)

    def __bool__(self) -> builtins.bool:
        if self.numel() != 1:
            raise BurnishError(
                f"the truth value of a tensor of shape {show(self._prim.shape)} is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self.item())

    def __float__(self) -> builtins.float:
        return float(self.item())

    def __int__(self) -> builtins.int:
        return int(self.item())

    def __index__(self) -> builtins.int:
        if not self._dtype.is_int:
            raise DTypeError(f"only int tensors can be used as an index, got {self._dtype}")
        return int(self.item())

    def __len__(self) -> builtins.int:
        if not self._prim.shape:
            raise BurnishError("len() of a 0-d tensor")
        return self._prim.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return format_tensor(self)

    __str__ = __repr__

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: say what to write for a PyTorch habit.
        raise missing_attribute(self, name, TENSOR_HABITS)

    def __reduce__(self) -> NoReturn:
        raise BurnishError(
            "tensors are not pickled; save them with burnish.record (safetensors and other "
            "formats) or send tensor.into_data()"
        )


_core.Tensor = Tensor  # type: ignore[misc]  # mypy takes _core.Tensor for this class
