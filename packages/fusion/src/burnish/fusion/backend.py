"""``Fusion``: the backend decorator that records ops lazily and fuses them into kernels."""

from __future__ import annotations

import threading
from typing import Any

from burnish.backend import Backend
from burnish.backend.decorator import WrapsDevices, forward_ops, on_inner_device
from burnish.device import Device

_lock = threading.Lock()
_instances: dict[int, Fusion] = {}

#: Protocol methods ``Fusion`` defines itself rather than forwarding.
class Fusion(WrapsDevices, Backend):
    """``Fusion(inner)`` runs every op of ``inner``, lazily where ``inner`` has a fuser.

    On a backend with a fuser (``inner.fuser()``: wgpu, rocm and cuda through ``burnish.jit``)
    elementwise ops (arithmetic, math, casts, comparisons, where and masks, activations written
    with them) and matrix products are recorded instead of launched; when a result is needed (a
    read, an op that is not recorded, ``sync``, or a long stream), the recorded ops become one
    generated kernel per output shape (a product's kernel evaluates the ops after it as its
    epilogue), and intermediates nobody references are never written to memory. Optimizer
    updates are deferred and run several per launch. On a backend without one (ndarray, a third
    party's) every op runs at once, as on ``inner``.

    One instance per inner backend: ``Fusion(wgpu) is Fusion(wgpu)``; it is what
    ``burnish.backend("fusion+wgpu")`` gives. Its name is ``"fusion+" + inner.name``, its
    devices wrap the inner backend's, its primitives are the inner backend's, and it composes
    with autodiff: ``"autodiff+fusion+wgpu"``.
    """

    #: The inner backend's fuser (``inner.fuser()``), None where it has none.
    _fuser: Any

    def __new__(cls, inner: Backend) -> Fusion:
        if not isinstance(inner, Backend):
            raise TypeError(f"Fusion wraps a backend, got {type(inner).__name__}")
        with _lock:
            found = _instances.get(id(inner))
            if found is None:
                found = super().__new__(cls)
                found._inner = inner
                found.name = f"fusion+{inner.name}"
                found._fuser = inner.fuser()
                found._wrapped = {}
                found._bind_ops()
                _instances[id(inner)] = found
        return found

    def __init__(self, inner: Backend) -> None:
        pass  # __new__ set everything up, once per inner backend

    def _bind_ops(self) -> None:
        """Give this instance each forwarded op as an attribute, made once: the inner backend's
        bound method itself where there is nothing to add (the ops the fuser names in
        ``eager``, which it never records; with no fuser, every op, looked up at each call),
        else wrapped to record (``begin()``/``end()`` around the call) and to take this
        backend's devices.
        Every op of a model passes through here, so the call costs no more than it must."""
        fuser = self._fuser
        eager: frozenset[str] = frozenset() if fuser is None else getattr(fuser, "eager",
                                                                            frozenset())
        for name, device_at in _FORWARDED.items():
            # Without a fuser, looked up on each call: what the inner backend's instance holds
            # then (a capture's recorder wraps its methods while it records).
            method = getattr(self._inner, name) if fuser is not None else \
                _looked_up(self._inner, name)
            if fuser is not None and name not in eager:
                method = _recording(method, fuser.begin, fuser.end)
            if device_at is not None:
                method = on_inner_device(method, device_at)
            self.__dict__[name] = method

    @property
    def inner(self) -> Backend:
        """The backend whose ops run."""
        return self._inner

    def __repr__(self) -> str:
        return f"Fusion({self._inner!r})"

    # -- devices and dtypes ---------------------------------------------------------------------

    def sync(self, device: Device) -> None:
        """Compute everything pending on ``device`` and wait for it."""
        if self._fuser is not None:
            self._fuser.flush(device.native)
        self._inner.sync(device.native)

    def fuser(self) -> None:
        return None  # the ops a Fusion forwards are already recorded by the inner fuser

    # -- introspection --------------------------------------------------------------------------

    def flush(self, device: Device) -> None:
        """Compute every pending tensor on ``device`` that is still referenced (no wait)."""
        if self._fuser is not None:
            self._fuser.flush(device.native)

    def programs(self, device: Device) -> list[Any]:
        """The fused kernels made so far on ``device`` (empty without a fuser)."""
        return [] if self._fuser is None else self._fuser.programs(device.native)

    def launches(self, device: Device) -> int | None:
        """Kernels launched on ``device`` so far (``None`` without a fuser)."""
        return None if self._fuser is None else self._fuser.launches(device.native)


def _looked_up(inner: Backend, name: str) -> Any:
    """``inner.<name>``, found when called."""

    def run(*args: Any, **kwargs: Any) -> Any:
        return getattr(inner, name)(*args, **kwargs)

    return run


def _recording(method: Any, begin: Any, end: Any) -> Any:
    """``method`` run with the fuser recording (``begin()``/``end()`` around it)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        begin()
        try:
            return method(*args, **kwargs)
        finally:
            end()

    return run


#: The protocol methods ``Fusion`` forwards to its inner backend, with where each takes its
#: device.
_FORWARDED = forward_ops(Fusion, frozenset({"fuser"}))
