"""Making tensors: from data, filled, ranges, identity, random, and their ``*_like`` forms."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from burnish.device import Device
from burnish.distribution import Distribution
from burnish.dtype import DEFAULT_FLOAT, DEFAULT_INT, DType, Kind, bool_, get_dtype, int64
from burnish.errors import DeviceError, ShapeError
from burnish.shape import Shape, show
from burnish.tensor import core as _core
from burnish.tensor_data import TensorData

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.tensor.tensor import Tensor

DeviceLike = Device | str | None


def resolve_device(device: DeviceLike | Backend) -> Device:
    """A Device from a Device, a backend, a backend name (``"ndarray"``) with or without one of
    its devices (``"cuda:1"``, ``"router(ndarray,wgpu):wgpu/wgpu:0"``), a server's address
    (``"ws://host:port"``: the remote backend's device for that server), or None (the
    default)."""
    from burnish import registry
    from burnish.backend import Backend

    if isinstance(device, Device):
        return device
    if device is None:
        return registry.default_device()
    if isinstance(device, Backend):
        return device.default_device()
    if isinstance(device, str) and device.startswith(("ws://", "wss://")):
        remote: Any = registry.backend("remote")  # burnish-remote's RemoteBackend
        found: Device = remote.device(device)
        return found
    if isinstance(device, str):
        name, _, index = device.partition(":")
        backend = registry.backend(name)
        if not index:
            return backend.default_device()
        for candidate in backend.devices():
            if index in (str(candidate.index), str(candidate)) or \
                    str(candidate) == f"{candidate.type}:{index}":
                return candidate
        raise DeviceError(f"backend {name!r} has no device {index}; it has "
                          f"{', '.join(str(d) for d in backend.devices())}")
    raise DeviceError(f"expected a Device, a backend or a backend name, got {device!r}")


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    return tuple(Shape(shape))


class CreationMixin:
    """Constructors. ``device`` is a Device, a backend, a backend name or None (the default
    backend's default device); ``dtype`` a DType or its name."""

    __slots__ = ()

    @classmethod
    def from_data(cls, data: Any, device: DeviceLike = None, dtype: DType | str | None = None
                  ) -> Tensor:
        """A tensor holding ``data``: nested lists, a NumPy array, TensorData, a scalar or a
        tensor. Python floats give float32 and ints int64; NumPy arrays keep their dtype."""
        if isinstance(data, _core.Tensor):
            data = data.into_data()
        data = TensorData(data, dtype)
        device = resolve_device(device)
        _core.check_supported(device.backend, data.dtype, device)
        return _core.make(device.backend.from_data(data, device), device, data.dtype)

    @classmethod
    def from_numpy(cls, array: np.ndarray, device: DeviceLike = None) -> Tensor:
        """A tensor from a NumPy array, keeping its dtype (shared, not copied, on ndarray)."""
        return cls.from_data(np.asarray(array), device)

    @classmethod
    def _filled(cls, op: str, shape: Sequence[int] | int, device: DeviceLike,
                dtype: DType | str | None, *args: Any) -> Tensor:
        dtype = DEFAULT_FLOAT if dtype is None else get_dtype(dtype)
        device = resolve_device(device)
        _core.check_supported(device.backend, dtype, device)
        fn = getattr(device.backend, op)
        return _core.make(fn(_shape(shape), *args, dtype, device), device, dtype)

    @classmethod
    def zeros(cls, shape: Sequence[int] | int, device: DeviceLike = None,
              dtype: DType | str | None = None) -> Tensor:
        """A tensor of zeros (float32 unless ``dtype`` says otherwise)."""
        return cls._filled("zeros", shape, device, dtype)

    @classmethod
    def ones(cls, shape: Sequence[int] | int, device: DeviceLike = None,
             dtype: DType | str | None = None) -> Tensor:
        """A tensor of ones (float32 unless ``dtype`` says otherwise)."""
        return cls._filled("ones", shape, device, dtype)

    @classmethod
    def empty(cls, shape: Sequence[int] | int, device: DeviceLike = None,
              dtype: DType | str | None = None) -> Tensor:
        """A tensor whose values are unspecified (float32 unless ``dtype`` says otherwise)."""
        return cls._filled("empty", shape, device, dtype)

    @classmethod
    def full(cls, shape: Sequence[int] | int, value: bool | int | float,
             device: DeviceLike = None, dtype: DType | str | None = None) -> Tensor:
        """A tensor with every element ``value``; the dtype follows the value's Python type
        (bool, int64, float32) unless ``dtype`` is given."""
        if dtype is None:
            dtype = bool_ if isinstance(value, bool) else (
                DEFAULT_INT if isinstance(value, int) else DEFAULT_FLOAT)
        return cls._filled("full", shape, device, dtype, value)

    @classmethod
    def arange(cls, start: int | float, end: int | float | None = None, step: int | float = 1,
               device: DeviceLike = None, dtype: DType | str | None = None) -> Tensor:
        """``[start, end)`` by ``step`` as Python's ``range`` (``arange(n)`` is ``0..n``); int64
        unless a bound is a float or ``dtype`` says otherwise."""
        if end is None:
            start, end = 0, start
        if step == 0:
            raise ValueError("arange: step must not be 0")
        if dtype is None:
            is_float = any(isinstance(v, float) for v in (start, end, step))
            dtype = DEFAULT_FLOAT if is_float else DEFAULT_INT
        dtype = get_dtype(dtype)
        device = resolve_device(device)
        _core.check_supported(device.backend, dtype, device)
        prim = device.backend.arange(start, end, step, dtype, device)
        return _core.make(prim, device, dtype)

    @classmethod
    def linspace(cls, start: float, end: float, steps: int, device: DeviceLike = None,
                 dtype: DType | str | None = None) -> Tensor:
        """``steps`` evenly spaced values from ``start`` to ``end``, both included."""
        if steps < 0:
            raise ShapeError(f"linspace: steps must be >= 0, got {steps}")
        values = np.linspace(start, end, steps, dtype=np.float64)
        return cls.from_data(values, device, DEFAULT_FLOAT if dtype is None else dtype)

    @classmethod
    def eye(cls, n: int, m: int | None = None, device: DeviceLike = None,
            dtype: DType | str | None = None) -> Tensor:
        """The ``n`` by ``m`` (default ``n``) identity matrix."""
        rows = cls.arange(n, device=device).unsqueeze(1)
        cols = cls.arange(n if m is None else m, device=device).unsqueeze(0)
        return (rows == cols).cast(DEFAULT_FLOAT if dtype is None else dtype)

    @classmethod
    def random(cls, shape: Sequence[int] | int, distribution: Distribution | None = None,
               device: DeviceLike = None, dtype: DType | str | None = None) -> Tensor:
        """Values drawn from ``distribution`` (default: uniform on [0, 1)); seed with
        ``burnish.seed``."""
        distribution = Distribution.default() if distribution is None else distribution
        return cls._filled("random", shape, device, dtype, distribution)

    # -- the same, shaped like another tensor -------------------------------------------------

    def zeros_like(self, dtype: DType | str | None = None) -> Tensor:
        """Zeros with this tensor's shape, device and (unless given) dtype."""
        return type(self).zeros(self.shape, self._device, dtype or self._dtype)

    def ones_like(self, dtype: DType | str | None = None) -> Tensor:
        """Ones with this tensor's shape, device and (unless given) dtype."""
        return type(self).ones(self.shape, self._device, dtype or self._dtype)

    def full_like(self, value: bool | int | float, dtype: DType | str | None = None) -> Tensor:
        """``value`` everywhere, with this tensor's shape, device and (unless given) dtype."""
        return type(self).full(self.shape, value, self._device, dtype or self._dtype)

    def empty_like(self, dtype: DType | str | None = None) -> Tensor:
        """Unspecified values with this tensor's shape, device and (unless given) dtype."""
        return type(self).empty(self.shape, self._device, dtype or self._dtype)

    def random_like(self, distribution: Distribution | None = None,
                    dtype: DType | str | None = None) -> Tensor:
        """Random values with this tensor's shape, device and (unless given) dtype."""
        return type(self).random(self.shape, distribution, self._device, dtype or self._dtype)

    def multinomial(self, num_samples: int, replacement: bool = False) -> Tensor:
        """int64 category indices drawn from this tensor of weights, as PyTorch's: a 1-d
        ``[categories]`` tensor gives ``[num_samples]``, a 2-d ``[rows, categories]`` one
        ``[rows, num_samples]`` (each row its own distribution). Weights are non-negative
        floats, not necessarily normalised; a category is drawn with probability its weight
        over its row's sum, from the backend's seeded generator (``burnish.seed``). Without
        ``replacement`` a row's samples are distinct. No gradient flows through the draw.

        Raises DTypeError for a non-float tensor, ShapeError for other than 1 or 2 dims, no
        categories, or ``num_samples`` above the categories without replacement, ValueError
        for ``num_samples < 1``; and ValueError for a negative, NaN or infinite weight, an
        all-zero row, or (without replacement) fewer positive weights than ``num_samples``,
        checked where values can be read for free (or in debug mode, see ``set_debug``)."""
        return multinomial(self, num_samples, replacement)



def multinomial(weights: Tensor, num_samples: int, replacement: bool = False) -> Tensor:
    """Category indices drawn from ``weights``: see ``Tensor.multinomial``."""
    op = "multinomial"
    _core.require_kind(weights, (Kind.FLOAT,), op)
    shape = weights._prim.shape
    if len(shape) not in (1, 2):
        raise ShapeError(f"{op}: weights must be 1-d [categories] or 2-d [rows, categories], "
                         f"got shape {show(shape)}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int | np.integer):
        raise TypeError(f"{op}: num_samples must be an int, got {num_samples!r}")
    num_samples = int(num_samples)
    if num_samples < 1:
        raise ValueError(f"{op}: num_samples must be >= 1, got {num_samples}")
    categories = shape[-1]
    if categories == 0:
        raise ShapeError(f"{op}: there are no categories to draw from (shape {show(shape)})")
    if not replacement and num_samples > categories:
        raise ShapeError(f"{op}: cannot draw {num_samples} samples without replacement from "
                         f"{categories} categories; pass replacement=True or fewer samples")
    x = weights.detach() if len(shape) == 2 else weights.detach().reshape(1, categories)
    if x._dtype.itemsize < 4:  # half floats: the running sums and draws need float32
        x = x.cast(DEFAULT_FLOAT)
    device = x._device
    if _core.checks_values(device):
        from burnish.replay import guard

        needed = 1 if replacement else num_samples
        guard(functools.partial(_valid_weights, needed=needed, op=op), x, key=(op, needed))
    rows = x._prim.shape[0]
    if rows == 0:
        out = _core.Tensor.zeros((0, num_samples), device, int64)
    else:
        prim = device.backend.multinomial(x._prim, num_samples, bool(replacement), x._dtype)
        out = _core.make(prim, device, int64)
    return out if len(shape) == 2 else out.reshape(num_samples)


def _valid_weights(values: np.ndarray, needed: int, op: str) -> None:
    """Raise ValueError where ``values`` (``[rows, categories]``) is no distribution to draw
    ``needed`` distinct categories from."""
    values = values.astype(np.float64)
    if not np.isfinite(values).all():
        raise ValueError(f"{op}: weights must be finite, got "
                         f"{values[~np.isfinite(values)].flat[0]} at index "
                         f"{[int(i) for i in np.argwhere(~np.isfinite(values))[0]]}")
    if (values < 0).any():
        raise ValueError(f"{op}: weights must be non-negative, got {values[values < 0].flat[0]} "
                         f"at index {[int(i) for i in np.argwhere(values < 0)[0]]}")
    positive = (values > 0).sum(axis=1)
    if (positive < needed).any():
        row = int(np.argmax(positive < needed))
        if positive[row] == 0:
            raise ValueError(f"{op}: row {row} of the weights is all zeros: no category can be "
                             "drawn")
        raise ValueError(f"{op}: row {row} of the weights has {positive[row]} positive weights, "
                         f"too few to draw {needed} distinct samples without replacement")
