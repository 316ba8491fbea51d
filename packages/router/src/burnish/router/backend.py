"""``Router``: one backend made of several, each op running on the member that holds its inputs."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Sequence
from typing import Any

from burnish.backend import AutodiffOps, Backend, QuantOps
from burnish.backend.decorator import DEVICE_METHODS
from burnish.device import Device
from burnish.dtype import DType
from burnish.errors import BurnishError, DeviceError, UnsupportedError
from burnish.router.fuser import RouterFuser
from burnish.tensor_data import TensorData

_lock = threading.Lock()
_instances: dict[tuple[int, ...], Router] = {}


class RouterPrimitive:
    """A router's tensor handle: the member backend that holds it and that member's primitive."""

    __slots__ = ("member", "inner")

    def __init__(self, member: Backend, inner: Any):
        self.member = member
        self.inner = inner

    @property
    def shape(self) -> tuple[int, ...]:
        return self.inner.shape

    def __repr__(self) -> str:
        return f"RouterPrimitive({self.member.name}, {self.inner!r})"


class Router(Backend):
    """``Router(members)`` is one backend whose devices are all of its members' devices; each
    op runs on the member that owns its inputs' device, and ``to_device`` moves tensors from
    one member to another (through the host: the source reads the values back, the target
    uploads them; within one member, the member's own ``to_device``).

    ``burnish.backend("router(ndarray,wgpu)")`` is ``Router([ndarray, wgpu])``: one instance
    per list of members, in order; the first member's default device is the router's default
    device, so ``router(wgpu,ndarray)`` creates tensors on the GPU unless told otherwise.
    Members are any backends, decorators included (``router(fusion+wgpu,ndarray)``); autodiff
    goes outside (``autodiff+router(ndarray,wgpu)``), where gradients flow across moves, and
    fusion may go outside too (``fusion+router(wgpu,ndarray)`` fuses the wgpu member's ops).

    A router device is written ``<member>/<type>:<index>`` (``wgpu/wgpu:0``); its ``native`` is
    the member's device. An op given tensors on two members raises ``DeviceError`` naming
    both devices.
    """

    _members: tuple[Backend, ...]
    _devices: list[Device] | None
    #: The router's device for each member device, made once.
    _wrapped: dict[Device, Device]

    # A quantized operand is a bundle of primitives (``QuantizedPrimitive``), which routing
    # does not look into: the protocol's defaults compose these ops from routed ones.
    quantize_params = QuantOps.quantize_params
    quantize = QuantOps.quantize
    dequantize = QuantOps.dequantize
    quantized_matmul = QuantOps.quantized_matmul
    quantized_linear = QuantOps.quantized_linear
    quantized_conv = QuantOps.quantized_conv

    def __new__(cls, members: Sequence[Backend]) -> Router:
        members = tuple(members)
        _check_members(members)
        key = tuple(id(m) for m in members)
        with _lock:
            found = _instances.get(key)
            if found is None:
                found = super().__new__(cls)
                found._members = members
                found._devices = None
                found._wrapped = {}
                found.name = f"router({','.join(m.name for m in members)})"
                found.values_on_host = all(m.values_on_host for m in members)
                _instances[key] = found
        return found

    def __init__(self, members: Sequence[Backend]) -> None:
        pass  # __new__ set everything up, once per list of members

    def __repr__(self) -> str:
        return f"Router({list(self._members)!r})"

    @property
    def members(self) -> tuple[Backend, ...]:
        """The backends this router routes to, in the order of its name."""
        return self._members

    def device(self, member: str | Backend, index: int | None = None) -> Device:
        """The router's device for ``member``'s default device (or its device of that
        ``index``): ``router.device("wgpu")``. Raises ``DeviceError`` naming the members when
        ``member`` is not one, or its devices when it has no device ``index``."""
        found = [m for m in self._members if m is member or m.name == member]
        if not found:
            raise DeviceError(f"{self.name} has no member {getattr(member, 'name', member)!r}; "
                              f"its members are {', '.join(m.name for m in self._members)}")
        chosen = found[0]
        if index is None:
            return self.wrap_device(chosen.default_device())
        for candidate in chosen.devices():
            if candidate.index == index:
                return self.wrap_device(candidate)
        raise DeviceError(f"{chosen.name} has no device {index}; it has "
                          f"{', '.join(str(d) for d in chosen.devices())}")

    # -- devices and dtypes -------------------------------------------------------------------

    def wrap_device(self, device: Device) -> Device:
        """The router's device that stands for ``device`` of one of its members."""
        found = self._wrapped.get(device)
        if found is None:
            member = device.backend
            if not any(member is m for m in self._members):
                raise DeviceError(f"{device!r} belongs to {member.name}, which is not a member "
                                  f"of {self.name}")
            found = self._wrapped.setdefault(
                device, Device(self, f"{member.name}/{device.type}", device.index, native=device))
        return found

    def devices(self) -> list[Device]:
        if self._devices is None:
            self._devices = [self.wrap_device(d) for m in self._members for d in m.devices()]
        return list(self._devices)

    def default_device(self) -> Device:
        return self.wrap_device(self._members[0].default_device())

    def dtypes(self, device: Device) -> tuple[DType, ...]:
        return device.native.backend.dtypes(device.native)

    def describe_device(self, device: Device) -> str:
        native = device.native
        described = native.backend.describe_device(native)
        return f"{native.backend.name} {native}" + (f": {described}" if described else "")

    def unsupported_reason(self, dtype: DType, device: Device) -> str:
        native = device.native
        reason = native.backend.unsupported_reason(dtype, native)
        return f"{native.backend.name}: {reason}" if reason else ""

    def seed(self, seed: int) -> None:
        for member in self._members:
            member.seed(seed)

    def sync(self, device: Device) -> None:
        device.native.backend.sync(device.native)

    def _device_of(self, x: RouterPrimitive) -> Device:
        return self.wrap_device(x.member._device_of(x.inner))

    def fuser(self) -> Any:
        """A fuser that drives every member's fuser (``fusion+router(wgpu,ndarray)``); None
        when no member has one."""
        fusers = {id(m): f for m in self._members if (f := m.fuser()) is not None}
        return RouterFuser(fusers) if fusers else None

    def capturer(self, device: Device) -> None:
        """None: a captured function runs eagerly on a router (a record would have to span
        several members' devices)."""
        return None

    # -- data in and out ----------------------------------------------------------------------

    def read(self, xs: Sequence[RouterPrimitive], dtypes: Sequence[DType]) -> list[TensorData]:
        """Each member reads its own primitives together (one synchronisation per member)."""
        groups: dict[int, list[int]] = {}
        for i, x in enumerate(xs):
            groups.setdefault(id(x.member), []).append(i)
        out: list[TensorData | None] = [None] * len(xs)
        for positions in groups.values():
            member = xs[positions[0]].member
            read = member.read([xs[i].inner for i in positions], [dtypes[i] for i in positions])
            for i, data in zip(positions, read):
                out[i] = data
        return out  # type: ignore[return-value]  # every position is filled

    def to_device(self, x: RouterPrimitive, dtype: DType, device: Device) -> RouterPrimitive:
        """``x`` on ``device``: the member's own move within one member, else through the
        host. Raises ``UnsupportedError`` naming both devices when the target lacks
        ``dtype``."""
        target = device.native.backend
        if target is x.member:
            return RouterPrimitive(target, target.to_device(x.inner, dtype, device.native))
        if dtype not in target.dtypes(device.native):
            source = self._device_of(x)
            reason = target.unsupported_reason(dtype, device.native)
            raise UnsupportedError(
                f"to_device: {dtype} cannot move from {source!r} to {device!r}: "
                f"{target.name} does not support it on {device.native}"
                f"{f' ({reason})' if reason else ''}")
        data = x.member.into_data(x.inner, dtype)
        return RouterPrimitive(target, target.from_data(data, device.native))

    # -- routing --------------------------------------------------------------------------------

    def _mixed(self, op: str, first: Any, second: Any) -> DeviceError:
        """The error for an op given tensors (or devices) of two members."""
        a, b = (self._device_of(v) if type(v) is RouterPrimitive else v for v in (first, second))
        return DeviceError(f"{op}: tensors are on different devices: {a!r} vs {b!r}; move one "
                           "with .to_device()")


def _check_members(members: tuple[Backend, ...]) -> None:
    """Raise ``BurnishError`` for members a router cannot be made of, saying what to write."""
    names = ", ".join(getattr(m, "name", type(m).__name__) for m in members)
    for member in members:
        if not isinstance(member, Backend):
            raise TypeError(f"Router routes to backends, got {type(member).__name__}")
        if isinstance(member, AutodiffOps):
            raise BurnishError(
                f"router({names}): {member.name} has autodiff, which goes outside the router "
                f"so that gradients flow across moves: write "
                f"'autodiff+router(...)' with members without autodiff")
    if len(members) < 2:
        raise BurnishError(f"router({names}): a router needs two or more backends, e.g. "
                           "'router(ndarray,wgpu)'")
    for i, member in enumerate(members):
        if any(member is other for other in members[:i]):
            raise BurnishError(f"router({names}): {member.name} is named twice; each backend "
                               "is a member once")


def _routed(name: str, wraps: int) -> Any:
    """The router's ``name`` op: its inputs' member runs it, on their inner primitives and
    devices; ``wraps`` says what it returns: 0 no primitive, 1 a primitive, 2 a sequence of
    them."""

    def op(self: Router, *args: Any, **kwargs: Any) -> Any:
        # Written for speed: every op of a model passes through here.
        member: Any = None
        seen: Any = None
        plain = list(args)
        for i, value in enumerate(plain):
            kind = type(value)
            if kind is RouterPrimitive:
                if member is None:
                    member, seen = value.member, value
                elif value.member is not member:
                    raise self._mixed(name, seen, value)
                plain[i] = value.inner
            elif kind is list or kind is tuple:
                if value and type(value[0]) is RouterPrimitive:
                    for item in value:
                        if member is None:
                            member, seen = item.member, item
                        elif item.member is not member:
                            raise self._mixed(name, seen, item)
                    plain[i] = [item.inner for item in value]
            elif isinstance(value, Device) and value.backend is self:
                native = value.native
                if member is None:
                    member, seen = native.backend, value
                elif native.backend is not member:
                    raise self._mixed(name, seen, value)
                plain[i] = native
        for key, value in kwargs.items():
            if type(value) is RouterPrimitive:
                if member is None:
                    member, seen = value.member, value
                elif value.member is not member:
                    raise self._mixed(name, seen, value)
                kwargs[key] = value.inner
            elif isinstance(value, Device) and value.backend is self:
                if member is None:
                    member, seen = value.native.backend, value
                elif value.native.backend is not member:
                    raise self._mixed(name, seen, value)
                kwargs[key] = value.native
        if member is None:
            raise BurnishError(f"{self.name}: {name} was given neither a tensor nor a device "
                               "of the router, so no member can run it")
        out = getattr(member, name)(*plain, **kwargs)
        if wraps == 1:
            return RouterPrimitive(member, out)
        if wraps == 2:
            items = [None if o is None else RouterPrimitive(member, o) for o in out]
            return items if type(out) is list else tuple(items)
        return out

    op.__name__ = name
    op.__qualname__ = f"Router.{name}"
    op.__doc__ = getattr(Backend, name).__doc__
    return op


def _route_ops() -> None:
    """Give ``Router`` every protocol op it does not define itself, as a routed op."""
    import abc

    for name in dir(Backend):
        function = getattr(Backend, name)
        if (name.startswith("__") or name in DEVICE_METHODS or name in Router.__dict__
                or not inspect.isfunction(function)):
            continue
        returns = str(inspect.signature(function).return_annotation)
        wraps = 0 if "Primitive" not in returns else (1 if returns == "Primitive" else 2)
        setattr(Router, name, _routed(name, wraps))
    abc.update_abstractmethods(Router)  # type: ignore[type-abstract]  # made concrete here


_route_ops()
