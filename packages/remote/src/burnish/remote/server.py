"""The server: one backend shared by every client, each client's tensors its own."""

from __future__ import annotations

import hmac
import math
import os
import secrets
import ssl
import threading
from http import HTTPStatus
from typing import Any

import msgpack
import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import ServerConnection, serve

import burnish
from burnish.distribution import Distribution
from burnish.dtype import ALL_DTYPES, DType, get_dtype
from burnish.errors import BurnishError
from burnish.remote import protocol
from burnish.remote.protocol import DEVICE_REF, OPS, DataRef, DeviceRef, Handle
from burnish.remote.shapes import LIST, NONE, ONE, RULES, TUPLE, same_shape
from burnish.tensor_data import TensorData

#: The default bound on one tensor's element count (4 GiB of float32).
MAX_ELEMENTS = 1 << 30
_DISTRIBUTIONS = frozenset({"uniform", "normal", "bernoulli"})
_SCALARS = (bool, int, float, str, type(None))
#: Argument types that are used as they arrive.
_PLAIN = frozenset({bool, int, float, str, type(None), DType, Distribution})
#: Ops whose result shapes come from sizes the client writes, not from existing tensors alone.
_SHAPED_BY_CLIENT = frozenset({"empty", "zeros", "ones", "full", "random", "arange", "reshape",
                               "expand", "repeat_dim", "multinomial", "split", "topk_with_indices",
                               "slice"})


class ProtocolViolation(Exception):
    """A message that is not one of the protocol's: the connection is closed with the reason."""


class OpError(Exception):
    """An op that cannot run as sent (its name, arguments or handles): an error for the client."""


class _Poisoned(Exception):
    def __init__(self, error: list[str]):
        self.error = error


class _ServerConnection(ServerConnection):
    """websockets' connection, reading its socket ``RECV_SIZE`` bytes at a time (a tensor's
    frames arrive in fewer, larger reads)."""

    recv_bufsize = protocol.RECV_SIZE


class Server:
    """A burnish server running ``backend`` (a name such as ``"ndarray"`` or ``"cuda"``).

    It listens on ``host`` (localhost unless told otherwise) and ``port`` (0: any free one;
    ``url`` says which), accepts clients that present ``token`` (``BURNISH_REMOTE_TOKEN``, else
    a random one: ``token`` says which), and speaks TLS when ``certfile`` (and ``keyfile``)
    are given. ``max_elements`` bounds one tensor, ``max_client_bytes`` (None: no bound) all
    of one client's tensors together. ``start()`` serves on a thread (tests, notebooks),
    ``serve_forever()`` on the calling one; ``close()`` stops and frees every client's tensors.
    """

    def __init__(self, backend: str = "ndarray", host: str = "127.0.0.1", port: int = 0, *,
                 token: str | None = None, certfile: str | None = None,
                 keyfile: str | None = None, max_elements: int = MAX_ELEMENTS,
                 max_client_bytes: int | None = None):
        self.backend = burnish.backend(backend)
        self.device = self.backend.default_device()
        self.token = token or os.environ.get("BURNISH_REMOTE_TOKEN") or secrets.token_urlsafe(24)
        self._expected = f"Bearer {self.token}".encode()
        self.max_elements = max_elements
        self.max_client_bytes = max_client_bytes
        #: One op at a time on the backend, whichever client sent it.
        self.lock = threading.Lock()
        self.sessions: set[Session] = set()
        #: The backend's method for each op of the protocol: all a client can call.
        self.methods = {name: getattr(self.backend, name) for name in OPS}
        #: What running an op needs, looked up once per op: its method, how many arguments it
        #: takes, its shape rule, and whether the client writes its result sizes.
        self.table: dict[str, tuple[Any, int, Any, bool]] = {
            name: (method, len(OPS[name]), RULES.get(name), name in _SHAPED_BY_CLIENT)
            for name, method in self.methods.items()}
        #: Tensors sent by another server (``to_device``), by the key their sender was given.
        self.transfers: dict[bytes, Any] = {}
        self.transfer_arrived = threading.Condition()
        context = None
        if certfile:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certfile, keyfile)
        self.tls = context is not None
        self._server = serve(self._handle, host, port, ssl=context, compression=None,
                             max_size=protocol.MAX_FRAME, process_request=self._authorize,
                             ping_interval=5, ping_timeout=10, close_timeout=2,
                             server_header=None, create_connection=_ServerConnection)
        self.host, self.port = self._server.socket.getsockname()[:2]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The address clients connect to (``ws://host:port``, ``wss://`` with TLS)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'wss' if self.tls else 'ws'}://{host}:{self.port}"

    def start(self) -> Server:
        """Serve on a daemon thread; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, name="burnish-remote-server",
                                        daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def close(self) -> None:
        """Stop serving and drop every client (their tensors are freed)."""
        self._server.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def live_tensors(self) -> int:
        """How many tensors the connected clients hold, all together."""
        return sum(len(s.tensors) for s in list(self.sessions))

    def _authorize(self, connection: ServerConnection, request: Request) -> Response | None:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self._expected):
            return connection.respond(HTTPStatus.UNAUTHORIZED, "a valid token is required\n")
        return None

    def _handle(self, connection: ServerConnection) -> None:
        session = Session(self, connection)
        self.sessions.add(session)
        try:
            session.run()
        finally:
            self.sessions.discard(session)
            session.tensors.clear()
            session.poisoned.clear()


class Session:
    """One client: its tensors by handle, and the first error it has not been told of yet."""

    def __init__(self, server: Server, connection: ServerConnection):
        self.server = server
        self.connection = connection
        self.tensors: dict[int, Any] = {}
        #: The bound on this client's bytes, as the server's was when the client connected;
        #: without one, no sizes are kept.
        self.limit = server.max_client_bytes
        self.sizes: dict[int, int] = {}
        self.bytes = 0
        self.poisoned: dict[int, list[str]] = {}
        self.error: list[str] | None = None

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while True:
                frame = self.connection.recv()
                try:
                    self.message(frame)
                except ProtocolViolation as violation:
                    self.connection.close(1008, str(violation)[:120])
                    return
        except ConnectionClosed:
            return

    def message(self, frame: Any) -> None:
        if not isinstance(frame, bytes):
            raise ProtocolViolation("text frames are not part of the protocol")
        unpacker = msgpack.Unpacker(ext_hook=_ext_hook, use_list=False, raw=False,
                                    strict_map_key=True, max_buffer_size=protocol.MAX_FRAME)
        try:
            unpacker.feed(frame)
            body = unpacker.unpack()
            sizes = unpacker.unpack()
        except ProtocolViolation:
            raise
        except Exception as error:  # malformed msgpack, of any of msgpack's error types
            raise ProtocolViolation(f"undecodable message: {type(error).__name__}") from None
        if not (isinstance(body, tuple) and len(body) == 3 and isinstance(body[0], tuple)
                and isinstance(body[1], tuple) and (body[2] is None
                                                    or isinstance(body[2], tuple))):
            raise ProtocolViolation("a message is [ops, frees, request]")
        ops, frees, request = body
        payloads = self.payloads(sizes)
        with self.server.lock:  # a batch at a time on the backend, whichever client sent it
            for op in ops:
                if type(op) is not tuple or len(op) != 3:
                    raise ProtocolViolation("an op is [name, first handle, arguments]")
                name, first, args = op
                if type(name) is not str or type(first) is not int or type(args) is not tuple:
                    raise ProtocolViolation("an op is [name, first handle, arguments]")
                self.run_op(name, first, args, payloads)
        free = self.free
        for handle in frees:
            if type(handle) is not int:
                raise ProtocolViolation("a freed handle is an int")
            free(handle)
        if request is not None:
            self.answer(request, payloads)

    def payloads(self, sizes: Any) -> list[np.ndarray]:
        """The tensor bytes that follow a message, as many frames as each needs."""
        if sizes is None:
            return []
        if not (isinstance(sizes, tuple) and all(type(s) is int and s >= 0 for s in sizes)):
            raise ProtocolViolation("payload sizes are non-negative ints")
        limit = self.server.max_elements * 8
        if any(s > limit for s in sizes):
            raise ProtocolViolation(f"a payload over {limit} bytes")
        out = []
        for size in sizes:
            buffer = protocol.receive_buffer(size)
            view = buffer.data
            at = 0
            while True:
                frame = self.connection.recv()
                if not isinstance(frame, bytes) or at + len(frame) > size:
                    raise ProtocolViolation("a payload frame larger than announced")
                view[at:at + len(frame)] = frame
                at += len(frame)
                if at >= size:
                    break
            out.append(buffer)
        return out

    # -- ops ------------------------------------------------------------------------------------

    def run_op(self, name: str, first: int, args: tuple[Any, ...],
               payloads: list[np.ndarray]) -> tuple[int, list[tuple[int, ...]]] | None:
        """Run op ``name`` into handles ``first``... (holding the server's lock); an error
        poisons its results and is kept for the client's next request. Returns the results'
        form and shapes.

        Every op is checked before it runs: its name is the protocol's, it has no more
        arguments than the protocol's method, its handles are this client's, its arguments
        are of the types a message can hold, and its results (by the op's shape rule) are
        within ``max_elements``; its results are then checked against the rule."""
        expected = None
        try:
            entry = self.server.table.get(name)
            if entry is None:
                raise OpError(f"{name!r} is not an op of the backend protocol")
            method, count, rule, given = entry
            if len(args) > count:
                raise OpError(f"{name} takes {count} arguments, got {len(args)}")
            if not 0 <= first < 1 << 62:
                raise OpError(f"handle {first} is out of range")
            tensors = self.tensors
            resolved = []
            for arg in args:
                kind = type(arg)
                if kind is bytes and len(arg) == 8:  # a handle, the commonest argument
                    found = tensors.get(int.from_bytes(arg, "little"))
                    resolved.append(found if found is not None else self.resolve(arg, payloads))
                elif kind in _PLAIN:
                    resolved.append(arg)
                else:
                    resolved.append(self.resolve(arg, payloads))
            if rule is same_shape:
                # Elementwise ops, the commonest: the result has the shape of a tensor that
                # exists, so it is within max_elements; checked and stored without calls.
                shape = resolved[0].shape
                expected = ONE, [shape]
                result = method(*resolved)
                made = getattr(result, "shape", None)
                if made is None or made != shape and tuple(made) != tuple(shape):
                    raise OpError(f"{name}: the server's backend made "
                                  f"{_shapes_of(name, result)}, the shape rule says {[shape]}")
                if self.limit is not None or first in tensors or first in self.poisoned:
                    self.store(first, result)
                else:
                    tensors[first] = result
                return expected
            if rule is not None:
                expected = rule(*resolved)
            if expected is not None:
                form, shapes = expected
                if form == ONE and not given:
                    # Most ops: one result, its shape from tensors that exist (the sizes need
                    # no check of their type), checked and stored without the general path's
                    # calls.
                    shape = shapes[0]
                    if math.prod(shape) > self.server.max_elements:
                        self.check_sizes(name, shapes, False)
                    result = method(*resolved)
                    made = getattr(result, "shape", None)
                    if made is None or made != shape and tuple(made) != tuple(shape):
                        raise OpError(f"{name}: the server's backend made "
                                      f"{_shapes_of(name, result)}, the shape rule says "
                                      f"{list(shapes)}")
                    self.store(first, result)
                    return expected
                self.check_sizes(name, shapes, given)
                result = method(*resolved)
            else:
                result = method(*resolved)
            form, leaves = _flatten(name, result)
            shapes = [tuple(leaf.shape) for leaf in leaves]
            if expected is not None and (form, shapes) != (expected[0], list(expected[1])):
                raise OpError(f"{name}: the server's backend made {shapes}, the shape rule "
                              f"says {list(expected[1])}")
            for i, leaf in enumerate(leaves):
                self.store(first + i, leaf)
            return form, shapes
        except _Poisoned as poisoned:
            self.poison(first, expected, poisoned.error)
        except Exception as error:
            report = [type(error).__name__, str(error)]
            self.poison(first, expected, report)
            if self.error is None:
                self.error = report
        return None

    def check_sizes(self, name: str, shapes: list[tuple[int, ...]], given: bool = True) -> None:
        """Refuse results over ``max_elements``; ``given``: shapes written by the client, whose
        sizes are checked to be ints first (the others come from tensors that exist)."""
        for shape in shapes:
            if given and not all(type(s) is int and s >= 0 for s in shape):
                raise OpError(f"{name}: {shape} is not a shape")
            if math.prod(shape) > self.server.max_elements:
                raise OpError(f"{name}: a result of shape {shape} has more than "
                              f"{self.server.max_elements} elements, this server's limit")

    def resolve(self, value: Any, payloads: list[np.ndarray]) -> Any:
        """``value`` with handles replaced by this client's tensors, data by TensorData."""
        kind = type(value)
        if kind is bytes or kind is Handle:
            if kind is bytes:
                if len(value) != 8:
                    raise OpError("a handle is 8 bytes")
                value = Handle(int.from_bytes(value, "little"))
            found = self.tensors.get(value.id)
            if found is None:
                if value.id in self.poisoned:
                    raise _Poisoned(self.poisoned[value.id])
                raise OpError(f"handle {value.id} is not a tensor of this client")
            return found
        if kind is tuple:
            return tuple(self.resolve(v, payloads) for v in value)
        if kind is DeviceRef:
            return self.server.device
        if kind is DataRef:
            return self.data(value, payloads)
        if isinstance(value, _SCALARS) or kind is Distribution or kind is DType:
            return value
        raise OpError(f"a {kind.__name__} is not an argument of any op")

    def data(self, ref: DataRef, payloads: list[np.ndarray]) -> TensorData:
        if not 0 <= ref.payload < len(payloads):
            raise OpError(f"tensor data refers to payload {ref.payload} of {len(payloads)}")
        self.check_sizes("from_data", [ref.shape])
        return TensorData.from_bytes(payloads[ref.payload].data, ref.shape, ref.dtype)

    def store(self, handle: int, primitive: Any) -> None:
        if handle in self.tensors or (self.poisoned and handle in self.poisoned):
            self.free(handle)
        limit = self.limit
        if limit is not None:
            size = int(getattr(primitive, "nbytes", 0) or math.prod(primitive.shape) * 8)
            if self.bytes + size > limit:
                raise OpError(f"this client's tensors would take {self.bytes + size} bytes, "
                              f"over this server's limit of {limit}")
            self.sizes[handle] = size
            self.bytes += size
        self.tensors[handle] = primitive

    def free(self, handle: int) -> None:
        if self.tensors.pop(handle, None) is not None and self.limit is not None:
            self.bytes -= self.sizes.pop(handle)
        if self.poisoned:
            self.poisoned.pop(handle, None)

    def poison(self, first: int, expected: Any, error: list[str]) -> None:
        count = len(expected[1]) if expected is not None else 1
        for i in range(max(count, 1)):
            self.free(first + i)
            self.poisoned[first + i] = error

    # -- requests -------------------------------------------------------------------------------

    def answer(self, request: tuple[Any, ...], payloads: list[np.ndarray]) -> None:
        kind = request[0] if request else None
        sent: list[Any] = []
        try:
            if kind == "hello":
                device = self.server.device
                result: Any = {"backend": self.server.backend.name, "device": str(device),
                               "dtypes": [d.name for d in self.server.backend.dtypes(device)]}
            elif kind == "sync":
                self.raise_pending()
                with self.server.lock:
                    self.server.backend.sync(self.server.device)
                result = None
            elif kind == "read" and len(request) == 3:
                result = self.read(request[1], request[2], sent)
            elif kind == "call" and len(request) == 4 and isinstance(request[1], str) \
                    and type(request[2]) is int and isinstance(request[3], tuple):
                self.raise_pending()
                with self.server.lock:
                    done = self.run_op(request[1], request[2], request[3], payloads)
                self.raise_pending()
                result = list(done) if done is not None else None
            elif kind in ("export", "import", "deposit"):
                from burnish.remote.transfer import answer_transfer

                result = answer_transfer(self, request)
            else:
                raise ProtocolViolation(f"unknown request {str(kind)[:40]!r}")
        except (ProtocolViolation, ConnectionClosed):
            raise
        except Exception as error:
            self.error = None
            report = error.error if isinstance(error, _Reported | _Poisoned) else \
                [type(error).__name__, str(error)]
            self.connection.send(msgpack.packb([report, None, None]))
            return
        self.connection.send(msgpack.packb([None, result, [a.nbytes for a in sent]
                                            if kind == "read" else None]))
        for array in sent:
            for chunk in protocol.chunks(array):
                self.connection.send(chunk)

    def raise_pending(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise _Reported(error)

    def read(self, handles: Any, dtypes: Any, sent: list[Any]) -> list[Any]:
        if not (isinstance(handles, tuple) and isinstance(dtypes, tuple)
                and len(handles) == len(dtypes)
                and all(type(h) is int for h in handles)
                and all(isinstance(d, str) for d in dtypes)):
            raise ProtocolViolation("a read is [\"read\", handles, dtype names]")
        self.raise_pending()
        prims = [self.resolve(Handle(h), []) for h in handles]
        wanted = [get_dtype(d) for d in dtypes]
        with self.server.lock:
            values = self.server.backend.read(prims, wanted)
        out = []
        for value in values:
            array = value.to_numpy()
            sent.append(array if array.flags.c_contiguous else array.copy())
            out.append([value.dtype.name, list(array.shape)])
        return out


class _Reported(Exception):
    """An earlier op's error, raised for the client at its next request."""

    def __init__(self, error: list[str]):
        super().__init__(error[1])
        self.error = error


def _shapes_of(name: str, result: Any) -> Any:
    try:
        return [tuple(leaf.shape) for leaf in _flatten(name, result)[1]]
    except OpError:
        return f"a {type(result).__name__}"


def _flatten(name: str, result: Any) -> tuple[int, list[Any]]:
    if hasattr(result, "shape"):
        return ONE, [result]
    if result is None:
        return NONE, []
    if isinstance(result, tuple):
        return TUPLE, list(result)
    if isinstance(result, list):
        return LIST, result
    raise OpError(f"{name} returned a {type(result).__name__}")


#: Each dtype by its name as a message carries it.
_DTYPE_NAMES = {dtype.name.encode(): dtype for dtype in ALL_DTYPES}


def _ext_hook(code: int, data: bytes) -> Any:
    """Decode one extension value of a message, checking it."""
    if code == protocol.DTYPE:
        dtype = _DTYPE_NAMES.get(data)
        if dtype is None:
            raise ProtocolViolation("an unknown dtype")
        return dtype
    if code == protocol.DEVICE and not data:
        return DEVICE_REF
    if code == protocol.DISTRIBUTION:
        value = msgpack.unpackb(data, raw=False)
        if (isinstance(value, list) and len(value) == 3 and value[0] in _DISTRIBUTIONS
                and all(isinstance(v, int | float) for v in value[1:])):
            return Distribution(value[0], float(value[1]), float(value[2]))
        raise ProtocolViolation("a malformed distribution")
    if code == protocol.DATA:
        value = msgpack.unpackb(data, raw=False)
        if (isinstance(value, list) and len(value) == 3 and isinstance(value[1], list)
                and all(type(s) is int and s >= 0 for s in value[1]) and type(value[2]) is int):
            try:
                dtype = get_dtype(value[0])
            except (BurnishError, ValueError, TypeError):
                raise ProtocolViolation("an unknown dtype") from None
            return DataRef(dtype, tuple(value[1]), value[2])
        raise ProtocolViolation("malformed tensor data")
    raise ProtocolViolation(f"an unknown extension type {code}")
