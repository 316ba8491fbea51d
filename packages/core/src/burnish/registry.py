"""Backends by name: ``backend("ndarray")``, ``backend("autodiff+wgpu")``,
``backend("autodiff+router(ndarray,wgpu)")``, and the default one."""

from __future__ import annotations

import os
import threading

from burnish.backend import Backend
from burnish.device import Device
from burnish.errors import BackendNotInstalledError, BurnishError
from burnish.plugins import (
    KNOWN_PACKAGES,
    BackendInfo,
    CompositeInfo,
    DecoratorInfo,
    plugin_manager,
)

_lock = threading.RLock()
_instances: dict[str, Backend] = {}
_infos: dict[str, BackendInfo] | None = None
_decorators: dict[str, DecoratorInfo] | None = None
_composites: dict[str, CompositeInfo] | None = None
_default: Backend | None = None
_seed: int | None = None


#: Device names from other frameworks (PyTorch's ``"cpu"``, ``"mps"``...), which name a kind of
#: device where burnish names a backend: what to write instead.
OTHER_DEVICE_NAMES = {
    "cpu": "burnish's CPU backends are 'cpu' (compiled kernels: pip install "
           "burnish-backend-cpu) and 'ndarray' (NumPy, always installed): write "
           "device='ndarray' for the latter",
    "gpu": "GPUs are reached through a backend: device='cuda' for NVIDIA, 'wgpu' for Vulkan, "
           "Metal or DX12, 'rocm' for AMD or OpenCL",
    "mps": "Apple GPUs run on the 'wgpu' backend, through Metal: write device='wgpu'",
    "metal": "Metal runs on the 'wgpu' backend: write device='wgpu'",
    "vulkan": "Vulkan runs on the 'wgpu' backend: write device='wgpu'",
    "opencl": "OpenCL runs on the 'rocm' backend: write device='rocm'",
    "hip": "AMD GPUs run on the 'rocm' backend, through OpenCL: write device='rocm'",
}


def backend_infos() -> dict[str, BackendInfo]:
    """Every installed backend, by name."""
    global _infos
    if _infos is None:
        infos: dict[str, BackendInfo] = {}
        for batch in plugin_manager().hook.burnish_backends():
            for info in batch or ():
                infos.setdefault(info.name, info)
        _infos = infos
    return _infos


def decorator_infos() -> dict[str, DecoratorInfo]:
    """Every installed backend decorator, by name."""
    global _decorators
    if _decorators is None:
        found: dict[str, DecoratorInfo] = {}
        for batch in plugin_manager().hook.burnish_backend_decorators():
            for info in batch or ():
                found.setdefault(info.name, info)
        _decorators = found
    return _decorators


def composite_infos() -> dict[str, CompositeInfo]:
    """Every installed composite backend (``router``), by name."""
    global _composites
    if _composites is None:
        found: dict[str, CompositeInfo] = {}
        for batch in plugin_manager().hook.burnish_composite_backends():
            for info in batch or ():
                found.setdefault(info.name, info)
        _composites = found
    return _composites


def backend(name: str | Backend | None = None) -> Backend:
    """The backend called ``name``; decorators are written first: ``"autodiff+ndarray"``; a
    composite backend names its members in parentheses, each any backend name:
    ``"autodiff+router(ndarray,fusion+wgpu)"`` (spaces are ignored).

    Backends are made once per process and shared. ``None`` gives the default backend. Raises
    ``BackendNotInstalledError`` naming the package to install when a part is missing, and
    ``BurnishError`` for a name that does not parse (an unbalanced parenthesis, an empty part).
    """
    if isinstance(name, Backend):
        return name
    if name is None:
        return default_backend()
    with _lock:
        found = _instances.get(name)
        if found is not None:
            return found
        canonical = "".join(name.split())
        if canonical != name:
            return backend(canonical)
        *decorators, base = split_name(name, "+")
        infos = backend_infos()
        if decorators:
            result = backend(base)
        elif "(" in base:
            result = _composite(base)
        elif base in infos:
            result = infos[base].factory()
        else:
            raise BackendNotInstalledError(base, KNOWN_PACKAGES.get(base), sorted(infos),
                                           OTHER_DEVICE_NAMES.get(base.lower()))
        for decorator in reversed(decorators):
            result = decorate(decorator, result)
        if _seed is not None:
            result.seed(_seed)
        _instances[name] = result
        return result


def split_name(name: str, separator: str) -> list[str]:
    """``name`` split at each ``separator`` outside parentheses:
    ``split_name("autodiff+router(ndarray,fusion+wgpu)", "+")`` is
    ``["autodiff", "router(ndarray,fusion+wgpu)"]``. Raises ``BurnishError`` for an empty part
    or unbalanced parentheses."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(name):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise BurnishError(f"backend name {name!r}: a ')' at position {i} closes "
                                   "nothing")
        elif char == separator and depth == 0:
            parts.append(name[start:i])
            start = i + 1
    if depth:
        raise BurnishError(f"backend name {name!r}: {depth} '(' not closed")
    parts.append(name[start:])
    if not all(parts):
        raise BurnishError(f"backend name {name!r}: an empty part between {separator!r}s; "
                           "write names such as 'autodiff+ndarray' or 'router(ndarray,wgpu)'")
    return parts


def _composite(base: str) -> Backend:
    """The composite backend ``base`` (``"router(ndarray,wgpu)"``), its members made first."""
    head, _, rest = base.partition("(")
    if not rest.endswith(")") or not head:
        raise BurnishError(f"backend name {base!r}: a composite backend is written "
                           "NAME(MEMBER,MEMBER,...), e.g. 'router(ndarray,wgpu)'")
    available = composite_infos()
    if head not in available:
        raise BackendNotInstalledError(head, KNOWN_PACKAGES.get(head), sorted(available))
    members = [backend(member) for member in split_name(rest[:-1], ",")]
    return available[head].factory(members)


def decorate(decorator: str, inner: Backend) -> Backend:
    """``inner`` wrapped by the installed decorator called ``decorator`` (``"autodiff"``)."""
    available = decorator_infos()
    if decorator not in available:
        raise BackendNotInstalledError(decorator, KNOWN_PACKAGES.get(decorator), sorted(available))
    return available[decorator].factory(inner)


def default_backend() -> Backend:
    """The backend used when no device is given: ``set_default_backend``, else the environment
    variable ``BURNISH_BACKEND``, else ``ndarray``."""
    global _default
    if _default is None:
        _default = backend(os.environ.get("BURNISH_BACKEND", "ndarray"))
    return _default


def set_default_backend(name: str | Backend) -> Backend:
    """Make ``name`` the default backend and return it."""
    global _default
    _default = backend(name)
    return _default


def default_device() -> Device:
    """The default backend's default device."""
    return default_backend().default_device()


def seed(value: int) -> None:
    """Seed every backend made so far and every one made later in this process."""
    global _seed
    _seed = value
    for instance in list(_instances.values()):
        instance.seed(value)



def forget() -> None:
    """Drop the cached lists of installed backends (after registering a plugin by hand)."""
    global _infos, _decorators, _composites
    _infos = None
    _decorators = None
    _composites = None
