"""Registers the router with burnish's plugin manager: ``router(<backend>,<backend>,...)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.plugins import CompositeInfo, hookimpl

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.router.backend import Router


def _router(members: list[Backend]) -> Router:
    from burnish.router.backend import Router

    return Router(members)  # type: ignore[abstract]  # the ops are routed per class, at import


@hookimpl
def burnish_composite_backends() -> list[CompositeInfo]:
    return [CompositeInfo("router", _router, "burnish-router",
                          "one backend over several: each op runs where its inputs live")]
