"""``JitBase``: what every GPU backend shares: devices and their runtimes, dtypes, data in and
out (one synchronisation for several tensors), creation and casts."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import numpy as np

from burnish.backend import Backend
from burnish.device import Device
from burnish.distribution import Distribution
from burnish.dtype import DType, get_dtype
from burnish.errors import DTypeError
from burnish.jit import ir, lazy
from burnish.jit.kernels import random as random_kernels
from burnish.jit.kernels.elementwise import elementwise, plain
from burnish.jit.kernels.index import check_bounds
from burnish.jit.runtime import Runtime
from burnish.jit.tensor import JitTensor, contiguous_strides, numel
from burnish.tensor_data import TensorData


class JitBase(Backend):
    """Devices, dtypes and data movement on top of a ``Runtime`` per device.

    A subclass names its devices and makes their runtimes (``_discover``) and says which dtypes
    each device stores (``_device_dtypes``); every op is written once, in the mixins beside
    this one, as kernels of ``burnish.jit``.
    """

    def __init__(self) -> None:
        self._devices: list[Device] | None = None
        self._runtimes: dict[Device, Runtime] = {}
        self._seed = 0
        self._fuser = None

    @abstractmethod
    def _discover(self) -> list[tuple[Device, Runtime]]:
        """Every device of this backend with its runtime, the default first."""

    @abstractmethod
    def _device_dtypes(self, runtime: Runtime) -> tuple[DType, ...]:
        """The dtypes ``runtime``'s device can hold."""

    def _unsupported_reason(self, dtype: DType, runtime: Runtime) -> str:
        """Why ``dtype`` is missing on ``runtime``'s device (for the error message)."""
        return "the device does not support it"

    # -- devices and dtypes ---------------------------------------------------------------------

    def devices(self) -> list[Device]:
        if self._devices is None:
            found = self._discover()
            self._runtimes = dict(found)
            self._devices = [d for d, _ in found]
        return list(self._devices)

    def runtime(self, device: Device) -> Runtime:
        self.devices()
        return self._runtimes[device]

    def dtypes(self, device: Device) -> tuple[DType, ...]:
        return self._device_dtypes(self.runtime(device))

    def describe_device(self, device: Device) -> str:
        return self.runtime(device).describe()

    def unsupported_reason(self, dtype: DType, device: Device) -> str:
        runtime = self.runtime(device)
        return f"{runtime.describe()}: {self._unsupported_reason(dtype, runtime)}"

    def _device_of(self, x: JitTensor) -> Device:
        return x.device

    def seed(self, seed: int) -> None:
        self._seed = seed
        for runtime in self._runtimes.values():
            random_kernels.reseed(runtime, seed)

    def sync(self, device: Device) -> None:
        runtime = self.runtime(device)
        if runtime.device_errors is not None:  # a read of the flag waits for everything
            runtime.device_errors.raise_pending(runtime.read([runtime.device_errors.item()])[0])
        else:
            runtime.sync()

    def fuser(self):
        """Lazy recording and fused kernels for ``burnish.fusion`` (``burnish.jit.fuser``)."""
        if self._fuser is None:
            from burnish.jit.fuser import JitFuser

            self._fuser = JitFuser(self)
        return self._fuser

    def capturer(self, device: Device):
        """Capture and replay of this device's launches (``burnish.jit.capture``), one
        capturer per device."""
        runtime = self.runtime(device)
        found = runtime.capturer
        if found is None:
            from burnish.jit.capture import JitCapturer

            found = runtime.capturer = JitCapturer(runtime, device)
        return found

    def check_indices(self, x: JitTensor, limit: int, op: str) -> None:
        """Checked on the device, with no synchronisation: a kernel raises the runtime's error
        flag where an index lies outside ``[0, limit)``; the next read (or ``sync``) raises
        the error (``burnish.jit.kernels.index.check_bounds``)."""
        check_bounds(plain(x), limit, op)

    def _check_dtype(self, dtype: DType, device: Device) -> Runtime:
        runtime = self.runtime(device)
        if dtype not in self._device_dtypes(runtime):
            raise DTypeError(f"{self.name} backend: dtype {dtype} is not available on {device} "
                             f"({runtime.describe()}): {self._unsupported_reason(dtype, runtime)}")
        return runtime

    # -- data in and out ------------------------------------------------------------------------

    def _new(self, shape: tuple[int, ...], dtype: DType, device: Device,
             runtime: Runtime | None = None) -> JitTensor:
        runtime = runtime or self.runtime(device)
        itemsize = runtime.generator.storage_numpy(dtype.name).itemsize
        return JitTensor(runtime.pool.alloc(numel(shape) * itemsize), shape, dtype, device,
                         runtime)

    def from_data(self, data: TensorData, device: Device) -> JitTensor:
        runtime = self._check_dtype(data.dtype, device)
        values = data.to_numpy()
        shape = tuple(values.shape)  # ascontiguousarray makes 0-d arrays 1-d
        values = np.ascontiguousarray(values)
        storage = runtime.generator.storage_numpy(data.dtype.name)
        if _stored_as_bits(data.dtype, storage):
            host = values.view(_bits(data.dtype)).astype(storage, copy=False)
        elif values.dtype != storage:
            host = values.astype(storage)
        else:
            host = values
        out = self._new(shape, data.dtype, device, runtime)
        runtime.write(out.buffer.handle, 0, host)
        return out

    def into_data(self, x: JitTensor, dtype: DType) -> TensorData:
        return self.read([x], [dtype])[0]

    def read(self, xs: Sequence[JitTensor], dtypes: Sequence[DType]) -> list[TensorData]:
        plain = [self.contiguous(x) for x in xs]
        by_runtime: dict[int, list[int]] = {}
        for i, x in enumerate(plain):
            by_runtime.setdefault(id(x.runtime), []).append(i)
        out: list[TensorData | None] = [None] * len(xs)
        for indices in by_runtime.values():
            runtime = plain[indices[0]].runtime
            items = []
            for i in indices:
                x = plain[i]
                itemsize = runtime.generator.storage_numpy(x.dtype.name).itemsize
                items.append((x.buffer.handle, x.offset * itemsize, x.numel * itemsize))
            errors = runtime.device_errors
            if errors is not None:
                items.append(errors.item())
            raws = runtime.read(items)
            if errors is not None:
                errors.raise_pending(raws.pop())
            for i, raw in zip(indices, raws):
                out[i] = self._decode(raw, plain[i], dtypes[i])
        return out  # type: ignore[return-value]  # every index was filled

    def _decode(self, raw: bytes, x: JitTensor, dtype: DType) -> TensorData:
        storage = x.runtime.generator.storage_numpy(x.dtype.name)
        values = np.frombuffer(raw, dtype=storage).reshape(x.shape)
        if _stored_as_bits(x.dtype, storage):
            values = values.astype(_bits(x.dtype)).view(x.dtype.numpy)
        elif x.dtype.is_bool:
            values = values != 0
        else:
            values = values.astype(x.dtype.numpy)
        return TensorData(values, x.dtype).convert(dtype) if dtype != x.dtype else TensorData(
            values, dtype)

    def to_device(self, x: JitTensor, dtype: DType, device: Device) -> JitTensor:
        if device == x.device:
            return x
        return self.from_data(self.into_data(x, dtype), device)

    def contiguous(self, x: JitTensor) -> JitTensor:
        """``x`` itself when plain, else a plain copy."""
        return plain(x)

    # -- creation -------------------------------------------------------------------------------

    def full(self, shape: tuple[int, ...], value, dtype: DType, device: Device) -> JitTensor:
        runtime = self._check_dtype(dtype, device)
        if lazy.recording() and numel(shape):
            # Recorded like any elementwise op, so a constant fuses into what reads it.
            pending = lazy.record("fill", _fill, [], dtype, [(value, dtype)], tuple(shape),
                                  runtime, device)
            if pending is not None:  # None: predicted to flush alone, so it runs now
                return pending
        out = self._new(tuple(shape), dtype, device, runtime)
        if out.numel:
            elementwise("fill", _fill, [], dtype, scalars=[(value, dtype)],
                        shape=out.shape, out=out)
        return out

    def empty(self, shape: tuple[int, ...], dtype: DType, device: Device) -> JitTensor:
        self._check_dtype(dtype, device)
        return self._new(tuple(shape), dtype, device)

    def random(self, shape: tuple[int, ...], distribution: Distribution, dtype: DType,
               device: Device) -> JitTensor:
        self._check_dtype(dtype, device)
        out = self._new(tuple(shape), dtype, device)
        random_kernels.fill(out, distribution, self._seed)
        return out

    def cast(self, x: JitTensor, from_dtype: DType, to_dtype: DType) -> JitTensor:
        self._check_dtype(to_dtype, x.device)
        to_dtype = get_dtype(to_dtype)
        return elementwise("cast", lambda v, s: v[0].cast(to_dtype), [x], to_dtype)

    # -- views ----------------------------------------------------------------------------------

    def reshape(self, x: JitTensor, shape: tuple[int, ...]) -> JitTensor:
        """A view where ``x``'s strides allow one (NumPy's rule: each run of old dims that
        merges or splits into new dims is itself evenly strided), else a plain copy: splitting
        off or squeezing a dim of a permuted or sliced tensor costs no kernel."""
        shape = tuple(shape)
        if not x.is_contiguous():
            strides = view_strides(x.shape, x.strides, shape)
            if strides is not None:
                return x.view(shape, strides, x.offset)
        x = self.contiguous(x)
        return x.view(shape, contiguous_strides(shape), x.offset)

    def permute(self, x: JitTensor, axes: tuple[int, ...]) -> JitTensor:
        return x.view(tuple(x.shape[a] for a in axes), tuple(x.strides[a] for a in axes),
                      x.offset)

    def expand(self, x: JitTensor, shape: tuple[int, ...]) -> JitTensor:
        shape = tuple(shape)
        lead = len(shape) - x.ndim
        strides = tuple(0 if d < lead or x.shape[d - lead] != shape[d] else x.strides[d - lead]
                        for d in range(len(shape)))
        return x.view(shape, strides, x.offset)

    def flip(self, x: JitTensor, axes: tuple[int, ...]) -> JitTensor:
        offset, strides = x.offset, list(x.strides)
        for a in axes:
            if x.shape[a] > 1:
                offset += (x.shape[a] - 1) * strides[a]
                strides[a] = -strides[a]
        return x.view(x.shape, tuple(strides), offset)

    def slice(self, x: JitTensor, ranges) -> JitTensor:
        offset, shape, strides = x.offset, [], []
        for (start, stop, step), stride in zip(ranges, x.strides):
            size = max(0, -(-(stop - start) // step))
            offset += start * stride if size else 0
            shape.append(size)
            strides.append(stride * step)
        return x.view(tuple(shape), tuple(strides), offset)


def view_strides(shape: tuple[int, ...], strides: tuple[int, ...], new: tuple[int, ...]
                 ) -> tuple[int, ...] | None:
    """Strides under which the elements of ``(shape, strides)`` read in row-major order are
    ``new``'s, or None where no strides do (NumPy's ``_attempt_nocopy_reshape``). Dims of one
    are left out of the old layout and get a stride of 0 in the new one."""
    if 0 in shape or 0 in new:
        return None
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    result = [0] * len(new)
    oi = ni = 0
    while oi < len(old) and ni < len(new):
        if new[ni] == 1:
            ni += 1
            continue
        oj, nj = oi + 1, ni + 1
        old_size, new_size = old[oi][0], new[ni]
        while old_size != new_size:  # the smallest runs of old and new dims of equal size
            if old_size < new_size:
                if oj == len(old):
                    return None
                old_size *= old[oj][0]
                oj += 1
            else:
                if nj == len(new):
                    return None
                new_size *= new[nj]
                nj += 1
        for k in range(oi, oj - 1):  # the old run must be one evenly strided block
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        step = old[oj - 1][1]
        for k in range(nj - 1, ni - 1, -1):
            result[k] = 0 if new[k] == 1 else step
            step *= new[k]
        oi, ni = oj, nj
    if oi != len(old) or any(n != 1 for n in new[ni:]):
        return None
    return tuple(result)


def _stored_as_bits(dtype: DType, storage: np.dtype) -> bool:
    """Whether a device stores float ``dtype`` as its bits (``bfloat16`` in 16, float8 and
    float4 codes in a byte or a word), not as a wider float of the same value."""
    return dtype.is_float and storage.kind == "u"


def _bits(dtype: DType) -> np.dtype:
    """The unsigned int type of ``dtype``'s width in host memory."""
    return np.dtype(f"u{dtype.itemsize}")


def _fill(values: list, scalars: list) -> ir.Expr:
    return scalars[0]


def compute(dtype: DType) -> str:
    """The kernel compute type of ``dtype``."""
    return ir.compute_type(dtype)
