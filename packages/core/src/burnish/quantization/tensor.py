"""QuantizedTensor: a tensor held as integers with scales, its layout ops, and the conversions
from and to float tensors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

# The module, not its names: burnish.backend imports this package while it loads.
from burnish.backend import quant_ops as _ops
from burnish.dtype import DType, float32, get_dtype, int32
from burnish.errors import DTypeError, ShapeError
from burnish.quantization.scheme import (
    PerBlock,
    PerChannel,
    QuantScheme,
    channel_axis,
    scales_shape,
)
from burnish.shape import Shape, infer_reshape, normalize_dim
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.device import Device
    from burnish.tensor.tensor import Tensor


class QuantizedTensor:
    """A tensor stored as integers and scales under a ``QuantScheme``: what ``x.quantize(scheme)``
    returns. It is a kind of its own, not a ``Tensor``: ``dequantize()`` gives the float tensor
    back, ``burnish.quantization.matmul``/``linear``/``conv`` compute with it directly, and the
    layout ops (``reshape``, ``permute``, ``transpose``, ``narrow``) move its values and scales
    together where the granularity allows (ShapeError naming the granularity otherwise).

    ``values`` (``scheme.storage_dtype``; packed int4 is 1-d, two values a byte), ``scales`` and
    ``zero_points`` (``None`` in symmetric mode) are ordinary tensors, as records store them;
    ``QuantizedTensor.from_parts`` puts them back together.
    """

    __slots__ = ("_q", "_device", "_parts")
    _q: _ops.QuantizedPrimitive
    _device: Device
    _parts: tuple[Tensor, Tensor, Tensor | None]

    def __init__(self, *args: Any, **kwargs: Any):
        raise TypeError("make quantized tensors with tensor.quantize(scheme) or "
                        "QuantizedTensor.from_parts(values, scales, zero_points, scheme, shape)")

    @classmethod
    def _wrap(cls, q: _ops.QuantizedPrimitive, device: Device) -> QuantizedTensor:
        out = object.__new__(cls)
        out._q = q
        out._device = device
        return out

    def parts(self) -> tuple[Tensor, Tensor, Tensor | None]:
        """``(values, scales, zero_points)``, the same tensor objects at every call (a quantized
        tensor never changes its parts): what ``burnish.capture`` sees of it."""
        try:
            return self._parts
        except AttributeError:
            self._parts = (self.values, self.scales, self.zero_points)
            return self._parts

    @classmethod
    def from_parts(cls, values: Tensor, scales: Tensor, zero_points: Tensor | None,
                   scheme: QuantScheme, shape: Sequence[int]) -> QuantizedTensor:
        """The quantized tensor of logical ``shape`` with these stored parts (what a record
        holds). Raises ShapeError, DTypeError or DeviceError naming the part that does not
        fit ``scheme`` and ``shape``."""
        shape = tuple(int(n) for n in shape)
        stored = ((_count(shape) + 1) // 2,) if scheme.packed else shape
        expected = scales_shape(scheme, shape)
        _part("values", values, stored, scheme.storage_dtype)
        _part("scales", scales, expected, scheme.scale_dtype)
        if (zero_points is None) != (scheme.mode == "symmetric"):
            raise ShapeError(f"a {scheme.mode} scheme takes "
                             f"{'no zero points' if scheme.mode == 'symmetric' else 'zero points'}"
                             f", but {'none were' if zero_points is None else 'some were'} given")
        _core.same_device(values, scales, "QuantizedTensor.from_parts")
        if zero_points is not None:
            _part("zero_points", zero_points, expected, scheme.zero_point_dtype)
            _core.same_device(values, zero_points, "QuantizedTensor.from_parts")
        q = _ops.QuantizedPrimitive(values._prim, scales._prim,
                               None if zero_points is None else zero_points._prim, scheme, shape)
        return cls._wrap(q, values.device)

    # -- identity -----------------------------------------------------------------------------

    @property
    def shape(self) -> Shape:
        """The logical shape (of the float tensor it stands for)."""
        return Shape(self._q.shape)

    @property
    def ndim(self) -> int:
        return len(self._q.shape)

    def numel(self) -> int:
        n = 1
        for d in self._q.shape:
            n *= d
        return n

    @property
    def scheme(self) -> QuantScheme:
        return self._q.scheme

    @property
    def device(self) -> Device:
        return self._device

    @property
    def backend(self) -> Backend:
        return self._device.backend

    @property
    def primitive(self) -> _ops.QuantizedPrimitive:
        """The backend's parts (for backend and op authors)."""
        return self._q

    @property
    def values(self) -> Tensor:
        """The stored integers (``scheme.storage_dtype``; int4 packed two a byte)."""
        return _core.make(self._q.values, self._device, self._q.scheme.storage_dtype)

    @property
    def scales(self) -> Tensor:
        return _core.make(self._q.scales, self._device, self._q.scheme.scale_dtype)

    @property
    def zero_points(self) -> Tensor | None:
        if self._q.zero_points is None:
            return None
        return _core.make(self._q.zero_points, self._device, self._q.scheme.zero_point_dtype)

    def int_values(self) -> Tensor:
        """The integers one per element as int32 (int4 unpacked), in the logical shape."""
        q, backend = self._q, self.backend
        prim = _ops.unpack_int4(backend, q.values, q.shape) if q.scheme.packed else \
            backend.cast(q.values, q.scheme.storage_dtype, int32)
        return _core.make(prim, self._device, int32)

    def nbytes(self) -> int:
        """Bytes held by values, scales and zero points."""
        scheme = self._q.scheme
        total = _count(self._q.values.shape) * scheme.storage_dtype.itemsize
        params = _count(self._q.scales.shape)
        total += params * scheme.scale_dtype.itemsize
        if self._q.zero_points is not None:
            total += params * scheme.zero_point_dtype.itemsize
        return total

    # -- conversions --------------------------------------------------------------------------

    def dequantize(self, dtype: DType | str = float32) -> Tensor:
        """The float tensor: ``(values - zero_point) * scale`` in ``dtype`` (float32 by
        default)."""
        dtype = get_dtype(dtype)
        if not dtype.is_float:
            raise DTypeError(f"dequantize gives a float tensor, not {dtype}")
        _core.check_supported(self.backend, dtype, self._device)
        return _core.make(self.backend.dequantize(self._q, dtype), self._device, dtype)

    def to_device(self, device: Device | str) -> QuantizedTensor:
        """The same integers and scales on ``device`` (of any backend)."""
        return QuantizedTensor.from_parts(
            self.values.to_device(device), self.scales.to_device(device),
            None if self.zero_points is None else self.zero_points.to_device(device),
            self.scheme, self._q.shape)

    # -- layout -------------------------------------------------------------------------------

    def reshape(self, shape: Sequence[int]) -> QuantizedTensor:
        """The values in ``shape`` (same count; one ``-1`` is inferred). Only a per-tensor
        scheme reshapes freely; ShapeError for the others, whose scales follow dims."""
        target = infer_reshape(self._q.shape, shape)
        if target == self._q.shape:
            return self
        scheme = self.scheme
        if isinstance(scheme.granularity, PerChannel | PerBlock):
            raise ShapeError(f"reshape of a quantized tensor {scheme.granularity.describe()} "
                             f"from {list(self._q.shape)} to {list(target)}: its scales follow "
                             "dims; dequantize() first or quantize per tensor")
        backend = self.backend
        values = self._q.values if scheme.packed else backend.reshape(self._q.values, target)
        return self._with(values, self._q.scales, self._q.zero_points, target)

    def permute(self, axes: Sequence[int]) -> QuantizedTensor:
        """Dims reordered (output dim ``i`` is dim ``axes[i]``); a per-channel or per-block
        axis follows its dim (packed int4 values are unpacked and packed again)."""
        n = self.ndim
        order = tuple(normalize_dim(a, n) for a in axes)
        if sorted(order) != list(range(n)):
            raise ShapeError(f"permute of a quantized tensor of {n} dims needs a permutation of "
                             f"its dims, got {list(axes)}")
        scheme, backend = self.scheme, self.backend
        target = tuple(self._q.shape[a] for a in order)
        granularity = scheme.granularity
        scales, points = self._q.scales, self._q.zero_points
        if isinstance(granularity, PerBlock):
            axis = order.index(channel_axis(granularity, self._q.shape))
            scheme = _replace_granularity(scheme, PerBlock(granularity.size, axis))
            scales = backend.permute(scales, order)
            points = None if points is None else backend.permute(points, order)
        elif isinstance(granularity, PerChannel):
            axis = order.index(channel_axis(granularity, self._q.shape))
            scheme = _replace_granularity(scheme, PerChannel(axis))
        values = self._int_op(lambda v: backend.permute(v, order))
        q = _ops.QuantizedPrimitive(values, scales, points, scheme, target)
        return QuantizedTensor._wrap(q, self._device)

    def transpose(self, dim0: int = -2, dim1: int = -1) -> QuantizedTensor:
        """``dim0`` and ``dim1`` swapped (the last two by default): a linear weight ``[in, out]``
        becomes ``[out, in]``."""
        order = list(range(self.ndim))
        d0, d1 = normalize_dim(dim0, self.ndim), normalize_dim(dim1, self.ndim)
        order[d0], order[d1] = order[d1], order[d0]
        return self.permute(order)

    def narrow(self, dim: int, start: int, length: int) -> QuantizedTensor:
        """Elements ``start`` to ``start + length`` of ``dim``. Along a per-block scheme's block
        axis the cut must fall on block boundaries: ShapeError otherwise."""
        shape = self._q.shape
        dim = normalize_dim(dim, len(shape))
        if not (0 <= start and length >= 0 and start + length <= shape[dim]):
            raise ShapeError(f"narrow({dim}, {start}, {length}) is outside a dim of size "
                             f"{shape[dim]}")
        scheme, backend = self.scheme, self.backend
        granularity = scheme.granularity
        blocked = isinstance(granularity, PerBlock) and channel_axis(granularity, shape) == dim
        step = granularity.size if blocked else 1  # type: ignore[union-attr]  # a PerBlock
        if start % step or length % step:
            raise ShapeError(f"narrow({dim}, {start}, {length}) of a quantized tensor "
                             f"({scheme}) must cut dim {dim} at multiples of {step}")
        target = tuple(length if d == dim else n for d, n in enumerate(shape))

        def cut(x: Any, divisor: int = 1) -> Any:
            ranges = tuple((start // divisor, (start + length) // divisor, 1) if d == dim
                           else (0, n, 1) for d, n in enumerate(x.shape))
            return backend.slice(x, ranges)

        values = self._int_op(cut)
        scales, points = self._q.scales, self._q.zero_points
        if isinstance(granularity, PerBlock):
            scales = cut(scales, granularity.size if blocked else 1)
            points = None if points is None else cut(points, granularity.size if blocked else 1)
        elif isinstance(granularity, PerChannel) and channel_axis(granularity, shape) == dim:
            ranges = ((start, start + length, 1),)
            scales = backend.slice(scales, ranges)
            points = None if points is None else backend.slice(points, ranges)
        return self._with(values, scales, points, target)

    def matmul(self, other: Tensor | QuantizedTensor) -> Tensor:
        """``self @ other`` as ``burnish.quantization.matmul``."""
        from burnish.quantization.ops import matmul

        return matmul(self, other)

    __matmul__ = matmul

    def __rmatmul__(self, other: Tensor) -> Tensor:
        from burnish.quantization.ops import matmul

        return matmul(other, self)

    def __repr__(self) -> str:
        return (f"QuantizedTensor(shape={list(self._q.shape)}, {self.scheme}, "
                f"device={self._device})")

    # -- helpers ------------------------------------------------------------------------------

    def _with(self, values: Any, scales: Any, points: Any, shape: tuple[int, ...]
              ) -> QuantizedTensor:
        return QuantizedTensor._wrap(_ops.QuantizedPrimitive(values, scales, points, self.scheme,
                                                        shape), self._device)

    def _int_op(self, op: Callable[[Any], Any]) -> Any:
        """``op`` applied to the stored values; packed int4 values are unpacked first and
        packed again."""
        if not self.scheme.packed:
            return op(self._q.values)
        backend = self.backend
        q = self._q
        return _ops.pack_int4(backend, op(_ops.unpack_int4(backend, q.values, q.shape)))


def quantize(x: Tensor, scheme: QuantScheme | None = None, *, scales: Tensor | None = None,
             zero_points: Tensor | None = None) -> QuantizedTensor:
    """The float tensor ``x`` quantized under ``scheme`` (int8 per tensor, symmetric, float32
    scales by default), with scales from its minimum and maximum, or the given ``scales`` and
    ``zero_points`` (a calibration's; shapes as ``QuantizedPrimitive`` documents).

    Raises DTypeError for a non-float ``x``, ShapeError when the granularity does not fit the
    shape (see ``scales_shape``) or given parameters do not, UnsupportedError when the backend
    lacks the storage or scale dtype."""
    from burnish.tensor.tensor import Tensor

    scheme = QuantScheme() if scheme is None else scheme
    if not isinstance(scheme, QuantScheme):
        raise TypeError(f"quantize takes a QuantScheme, got {type(scheme).__name__}")
    if not isinstance(x, Tensor):
        raise TypeError(f"quantize takes a Tensor, got {type(x).__name__}")
    if not x.dtype.is_float:
        raise DTypeError(f"quantize needs a float tensor, got {x.dtype}")
    shape = tuple(x.shape)
    expected = scales_shape(scheme, shape)
    backend, device = x.backend, x.device
    for dtype in (scheme.storage_dtype, scheme.scale_dtype, scheme.zero_point_dtype, int32):
        _core.check_supported(backend, dtype, device)
    if scales is None:
        if zero_points is not None:
            raise ShapeError("quantize: zero_points given without scales")
        scale_prim, point_prim = backend.quantize_params(x._prim, scheme, x.dtype)
    else:
        _part("scales", scales, expected, scheme.scale_dtype)
        _core.same_device(x, scales, "quantize")
        scale_prim, point_prim = scales._prim, None
        if scheme.mode == "affine":
            if zero_points is None:
                raise ShapeError("quantize: an affine scheme with given scales needs "
                                 "zero_points too")
            _part("zero_points", zero_points, expected, scheme.zero_point_dtype)
            _core.same_device(x, zero_points, "quantize")
            point_prim = zero_points._prim
        elif zero_points is not None:
            raise ShapeError("quantize: a symmetric scheme takes no zero_points")
    q = backend.quantize(x._prim, scale_prim, point_prim, scheme, x.dtype)
    return QuantizedTensor._wrap(q, device)


def _part(name: str, tensor: Any, shape: tuple[int, ...], dtype: DType) -> None:
    from burnish.tensor.tensor import Tensor

    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(tensor).__name__}")
    if tuple(tensor.shape) != shape:
        raise ShapeError(f"{name} of shape {list(tensor.shape)} where the scheme needs "
                         f"{list(shape)}")
    if tensor.dtype is not dtype:
        raise DTypeError(f"{name} of dtype {tensor.dtype} where the scheme needs {dtype}")


def _replace_granularity(scheme: QuantScheme, granularity: Any) -> QuantScheme:
    return QuantScheme(scheme.value, granularity, scheme.mode, scheme.scale_dtype)


def _count(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
