"""The autodiff backend's core: the inner backend, devices, data in and out, and recording ops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from burnish.autodiff.checkpoint import STRATEGIES, state
from burnish.autodiff.graph import OUT, AutodiffPrimitive, Node, Recast, Rule, kept
from burnish.backend import Backend
from burnish.backend.base import BackendBase, Scalar
from burnish.backend.decorator import WrapsDevices
from burnish.device import Device
from burnish.distribution import Distribution
from burnish.dtype import DType
from burnish.errors import CaptureError
from burnish.tensor_data import TensorData

P = AutodiffPrimitive


class AutodiffBase(WrapsDevices, BackendBase):
    """Devices and dtypes are the inner backend's; every op runs on the inner backend, and ops
    whose inputs are tracked also record a node (``_record``)."""

    def _setup(self, inner: Backend, checkpointing: str) -> None:
        if checkpointing not in STRATEGIES:
            raise ValueError(f"Autodiff: checkpointing must be one of {', '.join(STRATEGIES)}, "
                             f"got {checkpointing!r}")
        self._inner = inner
        self.checkpointing = checkpointing
        self._balanced = checkpointing == "balanced"
        # The name the registry resolves to this instance: autodiff+ndarray,
        # autodiff-balanced+ndarray.
        prefix = "autodiff" if checkpointing == "none" else f"autodiff-{checkpointing}"
        self.name = f"{prefix}+{inner.name}"
        self.values_on_host = inner.values_on_host
        self._wrapped: dict[Device, Device] = {}

    # -- recording ----------------------------------------------------------------------------

    def _record(self, out: Any, inputs: tuple[P | None, ...], rule: Rule, saved: tuple = (),
                recipe: tuple | None = None, dtype: DType | None = None) -> P:
        """``out`` (an inner primitive) as a tracked primitive whose node runs ``rule`` with
        ``saved`` during backward; ``inputs`` are the differentiable inputs, in the order of the
        gradients the rule returns. ``recipe`` (``(fn, *args)``, ``fn(*args) == out``) marks
        the op as memory-bound: balanced checkpointing keeps it instead of the output."""
        # Written for speed: this runs once per op on tracked tensors.
        parents = tuple([None if x is None else x.node for x in inputs])
        if dtype is None:
            for parent in parents:
                if parent is not None:
                    dtype = parent.dtype
                    break
        if self._balanced and recipe is not None:
            recipe = (recipe[0], *[state(a, True) for a in recipe[1:]])
            saved = tuple([state(s, True) for s in saved])
        else:
            recipe = None
            if saved:
                saved = tuple([kept(s) if type(s) is P else (out if s is OUT else s)
                               for s in saved])
        # dtype: given, or a tracked input's (one input at least is tracked).
        return P(out, Node(parents, rule, saved, recipe, dtype))  # type: ignore[arg-type]

    # -- devices and dtypes -------------------------------------------------------------------

    def _device_of(self, x: P) -> Device:
        return self.wrap_device(self._inner._device_of(x.inner))

    def fuser(self) -> None:
        """None: autodiff records its own graph; fusion goes beneath it
        (``autodiff+fusion+wgpu``), where the ops it forwards are fused."""
        return None

    def check_indices(self, indices: P, limit: int, op: str) -> None:
        self._inner.check_indices(indices.inner, limit, op)

    def capturer(self, device: Device) -> Any:
        """The inner backend's capturer, seeing through autodiff primitives (see
        ``AutodiffCapturer``)."""
        inner = self._inner.capturer(device.native)
        return None if inner is None else AutodiffCapturer(inner)

    # -- data in and out ----------------------------------------------------------------------

    def from_data(self, data: TensorData, device: Device) -> P:
        return P(self._inner.from_data(data, device.native))

    def into_data(self, x: P, dtype: DType) -> TensorData:
        return self._inner.into_data(x.inner, dtype)

    def read(self, xs: Sequence[P], dtypes: Sequence[DType]) -> list[TensorData]:
        return self._inner.read([x.inner for x in xs], dtypes)

    def to_device(self, x: P, dtype: DType, device: Device) -> P:
        source = self._inner._device_of(x.inner)
        out = self._inner.to_device(x.inner, dtype, device.native)
        if x.node is None:
            return P(out)
        return self._record(out, (x,), _to_device_backward, (dtype, source))

    # -- creation -----------------------------------------------------------------------------

    def empty(self, shape: tuple[int, ...], dtype: DType, device: Device) -> P:
        return P(self._inner.empty(shape, dtype, device.native))

    def zeros(self, shape: tuple[int, ...], dtype: DType, device: Device) -> P:
        return P(self._inner.zeros(shape, dtype, device.native))

    def ones(self, shape: tuple[int, ...], dtype: DType, device: Device) -> P:
        return P(self._inner.ones(shape, dtype, device.native))

    def full(self, shape: tuple[int, ...], value: Scalar, dtype: DType, device: Device) -> P:
        return P(self._inner.full(shape, value, dtype, device.native))

    def arange(self, start: int | float, end: int | float, step: int | float, dtype: DType,
               device: Device) -> P:
        return P(self._inner.arange(start, end, step, dtype, device.native))

    def random(self, shape: tuple[int, ...], distribution: Distribution, dtype: DType,
               device: Device) -> P:
        return P(self._inner.random(shape, distribution, dtype, device.native))

    def multinomial(self, weights: P, num_samples: int, replacement: bool, dtype: DType) -> P:
        # A draw: no gradient flows through it.
        return P(self._inner.multinomial(weights.inner, num_samples, replacement, dtype))

    def cast(self, x: P, from_dtype: DType, to_dtype: DType) -> P:
        out = self._inner.cast(x.inner, from_dtype, to_dtype)
        if x.node is None or not to_dtype.is_float:
            return P(out)
        result = self._record(out, (x,), _cast_backward, (from_dtype,),
                              (self._inner.cast, x, from_dtype, to_dtype), dtype=to_dtype)
        if from_dtype.is_float and from_dtype.bits < to_dtype.bits and x.widened is None:
            # A rule that keeps this output keeps the narrow source instead, cast again in
            # backward (autocast's float32 views of 16-bit activations: half the bytes).
            result.widened = Recast(x.inner, from_dtype, to_dtype)
        return result


def _to_device_backward(b, dtype, g, source_dtype, source):
    return (b.to_device(g, source_dtype, source),)


def _cast_backward(b, dtype, g, from_dtype):
    return (b.cast(g, dtype, from_dtype),)


class AutodiffCapturer:
    """``burnish.capture`` on an autodiff backend: records and replays are the inner backend's.
    An argument that carries a graph (computed from tensors that require grad outside the
    function) cannot be captured; returned tensors come back without a graph, a leaf that
    required grad as a fresh leaf (as an optimizer's step returns parameters)."""

    def __init__(self, inner: Any):
        self.inner = inner

    def leaf(self, x: P) -> Any:
        return self.inner.leaf(x.inner)

    def spec(self, x: P) -> tuple:
        node = x.node
        if node is not None and not node.leaf_id:
            raise CaptureError("an argument carries an autodiff graph from outside the function "
                               "(detach() it, or compute it inside)")
        return (self.inner.spec(x.inner), node is not None)

    def stand_in(self, x: P) -> P:
        """``x`` as ``rebuild`` reads it: the inner capturer's stand-in, and the node only where
        it is a leaf's (which holds no graph)."""
        inner = getattr(self.inner, "stand_in", None)
        out = P.__new__(P)
        out.inner = x.inner if inner is None else inner(x.inner)
        out.node = x.node if x.node is not None and x.node.leaf_id else None
        out.shape = x.shape
        return out

    def rebuild(self, template: P, x: Any) -> P:
        node = template.node
        inner = self.inner.rebuild(template.inner, x)
        return P(inner, Node.leaf(node.dtype) if node is not None and node.leaf_id else None)

    def __getattr__(self, name: str) -> Any:  # begin, finish, abort, compare, record
        return getattr(self.inner, name)
