"""Registers the autodiff decorators with burnish's plugin manager: ``autodiff+<backend>``, and
``autodiff-balanced+<backend>`` for balanced gradient checkpointing."""

from __future__ import annotations

from burnish.plugins import DecoratorInfo, hookimpl


def _plain(inner):
    from burnish.autodiff.backend import Autodiff

    return Autodiff(inner)


def _balanced(inner):
    from burnish.autodiff.backend import Autodiff

    return Autodiff(inner, checkpointing="balanced")


@hookimpl
def burnish_backend_decorators() -> list[DecoratorInfo]:
    return [
        DecoratorInfo("autodiff", _plain, "burnish-autodiff",
                      "reverse-mode gradients around any backend"),
        DecoratorInfo("autodiff-balanced", _balanced, "burnish-autodiff",
                      "autodiff that recomputes cheap ops in backward instead of keeping them"),
    ]
