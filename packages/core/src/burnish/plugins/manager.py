"""The one plugin manager: loads every plugin of the entry-point group ``burnish`` once."""

from __future__ import annotations

import functools
import warnings
from importlib import metadata

import pluggy

from burnish.plugins import hookspecs

#: The distribution that provides each first-party backend, decorator or composite backend,
#: for error messages.
KNOWN_PACKAGES = {
    "ndarray": "burnish-backend-ndarray",
    "cuda": "burnish-backend-cuda",
    "wgpu": "burnish-backend-wgpu",
    "rocm": "burnish-backend-rocm",
    "cpu": "burnish-backend-cpu",
    "autodiff": "burnish-autodiff",
    "fusion": "burnish-fusion",
    "router": "burnish-router",
    "remote": "burnish-remote",
}


@functools.cache
def plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, with every installed plugin registered."""
    pm = pluggy.PluginManager("burnish")
    pm.add_hookspecs(hookspecs)
    for entry_point in metadata.entry_points(group="burnish"):
        if pm.get_plugin(entry_point.name) is not None:
            continue
        try:
            plugin = entry_point.load()
        except Exception as error:  # a broken plugin must not take the others down
            warnings.warn(
                f"burnish plugin {entry_point.name!r} ({entry_point.value}) failed to load: "
                f"{type(error).__name__}: {error}",
                stacklevel=2,
            )
            continue
        pm.register(plugin, name=entry_point.name)
    return pm


def register(plugin: object, name: str | None = None) -> None:
    """Register a plugin object by hand (tests, notebooks); forgets the cached backend list."""
    plugin_manager().register(plugin, name=name)
    from burnish import registry

    registry.forget()


def distributions() -> list[tuple[str, str]]:
    """(name, version) of every installed burnish distribution: those named ``burnish`` or
    ``burnish-*`` (nn, train, jit, conformance register no plugin) and every one that
    registers burnish plugins (third parties)."""
    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        normalized = name.lower().replace("_", "-").replace(".", "-")
        ours = normalized == "burnish" or normalized.startswith("burnish-")
        if ours or any(ep.group == "burnish" for ep in dist.entry_points):
            found[name] = dist.version
    return sorted(found.items())
