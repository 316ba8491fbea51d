"""The core of the backend protocol: identity, devices, dtypes, and moving data in and out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from burnish.device import Device
from burnish.distribution import Distribution
from burnish.dtype import DType, bool_, int64
from burnish.errors import ShapeError
from burnish.tensor_data import TensorData

#: A backend's tensor handle. Whatever the backend likes, with a ``.shape`` tuple of ints.
Primitive = Any
Scalar = bool | int | float


class BackendBase(ABC):
    """What every backend is: a name, its devices, its dtypes, and data in and out.

    A primitive is the backend's own tensor handle (a NumPy array, a CuPy array, a GPU buffer
    with a layout...). It must expose ``.shape`` as a tuple of ints; its dtype is the one the
    operation that made it was asked for, and ``Tensor`` keeps track of it.

    Calling conventions for every op of the protocol: ``Tensor`` has already checked shapes,
    dtypes and devices; dims are non-negative ints; binary ops get operands of one dtype whose
    shapes broadcast (NumPy's rules), and the backend broadcasts them.
    """

    #: The name the backend is registered under (``"ndarray"``, ``"wgpu"``...).
    name: str = "unnamed"

    #: True when primitives hold their values in host memory, computed when the op returns
    #: (ndarray): reading them costs no device transfer or synchronisation, so ``Tensor``
    #: checks values there (an int divisor of zero, a class target out of range) on every call;
    #: on other backends only in debug mode (``BURNISH_DEBUG=1``).
    values_on_host: bool = False

    # -- devices and dtypes -------------------------------------------------------------------

    @abstractmethod
    def devices(self) -> list[Device]:
        """Every device this backend can run on, the default first."""

    def default_device(self) -> Device:
        """The device tensors go to when none is named."""
        return self.devices()[0]

    @abstractmethod
    def dtypes(self, device: Device) -> tuple[DType, ...]:
        """The dtypes ``device`` supports."""

    def describe_device(self, device: Device) -> str:
        """The device's own name (a GPU's model, its driver) for listings; empty when the
        device's ``str`` says it all."""
        return ""

    def unsupported_reason(self, dtype: DType, device: Device) -> str:
        """Why ``device`` lacks ``dtype``, for error messages: the device's own name and the
        limit (``"llvmpipe (Vulkan): WGSL has no float64"``); empty when there is nothing to add."""
        return ""

    @abstractmethod
    def seed(self, seed: int) -> None:
        """Reseed this backend's random generators (every device)."""

    def sync(self, device: Device) -> None:  # noqa: B027 (synchronous backends need nothing)
        """Wait until every operation queued on ``device`` has finished (no-op when synchronous)."""

    def fuser(self) -> Any:
        """What ``burnish.fusion`` uses to fuse this backend's ops; ``None`` (the default): ops
        run one by one under ``Fusion``. A fuser has ``begin()`` and ``end()`` (bracketing the
        ops to record lazily, per thread), ``flush(device)`` (compute what is pending),
        ``programs(device)`` (the fused kernels made, for users to look at) and
        ``launches(device)`` (kernels launched so far), and may have ``eager`` (the names of
        the ops it never records, which ``Fusion`` calls without ``begin()``/``end()``); see
        ``burnish.jit.fuser.JitFuser``."""
        return None

    def capturer(self, device: Device) -> Any:
        """What ``burnish.capture`` uses to record and replay work on ``device``; ``None`` (the
        default): captured functions run eagerly on this backend. A capturer has ``leaf(prim)``
        (the device-level value a record sees), ``spec(prim)`` (its layout, part of a record's
        key), ``rebuild(template, leaf)`` (a primitive like ``template`` around a replayed
        value), optionally ``stand_in(prim)`` (what ``rebuild`` reads of a template, without
        its memory: a record keeps templates of the call's results for as long as it lives,
        and without a stand-in they keep the recorded results' memory), ``begin(leaves)``,
        ``finish(leaves)`` (returns what was recorded), ``abort()``, ``compare(a, b)`` (why
        recording ``b`` cannot be replayed, or where it differs from ``a``; ``None`` when
        neither) and
        ``record(recorded, inputs, outputs)`` (a record with ``replay(inputs)``, ``valid()``
        and ``release()``); see ``burnish.jit.capture.JitCapturer``."""
        return None

    def check_indices(self, indices: Primitive, limit: int, op: str) -> None:
        """Raise ShapeError naming ``op`` where an int index of ``indices`` lies outside
        ``[0, limit)``. This default reads the indices (a synchronisation on asynchronous
        backends); a GPU backend may check on the device instead and raise at the next read
        (``burnish.jit`` does), which a captured function then replays too."""
        values = self.into_data(indices, int64).to_numpy()
        if values.size:
            low, high = int(values.min()), int(values.max())
            if low < 0 or high >= limit:
                raise ShapeError(f"{op}: index {low if low < 0 else high} is out of bounds for "
                                 f"a dim of size {limit}")

    # -- data in and out ----------------------------------------------------------------------

    @abstractmethod
    def from_data(self, data: TensorData, device: Device) -> Primitive:
        """A primitive on ``device`` holding ``data`` (shape and dtype as given)."""

    @abstractmethod
    def into_data(self, x: Primitive, dtype: DType) -> TensorData:
        """``x``'s values on the host; waits for pending work on ``x``."""

    def read(self, xs: Sequence[Primitive], dtypes: Sequence[DType]) -> list[TensorData]:
        """Several primitives read back together (one synchronisation on asynchronous backends)."""
        return [self.into_data(x, d) for x, d in zip(xs, dtypes)]

    def to_device(self, x: Primitive, dtype: DType, device: Device) -> Primitive:
        """``x`` copied to another device of this backend."""
        return self.from_data(self.into_data(x, dtype), device)

    # -- creation -----------------------------------------------------------------------------

    def empty(self, shape: tuple[int, ...], dtype: DType, device: Device) -> Primitive:
        """A primitive whose values are unspecified."""
        return self.full(shape, 0, dtype, device)

    def zeros(self, shape: tuple[int, ...], dtype: DType, device: Device) -> Primitive:
        """A primitive of zeros (``False`` for bool)."""
        return self.full(shape, 0, dtype, device)

    def ones(self, shape: tuple[int, ...], dtype: DType, device: Device) -> Primitive:
        """A primitive of ones (``True`` for bool)."""
        return self.full(shape, 1, dtype, device)

    def full(self, shape: tuple[int, ...], value: Scalar, dtype: DType,
             device: Device) -> Primitive:
        """A primitive with every element ``value`` (converted to ``dtype``)."""
        return self.from_data(TensorData(np.full(shape, value, dtype=dtype.numpy)), device)

    def arange(self, start: int | float, end: int | float, step: int | float, dtype: DType,
               device: Device) -> Primitive:
        """``[start, start + step, ...)`` up to but excluding ``end``, as Python's ``range``."""
        values = np.arange(start, end, step, dtype=np.float64 if dtype.is_float else np.int64)
        return self.from_data(TensorData(values.astype(dtype.numpy)), device)

    @abstractmethod
    def random(self, shape: tuple[int, ...], distribution: Distribution, dtype: DType,
               device: Device) -> Primitive:
        """Values drawn from ``distribution`` (uniform draws for int dtypes are floored)."""

    def multinomial(self, weights: Primitive, num_samples: int, replacement: bool,
                    dtype: DType) -> Primitive:
        """int64 ``[rows, num_samples]``: category indices drawn from each row of the 2-d float
        ``weights`` (``[rows, categories]``, non-negative, each row with a positive sum, not
        necessarily normalised; float32 or float64) with probability proportional to the
        weight, through this backend's generator (``random``). Without ``replacement`` a row's
        samples are distinct (``num_samples <= categories``). ``Tensor`` has checked the
        arguments; it checks the values where it may read them."""
        rows, categories = weights.shape
        device = self._device_of(weights)
        if replacement:
            # Inverse CDF: a sample is the number of running sums at or below u * total. The
            # last running sum is the total itself (adding a zero weight changes nothing), so
            # zero-weight categories span empty intervals; the minimum with the index of the
            # last positive weight covers u * total rounding up to the total.
            cdf = self.cumsum(weights, 1)
            total = self.slice(cdf, ((0, rows, 1), (categories - 1, categories, 1)))
            uniform = self.random((rows, num_samples), Distribution.default(), dtype, device)
            threshold = self.reshape(self.mul(uniform, total), (rows, num_samples, 1))
            below = self.lower_equal(self.reshape(cdf, (rows, 1, categories)), threshold)
            drawn = self.sum(self.cast(below, bool_, int64), 2)
            last = self.sum(self.cast(self.lower(cdf, total), bool_, int64), 1)
            return self.minimum(self.reshape(drawn, (rows, num_samples)), last)
        # Exponential races (Gumbel-top-k): category i arrives at E_i / w_i with E_i ~ Exp(1);
        # the first num_samples arrivals are a sample without replacement. Zero weights get a
        # key below every positive one.
        uniform = self.random((rows, categories), Distribution.default(), dtype, device)
        arrival = self.neg(self.log1p(self.neg(uniform, dtype), dtype), dtype)
        keys = self.div(weights, arrival)
        zero = self.lower_equal(weights, self.full((), 0.0, dtype, device))
        keys = self.mask_fill(keys, zero, -1.0, dtype)
        return self.topk_with_indices(keys, 1, num_samples)[1]

    @abstractmethod
    def cast(self, x: Primitive, from_dtype: DType, to_dtype: DType) -> Primitive:
        """``x`` converted to ``to_dtype``: floats to ints truncate toward zero, nonzero is True."""
