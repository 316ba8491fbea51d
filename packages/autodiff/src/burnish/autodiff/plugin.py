"""Registers the autodiff decorator with burnish's plugin manager (``autodiff+<backend>``)."""

from __future__ import annotations

from burnish.plugins import DecoratorInfo, hookimpl


def _wrap(inner):
    from burnish.autodiff.backend import Autodiff

    return Autodiff(inner)


@hookimpl
def burnish_backend_decorators() -> list[DecoratorInfo]:
    return [DecoratorInfo("autodiff", _wrap, "burnish-autodiff",
                          "reverse-mode gradients around any backend")]
