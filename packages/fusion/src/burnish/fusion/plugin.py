"""Registers the fusion decorator with burnish's plugin manager: ``fusion+<backend>``."""

from __future__ import annotations

from burnish.plugins import DecoratorInfo, hookimpl


def _fusion(inner):
    from burnish.fusion.backend import Fusion

    return Fusion(inner)


@hookimpl
def burnish_backend_decorators() -> list[DecoratorInfo]:
    return [DecoratorInfo("fusion", _fusion, "burnish-fusion",
                          "lazy execution: runs of elementwise ops become one generated kernel")]
