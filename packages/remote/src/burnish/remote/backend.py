"""``RemoteBackend``: the backend whose devices are burnish servers, every op forwarded by name."""

from __future__ import annotations

import abc
import os
import threading
from collections.abc import Sequence
from typing import Any

from burnish.backend import Backend
from burnish.device import Device
from burnish.dtype import DType
from burnish.errors import DeviceError, UnsupportedError
from burnish.remote import protocol
from burnish.remote.client import BATCH, Connection, RemoteTensor
from burnish.remote.shapes import LIST, ONE, RULES, TUPLE, same_shape
from burnish.tensor_data import TensorData

#: Where the default device is: a server's address (``ws://host:port`` or ``wss://...``).
URL_VARIABLE = "BURNISH_REMOTE_URL"


class RemoteBackend(Backend):
    """Tensors on burnish servers (``python -m burnish.remote serve``), one device per server.

    ``device(url)`` connects to a server (``ws://host:port``; ``wss://`` with TLS) and returns
    its device; the default device is the server named by ``BURNISH_REMOTE_URL``, the token
    comes from ``token=`` or ``BURNISH_REMOTE_TOKEN``. Every op of the protocol is sent to the
    server of its operands, queued and batched: an op costs no round trip when its results'
    shapes follow from its arguments' (every op but the module ops: convolutions, pools,
    interpolation, batch norm, attention, recurrent cells, whose shapes are asked once per
    distinct call and then remembered); reading values (``into_data``, ``read``) and ``sync``
    wait for the server. Tensors move between two servers directly (``to_device``).
    """

    name = "remote"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._devices: dict[str, Device] = {}
        self._seed: int | None = None

    # -- devices --------------------------------------------------------------------------------

    def device(self, url: str, token: str | None = None, cafile: str | None = None) -> Device:
        """The device of the server at ``url``, connecting the first time; ``token`` defaults to
        ``BURNISH_REMOTE_TOKEN``, ``cafile`` (a CA bundle for ``wss://``) to
        ``BURNISH_REMOTE_CAFILE``. Raises DeviceError when the server cannot be reached or
        refuses the token."""
        url = url.rstrip("/")
        with self._lock:
            found = self._devices.get(url)
            if found is None or found.native.closed:
                connection = Connection(url, token, cafile)
                index = found.index if found is not None else len(self._devices)
                found = Device(self, "remote", index, native=connection)
                self._devices[url] = found
                if self._seed is not None:
                    connection.enqueue(["seed", 0, [self._seed]])
        return found

    def disconnect(self, url: str | None = None) -> None:
        """Close the connection to the server at ``url`` (every server's when None): the
        server frees this client's tensors; a later use of that device connects anew."""
        with self._lock:
            for key, device in list(self._devices.items()):
                if url is None or key == url.rstrip("/"):
                    device.native.close()

    def devices(self) -> list[Device]:
        if not self._devices and os.environ.get(URL_VARIABLE):
            self.default_device()
        return list(self._devices.values())

    def default_device(self) -> Device:
        url = os.environ.get(URL_VARIABLE)
        if url:
            return self.device(url)
        live = [d for d in self._devices.values() if not d.native.closed]
        if live:  # (a server that stopped is no default)
            return live[0]
        # Unsupported, as a GPU backend without its device: nothing here to run on.
        raise UnsupportedError(f"the remote backend has no server: set {URL_VARIABLE} to one "
                               "(ws://host:port) or connect with burnish.remote.connect(url)")

    def dtypes(self, device: Device) -> tuple[DType, ...]:
        return device.native.dtypes

    def describe_device(self, device: Device) -> str:
        connection = device.native
        return f"{connection.url} ({connection.backend_name} {connection.device_name})"

    def _device_of(self, x: Any) -> Device:
        for device in self._devices.values():
            if device.native is x.connection:
                return device
        raise DeviceError(f"{x!r} belongs to a closed connection")

    def seed(self, seed: int) -> None:
        """Reseed the backends of every server connected now and later (a server's generators
        are shared by its clients)."""
        self._seed = seed
        for device in list(self._devices.values()):
            if not device.native.closed:  # a closed one is reseeded when it connects again
                device.native.enqueue(["seed", 0, [seed]])

    def sync(self, device: Device) -> None:
        """Wait until the server has run every op sent to it (raising the first that failed)."""
        device.native.request(["sync"])

    # -- data in and out ------------------------------------------------------------------------

    def from_data(self, data: TensorData, device: Device) -> RemoteTensor:
        connection: Connection = device.native
        with connection.lock:
            handle = next(connection.next_id)
            connection.enqueue(["from_data", handle, [data, device]])
            # Sent now: the caller may change its array as soon as this returns.
            connection.send(None)
        return RemoteTensor(connection, handle, tuple(data.shape))

    def into_data(self, x: RemoteTensor, dtype: DType) -> TensorData:
        return x.connection.read([x], [dtype])[0]

    def read(self, xs: Sequence[RemoteTensor], dtypes: Sequence[DType]) -> list[TensorData]:
        """Several tensors read together: one round trip per server."""
        by_connection: dict[int, list[int]] = {}
        for i, x in enumerate(xs):
            by_connection.setdefault(id(x.connection), []).append(i)
        out: list[Any] = [None] * len(xs)
        for positions in by_connection.values():
            connection = xs[positions[0]].connection
            values = connection.read([xs[i] for i in positions], [dtypes[i] for i in positions])
            for i, value in zip(positions, values):
                out[i] = value
        return out

    def to_device(self, x: RemoteTensor, dtype: DType, device: Device) -> RemoteTensor:
        """``x`` on another server, sent by its server to the other one directly."""
        source, target = x.connection, device.native
        if source is target:
            return x
        from burnish.remote.transfer import transfer

        return transfer(x, dtype, target)

    def __repr__(self) -> str:
        return "RemoteBackend()"


def _connection_of(args: tuple[Any, ...], device_at: int | None) -> Connection:
    if device_at is not None and len(args) > device_at:
        return args[device_at].native
    for arg in args:
        if type(arg) is RemoteTensor:
            return arg.connection
        if type(arg) in (list, tuple) and arg and type(arg[0]) is RemoteTensor:
            return arg[0].connection
    raise DeviceError("a remote op got no remote tensor and no device")


def _signature(value: Any) -> Any:
    """What an op's result shapes depend on: its arguments, tensors replaced by their shapes."""
    kind = type(value)
    if kind is RemoteTensor:
        return ("tensor", value.shape)
    if kind in (tuple, list):
        return tuple(_signature(v) for v in value)
    if isinstance(value, DType):
        return value.name
    if isinstance(value, Device):
        return "device"
    return value


def _results(connection: Connection, first: int, form: int,
             shapes: list[tuple[int, ...]]) -> Any:
    if form == ONE:
        return RemoteTensor(connection, first, tuple(shapes[0]))
    made = [RemoteTensor(connection, first + i, tuple(s)) for i, s in enumerate(shapes)]
    if form == TUPLE:
        return tuple(made)
    if form == LIST:
        return made
    return None


def _allocate(connection: Connection, count: int) -> int:
    """The first of ``count`` consecutive handles (under the connection's lock when several)."""
    if count <= 1:
        return next(connection.next_id)
    with connection.lock:
        first = next(connection.next_id)
        for _ in range(count - 1):
            next(connection.next_id)
    return first


def _forwarded(name: str, params: tuple[str, ...]) -> Any:
    rule = RULES.get(name)
    #: The result has the first operand's shape (elementwise ops, scalar ops, casts...).
    same = rule is same_shape
    device_at = params.index("device") if "device" in params else None

    def positional(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        missing = params[len(args):]
        extra = set(kwargs) - set(missing)
        if extra:
            raise TypeError(f"{name}() got unexpected keyword arguments {sorted(extra)}")
        return (*args, *(kwargs[p] for p in missing if p in kwargs))

    def op(self: RemoteBackend, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = positional(args, kwargs)
        if args and type(args[0]) is RemoteTensor:  # most ops: found at once
            x = args[0]
            connection = x.connection
            if same:  # elementwise ops, the commonest: queued without a call
                handle = next(connection.next_id)
                with connection.lock:
                    queue = connection.ops
                    queue.append([name, handle, args])
                    if len(queue) >= BATCH:
                        connection.send(None)
                return RemoteTensor(connection, handle, x.shape)
        else:
            connection = _connection_of(args, device_at)
        known = rule(*args) if rule is not None else None
        if known is None:
            return _learned(connection, name, args)
        form, shapes = known
        if form == ONE:  # most ops, without the generic path's calls
            handle = next(connection.next_id)
            connection.enqueue([name, handle, args])
            return RemoteTensor(connection, handle, shapes[0])
        first = _allocate(connection, len(shapes))
        connection.enqueue([name, first, args])
        return _results(connection, first, form, shapes)

    op.__name__ = name
    op.__qualname__ = f"RemoteBackend.{name}"
    op.__doc__ = getattr(Backend, name).__doc__
    return op


def _learned(connection: Connection, name: str, args: tuple[Any, ...]) -> Any:
    """An op without a shape rule: the shapes learned from an earlier call with the same
    argument shapes, else one round trip that runs it and answers them."""
    try:
        key: Any = (name, _signature(args))
        hash(key)
    except TypeError:
        key = None
    known = connection.learned.get(key) if key is not None else None
    if known is not None:
        form, shapes = known
        first = _allocate(connection, len(shapes))
        connection.enqueue([name, first, args])
        return _results(connection, first, form, shapes)
    with connection.lock:
        first = next(connection.next_id)
        form, shapes = connection.request(["call", name, first, list(args)])
        for _ in range(len(shapes) - 1):
            next(connection.next_id)
    shapes = [tuple(s) for s in shapes]
    if key is not None:
        connection.learned[key] = (form, shapes)
    return _results(connection, first, form, shapes)


for _name, _params in protocol.OPS.items():
    if _name not in RemoteBackend.__dict__:
        setattr(RemoteBackend, _name, _forwarded(_name, _params))
abc.update_abstractmethods(RemoteBackend)  # type: ignore[type-abstract]
