"""Registers the remote backend with burnish's plugin manager."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.plugins import BackendInfo, hookimpl

if TYPE_CHECKING:
    from burnish.remote.backend import RemoteBackend


def _make() -> RemoteBackend:
    from burnish.remote.backend import RemoteBackend

    return RemoteBackend()  # type: ignore[abstract]  # the ops are attached at import


@hookimpl
def burnish_backends() -> list[BackendInfo]:
    return [BackendInfo("remote", _make, "burnish-remote",
                        "tensors on burnish servers over WebSocket (ws://host:port)")]
