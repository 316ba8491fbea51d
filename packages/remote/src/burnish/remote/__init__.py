"""burnish.remote: a backend whose devices are burnish servers on other machines (or processes).

``python -m burnish.remote serve --backend cuda --host 0.0.0.0 --port 3000`` serves a backend;
``burnish.remote.connect("ws://host:3000")`` (or ``BURNISH_REMOTE_URL``) gives the device of
that server on the client's ``remote`` backend, usable under ``autodiff``. Ops are streamed in
batches without a round trip each; tensors move between two servers directly. See
docs/remote.md for the protocol, its security, and what a fault does.
"""

from __future__ import annotations

from burnish.device import Device
from burnish.remote.protocol import RemoteError
from burnish.remote.server import Server

__all__ = ["RemoteError", "Server", "connect"]


def connect(url: str, token: str | None = None, cafile: str | None = None) -> Device:
    """The device of the burnish server at ``url`` (``ws://host:port``, ``wss://`` with TLS)
    on the ``remote`` backend, connecting once; ``token`` defaults to ``BURNISH_REMOTE_TOKEN``,
    ``cafile`` to ``BURNISH_REMOTE_CAFILE``. Raises DeviceError when the server is unreachable
    or refuses the token."""
    import burnish

    return burnish.backend("remote").device(url, token, cafile)  # type: ignore[attr-defined]
