"""Hook specifications: the reference for plugin authors. A plugin is a module with ``@hookimpl``
functions, registered under the entry-point group ``burnish``::

    # pyproject.toml of a third-party package
    [project.entry-points.burnish]
    mybackend = "mypackage.plugin"

    # mypackage/plugin.py
    from burnish.plugins import BackendInfo, hookimpl

    @hookimpl
    def burnish_backends():
        return [BackendInfo("mybackend", factory=make_backend, package="mypackage")]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from burnish.backend import Backend

hookspec = pluggy.HookspecMarker("burnish")
hookimpl = pluggy.HookimplMarker("burnish")


@dataclass(frozen=True)
class BackendInfo:
    """A backend a plugin offers: its name, how to make it, and the distribution that ships it.

    ``factory`` is called once, on first use, so importing heavy libraries (CuPy, wgpu) waits until
    the backend is asked for. It may raise ``burnish.errors.UnsupportedError`` when the machine
    cannot run the backend (no GPU, no driver); the message is shown to the user.
    """

    name: str
    factory: Callable[[], Backend]
    package: str
    description: str = ""


@dataclass(frozen=True)
class DecoratorInfo:
    """A backend decorator (``autodiff``, ``fusion``): ``factory(inner)`` wraps a backend."""

    name: str
    factory: Callable[[Backend], Backend]
    package: str
    description: str = ""


@dataclass(frozen=True)
class CompositeInfo:
    """A backend made of several backends (``router``): ``factory(members)`` combines them,
    written ``NAME(MEMBER,MEMBER,...)`` in a backend name: ``router(ndarray,wgpu)``. Each
    member is itself any backend name, decorators included (``fusion+wgpu``)."""

    name: str
    factory: Callable[[list[Backend]], Backend]
    package: str
    description: str = ""


@hookspec
def burnish_backends() -> list[BackendInfo]:
    """The backends this plugin provides."""


@hookspec
def burnish_backend_decorators() -> list[DecoratorInfo]:
    """The backend decorators this plugin provides, used in names such as ``autodiff+ndarray``."""


@hookspec
def burnish_composite_backends() -> list[CompositeInfo]:
    """The composite backends this plugin provides, used in names such as
    ``router(ndarray,wgpu)`` (and ``autodiff+router(ndarray,wgpu)``)."""


@hookspec
def burnish_record_formats() -> list[Any]:
    """The record formats this plugin provides: ``burnish.record.RecordFormat`` instances."""


@hookspec
def burnish_onnx_converters() -> list[Any]:
    """The ONNX operator converters this plugin provides: ``burnish.onnx.Converter`` instances.

    A converter turns one ONNX node into lines of the generated module's ``forward`` (and the
    layers or parameters they use). For one ``(domain, op_type)`` the converter of highest
    ``priority`` wins; at equal priority a third-party plugin's wins over burnish-import-onnx's,
    so a package can add an operator or replace a first-party converter.
    """
