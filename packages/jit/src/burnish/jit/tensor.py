"""``JitTensor``: a GPU backend's primitive, a pooled buffer seen through a strided layout."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from burnish.device import Device
from burnish.dtype import DType
from burnish.jit.runtime import DeviceBuffer, Runtime

_STRIDES: dict[tuple[int, ...], tuple[int, ...]] = {}


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of ``shape`` (in elements), remembered per shape: every new tensor
    asks."""
    found = _STRIDES.get(shape)
    if found is None:
        strides, step = [], 1
        for size in reversed(shape):
            strides.append(step)
            step *= max(size, 1)
        found = tuple(reversed(strides))
        if len(_STRIDES) >= 4096:
            _STRIDES.clear()
        _STRIDES[shape] = found
    return found


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


class JitTensor:
    """Elements ``buffer[offset + sum(index[d] * strides[d])]`` (strides in elements, may be 0
    for broadcast dims or negative for flipped ones). Views share the buffer; ops that need a
    plain layout copy first (``JitBackend.contiguous``)."""

    __slots__ = ("buffer", "shape", "strides", "offset", "dtype", "device", "runtime")

    def __init__(self, buffer: DeviceBuffer, shape: tuple[int, ...], dtype: DType,
                 device: Device, runtime: Runtime, strides: tuple[int, ...] | None = None,
                 offset: int = 0):
        self.buffer = buffer
        self.shape = tuple(shape)
        self.strides = contiguous_strides(self.shape) if strides is None else tuple(strides)
        self.offset = offset
        self.dtype = dtype
        self.device = device
        self.runtime = runtime

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return numel(self.shape)

    def is_contiguous(self) -> bool:
        """Row-major with no gaps (size-1 dims may have any stride)."""
        if self.strides == contiguous_strides(self.shape):  # the usual case, by a lookup
            return True
        step = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != step:
                return False
            step *= size
        return True

    def view(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> JitTensor:
        return JitTensor(self.buffer, shape, self.dtype, self.device, self.runtime, strides,
                         offset)

    def __repr__(self) -> str:
        return (f"JitTensor(shape={self.shape}, dtype={self.dtype}, strides={self.strides}, "
                f"offset={self.offset}, device={self.device})")


#: ``per_buffer``'s values, by buffer (a pooled ``DeviceBuffer``: a reused allocation gets a
#: new one, so an entry dies with the tensors that viewed its buffer).
_DERIVED: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()


def per_buffer(t: JitTensor, key: Any, make: Callable[[], Any]) -> Any:
    """``make()``, computed once for ``t``'s buffer, layout and ``key`` and kept as long as the
    buffer lives: for what is derived from elements nothing writes again (a quantized layer's
    weights packed for an integer kernel)."""
    found = _DERIVED.setdefault(t.buffer, {})
    full = (key, t.shape, t.strides, t.offset, t.dtype.name)
    value = found.get(full)
    if value is None:
        value = found[full] = make()
    return value
