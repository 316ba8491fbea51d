"""Plugins: the hook specifications and the plugin manager that finds installed plugins."""

from burnish.plugins.hookspecs import BackendInfo, CompositeInfo, DecoratorInfo, hookimpl, hookspec
from burnish.plugins.manager import KNOWN_PACKAGES, distributions, plugin_manager, register

__all__ = [
    "KNOWN_PACKAGES", "BackendInfo", "CompositeInfo", "DecoratorInfo", "distributions",
    "hookimpl", "hookspec", "plugin_manager", "register",
]
