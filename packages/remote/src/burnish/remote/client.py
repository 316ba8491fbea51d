"""One client's connection to a server: the op stream, its batches, and the requests that wait."""

from __future__ import annotations

import itertools
import os
import ssl
import threading
from typing import Any

import msgpack
import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI
from websockets.sync.client import ClientConnection, connect

from burnish import errors as _errors
from burnish.dtype import DType, get_dtype
from burnish.errors import DeviceError
from burnish.remote import protocol
from burnish.remote.protocol import RemoteError
from burnish.tensor_data import TensorData

#: Ops queued before a batch is sent without waiting for a read.
BATCH = 256
#: Seconds between keepalive pings, and how long a ping may wait for its pong: a server that
#: died without closing its socket (power cut, network gone) is noticed within their sum.
PING_INTERVAL, PING_TIMEOUT = 5.0, 10.0
#: Seconds a connection may take to open.
OPEN_TIMEOUT = 10.0

#: The error types a server's error may be raised as on the client (anything else is a
#: RemoteError): burnish's own, and Python's ordinary argument errors.
_RAISABLE: dict[str, type[Exception]] = {
    name: cls for name, cls in vars(_errors).items()
    if isinstance(cls, type) and issubclass(cls, Exception)
}
_RAISABLE.update({cls.__name__: cls for cls in (ValueError, TypeError, IndexError, KeyError,
                                                 ZeroDivisionError, NotImplementedError,
                                                 MemoryError, OverflowError)})


class _ClientConnection(ClientConnection):
    """websockets' connection, reading its socket ``RECV_SIZE`` bytes at a time (a tensor's
    frames arrive in fewer, larger reads)."""

    recv_bufsize = protocol.RECV_SIZE


class RemoteTensor:
    """A client's primitive: a handle to a tensor on a server, with its shape."""

    __slots__ = ("connection", "id", "shape", "__weakref__")

    def __init__(self, connection: Connection, id: int, shape: tuple[int, ...]):
        self.connection = connection
        self.id = id
        self.shape = shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __del__(self) -> None:
        # A list append: safe from any thread, and from the garbage collector.
        self.connection.frees.append(self.id)

    def __repr__(self) -> str:
        return f"RemoteTensor({self.connection.url}, #{self.id}, shape={self.shape})"


def raise_remote(error: list[Any], url: str) -> None:
    """Raise what the server at ``url`` reported: ``[type name, message]``."""
    name, message = str(error[0]), str(error[1])
    cls = _RAISABLE.get(name)
    if cls is None:
        raise RemoteError(f"server {url}: {name}: {message}")
    try:
        exception = cls(message)
    except TypeError:  # an error class whose constructor wants more than a message
        raise RemoteError(f"server {url}: {name}: {message}") from None
    exception.add_note(f"(raised by the burnish server at {url})")
    raise exception


class Connection:
    """A WebSocket to one server, the ops queued for it, and the handles this client made.

    Ops are queued and sent in batches (``BATCH`` ops, or sooner when something must be read);
    the server runs them in order, answering only requests. Handles are numbered by the client,
    so no op waits for the server to name its results.
    """

    def __init__(self, url: str, token: str | None = None, cafile: str | None = None):
        self.url = url
        token = token if token is not None else os.environ.get("BURNISH_REMOTE_TOKEN")
        if not token:
            raise DeviceError(f"connecting to {url}: no token; pass token= or set "
                              "BURNISH_REMOTE_TOKEN to the server's token")
        self.token = token
        context = None
        if url.startswith("wss://"):
            context = ssl.create_default_context(
                cafile=cafile or os.environ.get("BURNISH_REMOTE_CAFILE") or None)
        try:
            self.socket: ClientConnection = connect(
                url, legacy=True, ssl=context, compression=None, max_size=protocol.MAX_FRAME,
                additional_headers={"Authorization": f"Bearer {token}"},
                open_timeout=OPEN_TIMEOUT, ping_interval=PING_INTERVAL,
                ping_timeout=PING_TIMEOUT, close_timeout=2, create_connection=_ClientConnection)
        except InvalidStatus as error:
            status = error.response.status_code
            why = "the token was refused" if status == 401 else f"HTTP status {status}"
            raise DeviceError(f"connecting to burnish server {url}: {why}") from None
        except InvalidURI as error:
            raise DeviceError(f"{url!r} is not a WebSocket address (ws://host:port or "
                              f"wss://host:port): {error}") from None
        except (OSError, TimeoutError) as error:
            raise DeviceError(f"cannot connect to burnish server {url}: "
                              f"{type(error).__name__}: {error}") from None
        self.ops: list[Any] = []
        self.frees: list[int] = []
        self.lock = threading.RLock()
        self.next_id = itertools.count(1)
        #: Result forms and shapes of ops without a shape rule, by op and argument shapes.
        self.learned: dict[Any, tuple[int, list[tuple[int, ...]]]] = {}
        self.closed = False
        info = self.request(["hello"])
        self.backend_name: str = info["backend"]
        self.device_name: str = info["device"]
        self.dtypes: tuple[DType, ...] = tuple(get_dtype(d) for d in info["dtypes"])

    # -- the stream -----------------------------------------------------------------------------

    def enqueue(self, op: list[Any]) -> None:
        """Queue ``op``; send the queue once it is a batch."""
        with self.lock:  # (a DataLoader's worker threads make tensors too)
            self.ops.append(op)
            if len(self.ops) >= BATCH:
                self.send(None)

    def send(self, request: Any) -> None:
        """Send what is queued and ``request`` (None: nothing is awaited) as one message."""
        if self.closed:
            raise RemoteError(f"the connection to burnish server {self.url} is closed")
        ops, self.ops = self.ops, []
        # Taken from the front, not swapped: a tensor collected on another thread meanwhile
        # appends to the same list, and its free goes with the next message.
        count = len(self.frees)
        frees = self.frees[:count]
        del self.frees[:count]
        payloads: list[np.ndarray] = []
        message = protocol.pack([ops, frees, request], RemoteTensor, payloads)
        # The payloads' sizes follow the ops as a second msgpack value of the same frame.
        message += msgpack.packb([p.nbytes for p in payloads] if payloads else None)
        try:
            self.socket.send(message)
            for array in payloads:
                for chunk in protocol.chunks(array):
                    self.socket.send(chunk)
        except ConnectionClosed as error:
            self.fail(error)

    def request(self, request: Any) -> Any:
        """Send the queue with ``request`` and return the server's answer (raising its error)."""
        with self.lock:
            self.send(request)
            error, result, sizes = self.receive()
            payloads = [self.receive_bytes(size) for size in sizes or ()]
        if error is not None:
            raise_remote(error, self.url)
        return (result, payloads) if sizes is not None else result

    def receive(self) -> Any:
        try:
            frame = self.socket.recv()
        except ConnectionClosed as error:
            self.fail(error)
        return msgpack.unpackb(frame)

    def receive_bytes(self, size: int) -> np.ndarray:
        """A payload of ``size`` bytes, from as many frames as the server cut it into."""
        buffer = protocol.receive_buffer(size)
        view = buffer.data
        at = 0
        while True:
            try:
                frame = self.socket.recv()
            except ConnectionClosed as error:
                self.fail(error)
            if not isinstance(frame, bytes) or at + len(frame) > size:
                raise RemoteError(f"burnish server {self.url} sent a payload frame larger than "
                                  f"the {size - at} bytes announced, or a text frame")
            view[at:at + len(frame)] = frame
            at += len(frame)
            if at >= size:
                return buffer

    def fail(self, error: ConnectionClosed) -> Any:
        self.closed = True
        reason = error.rcvd.reason if error.rcvd is not None else ""
        why = f": {reason}" if reason else " (the server stopped or the network failed)"
        raise RemoteError(f"lost the connection to burnish server {self.url}{why}") from None

    # -- requests -------------------------------------------------------------------------------

    def read(self, xs: list[RemoteTensor], dtypes: list[DType]) -> list[TensorData]:
        """The values of ``xs`` (one round trip for all of them)."""
        infos, payloads = self.request(["read", [x.id for x in xs], [d.name for d in dtypes]])
        out = []
        for (dtype, shape), payload, wanted in zip(infos, payloads, dtypes):
            array = np.frombuffer(payload, dtype=get_dtype(dtype).numpy).reshape(tuple(shape))
            out.append(TensorData(array, wanted))
        return out

    def close(self) -> None:
        """Close the connection; the server frees every tensor of this client."""
        if not self.closed:
            self.closed = True
            self.socket.close()
