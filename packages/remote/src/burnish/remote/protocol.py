"""The wire format shared by client and server: msgpack messages over WebSocket binary frames.

A message is one msgpack frame, followed by the raw bytes of the tensors it carries, each cut
into frames of at most ``CHUNK`` bytes (never pickle: a frame is data, and decoding one runs
no code). Client to server, a message is ``[ops, frees, request]`` then, in the same frame, a
second msgpack value ``payload_sizes``:

- ``ops``: ``[name, first_handle, arguments]`` each, run in order without an answer; the op's
  results become the client's handles ``first_handle``, ``first_handle + 1``...
- ``frees``: handles the client dropped.
- ``request``: ``None``, or what the client waits for an answer to: ``["read", handles,
  dtypes]``, ``["call", name, first_handle, arguments]`` (an op whose result shapes the client
  does not know), ``["sync"]``, ``["hello"]``, ``["export", handle, dtype, url, token, key]``,
  ``["import", key, handle]``.
- ``payload_sizes``: the byte count of each tensor whose bytes follow.

Server to client, an answer is ``[error, result, payload_sizes]``, ``error`` being ``None`` or
``[type name, message]``.

Arguments are msgpack values; a handle is 8 bytes (little-endian; no op takes bytes otherwise),
and extension types carry a dtype (its name), a distribution, the server's device, and tensor
data (dtype, shape, index of its payload).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from burnish.backend import Backend
from burnish.device import Device
from burnish.distribution import Distribution
from burnish.dtype import ALL_DTYPES, DType
from burnish.tensor_data import TensorData

#: The largest frame of tensor bytes; tensors bigger than this are sent in several. Small
#: enough that websockets' copies of a frame (read buffer, slice, unmasking) stay in the CPU's
#: cache: 256 MiB there and back moved at 0.9-1.3 GB/s in 256 KiB frames, 0.8 GB/s in 4 MiB
#: ones, on a 2-core loopback (bench/RESULTS.md).
CHUNK = 256 << 10
#: How many bytes a connection asks its socket for at a time (websockets' default: 64 KiB, a
#: loop of the reading thread for each).
RECV_SIZE = 1 << 20
#: The largest frame either side accepts (a message's msgpack part, or one chunk).
MAX_FRAME = 16 << 20

DTYPE, DISTRIBUTION, DEVICE, DATA = 2, 3, 4, 5

#: Protocol methods a client never sends: answered by the client itself (devices, dtypes; the
#: quantized ops, whose operands bundle several primitives, by the protocol's defaults, which
#: send the ops they are made of), or requests of their own (reads, waits, moves between
#: servers).
LOCAL = frozenset({"devices", "default_device", "_device_of", "dtypes", "describe_device",
                   "unsupported_reason", "fuser", "capturer", "into_data", "read", "sync",
                   "to_device", "quantize_params", "quantize", "dequantize", "quantized_matmul",
                   "quantized_linear", "quantized_conv"})


def _protocol_ops() -> dict[str, tuple[str, ...]]:
    ops = {}
    for name in dir(Backend):
        if name.startswith("__") or name in LOCAL:
            continue
        function = getattr(Backend, name)
        if inspect.isfunction(function):
            ops[name] = tuple(inspect.signature(function).parameters)[1:]
    return ops


#: Every op a client may send, with its parameters' names: the backend protocol's methods, found
#: by looking at ``Backend`` (nothing else is ever called on the server's backend).
OPS: dict[str, tuple[str, ...]] = _protocol_ops()


class RemoteError(RuntimeError):
    """The connection to a server failed, or the server reported an error of its own."""


@dataclass(frozen=True)
class Handle:
    """A client's name for one of its tensors on the server."""

    id: int


@dataclass(frozen=True)
class DataRef:
    """Tensor data of a message: dtype, shape, and which of the message's payloads holds it."""

    dtype: DType
    shape: tuple[int, ...]
    payload: int


class DeviceRef:
    """The server's device, wherever an op takes one."""


DEVICE_REF = DeviceRef()


#: Each dtype's extension value, made once (every op carries one).
_DTYPES = {dtype: msgpack.ExtType(DTYPE, dtype.name.encode()) for dtype in ALL_DTYPES}
_DEVICE = msgpack.ExtType(DEVICE, b"")


def pack(message: Any, tensor_type: type | None,
         payloads: list[np.ndarray] | None = None) -> bytes:
    """``message`` as msgpack; a ``tensor_type`` (a client primitive) is sent as its handle
    (its ``id``), and each ``TensorData`` met is appended to ``payloads`` (its bytes travel
    after the message)."""

    def default(value: Any) -> Any:
        kind = type(value)
        if kind is tensor_type:  # every op has one or more: tested first
            return value.id.to_bytes(8, "little")
        if kind is DType:
            return _DTYPES[value]
        if isinstance(value, DType):
            return _DTYPES[value]
        if isinstance(value, Device | DeviceRef):
            return _DEVICE
        if isinstance(value, Distribution):
            return msgpack.ExtType(DISTRIBUTION, msgpack.packb([value.kind, value.a, value.b]))
        if isinstance(value, TensorData) and payloads is not None:
            array = value.to_numpy()
            if not array.flags.c_contiguous:  # (not ascontiguousarray: it makes 0-d arrays 1-d)
                array = array.copy()
            payloads.append(array)
            return msgpack.ExtType(DATA, msgpack.packb(
                [value.dtype.name, list(array.shape), len(payloads) - 1]))
        if isinstance(value, np.generic):
            return value.item()
        raise TypeError(f"cannot send a {type(value).__name__} to a burnish server")

    return msgpack.packb(message, default=default)


def receive_buffer(size: int) -> np.ndarray:
    """A buffer for a payload of ``size`` bytes: uninitialized (``bytearray(size)`` would write
    every byte once before the payload does)."""
    return np.empty(size, np.uint8)


def chunks(array: np.ndarray) -> list[memoryview]:
    """``array``'s bytes as frames of at most ``CHUNK`` bytes (at least one frame)."""
    view = array.reshape(-1).view(np.uint8).data if array.size else memoryview(b"")
    return [view[i:i + CHUNK] for i in range(0, max(len(view), 1), CHUNK)] or [view]
