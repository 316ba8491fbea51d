"""Registers the fusion decorator with burnish's plugin manager: ``fusion+<backend>``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.plugins import DecoratorInfo, hookimpl

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.fusion.backend import Fusion


def _fusion(inner: Backend) -> Fusion:
    from burnish.fusion.backend import Fusion

    return Fusion(inner)  # type: ignore[abstract]  # the ops are bound per instance


@hookimpl
def burnish_backend_decorators() -> list[DecoratorInfo]:
    return [DecoratorInfo("fusion", _fusion, "burnish-fusion",
                          "lazy execution: runs of elementwise ops become one generated kernel")]
