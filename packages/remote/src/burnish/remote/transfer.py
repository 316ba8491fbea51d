"""Tensors moving from one server to another without passing through the client.

The client asks the source server to ``export`` a tensor under a random key: the source
connects to the target server as a client of its own (with the token the client gives it) and
deposits the tensor there under that key. The client then asks the target to ``import`` the
key into one of its handles. A deposit nobody imports is dropped after ``DEPOSIT_TTL`` seconds.
"""

from __future__ import annotations

import secrets
import ssl
import time
from typing import TYPE_CHECKING, Any

import msgpack
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

from burnish.dtype import DType, get_dtype
from burnish.remote import protocol
from burnish.remote.client import Connection, RemoteTensor
from burnish.remote.protocol import DEVICE_REF, Handle, RemoteError

if TYPE_CHECKING:
    from burnish.remote.server import Session

#: Seconds a deposited tensor waits to be imported.
DEPOSIT_TTL = 60.0


def transfer(x: RemoteTensor, dtype: DType, target: Connection) -> RemoteTensor:
    """``x`` (on its server) copied to ``target``'s server, server to server."""
    key = secrets.token_bytes(16)
    x.connection.request(["export", x.id, dtype.name, target.url, target.token, key])
    with target.lock:
        handle = next(target.next_id)
        target.request(["import", key, handle])
    return RemoteTensor(target, handle, x.shape)


def answer_transfer(session: Session, request: tuple[Any, ...]) -> Any:
    """The server's side of ``export``, ``import`` and ``deposit`` requests."""
    server = session.server
    kind = request[0]
    if kind == "export" and len(request) == 6:
        _, handle, dtype, url, token, key = request
        if not (type(handle) is int and isinstance(dtype, str) and isinstance(url, str)
                and isinstance(token, str) and isinstance(key, bytes) and len(key) == 16):
            raise ValueError("an export is [\"export\", handle, dtype, url, token, key]")
        session.raise_pending()
        primitive = session.resolve(Handle(handle), [])
        with server.lock:
            data = server.backend.into_data(primitive, get_dtype(dtype))
        _deposit(data, url, token, key)
        return None
    if kind == "import" and len(request) == 3:
        _, key, handle = request
        if not (isinstance(key, bytes) and type(handle) is int):
            raise ValueError("an import is [\"import\", key, handle]")
        with server.transfer_arrived:
            found = server.transfers.pop(key, None)
        if found is None:
            raise RemoteError("no tensor was sent to this server under that key (or it waited "
                              f"more than {DEPOSIT_TTL:.0f} s)")
        session.store(handle, found[1])
        return None
    if kind == "deposit" and len(request) == 3:
        _, key, handle = request
        if not (isinstance(key, bytes) and len(key) == 16 and type(handle) is int):
            raise ValueError("a deposit is [\"deposit\", key, handle]")
        primitive = session.resolve(Handle(handle), [])
        now = time.monotonic()
        with server.transfer_arrived:
            for old in [k for k, (t, _) in server.transfers.items() if now - t > DEPOSIT_TTL]:
                del server.transfers[old]
            server.transfers[key] = (now, primitive)
            server.transfer_arrived.notify_all()
        session.free(handle)
        return None
    raise ValueError(f"malformed {str(kind)[:20]} request")


def _deposit(data: Any, url: str, token: str, key: bytes) -> None:
    """Send ``data`` to the server at ``url`` under ``key``, as one of its clients."""
    context = ssl.create_default_context() if url.startswith("wss://") else None
    payloads: list[Any] = []
    message = protocol.pack([[["from_data", 1, [data, DEVICE_REF]]], [], ["deposit", key, 1]],
                            None, payloads)
    message += msgpack.packb([p.nbytes for p in payloads])
    try:
        with connect(url, ssl=context, compression=None, max_size=protocol.MAX_FRAME,
                     additional_headers={"Authorization": f"Bearer {token}"},
                     open_timeout=10, close_timeout=2) as socket:
            socket.send(message)
            for array in payloads:
                for chunk in protocol.chunks(array):
                    socket.send(chunk)
            error, _, _ = msgpack.unpackb(socket.recv(timeout=60))
    except (OSError, TimeoutError, WebSocketException) as failure:
        raise RemoteError(f"sending a tensor to {url}: {type(failure).__name__}: "
                          f"{failure}") from None
    if error is not None:
        raise RemoteError(f"{url} refused the tensor: {error[0]}: {error[1]}")
