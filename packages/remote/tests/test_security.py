"""What a server does with hostile or broken input: refuse it, tell that client, serve the rest."""

from __future__ import annotations

import random
import shutil
import subprocess
import time
from typing import Any

import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

import burnish as bn
from burnish.remote import Server
from burnish.remote.backend import RemoteBackend


def raw(server: Server, token: str = "test-token") -> ClientConnection:
    """A WebSocket to ``server`` that sends whatever the test writes."""
    return connect(server.url, legacy=True, compression=None, open_timeout=5,
                   additional_headers={"Authorization": f"Bearer {token}"})


def message(ops: list[Any], request: Any = None, sizes: list[int] | None = None) -> bytes:
    return msgpack.packb([ops, [], request]) + msgpack.packb(sizes)


def handle(n: int) -> bytes:
    return n.to_bytes(8, "little")


F32 = msgpack.ExtType(2, b"float32")
DEVICE = msgpack.ExtType(4, b"")


def ask(socket: ClientConnection, ops: list[Any], request: Any) -> list[Any]:
    socket.send(message(ops, request))
    return msgpack.unpackb(socket.recv(timeout=10))


def still_serving(server: Server) -> None:
    device = RemoteBackend().device(server.url, server.token)
    assert bn.Tensor.from_data([1.0, 2.0], device=device).sum().item() == 3.0
    device.native.close()


def test_token_is_required(server):
    for token in ("", "test-tokeN", "test-token-longer"):
        with pytest.raises(InvalidStatus) as refused:
            raw(server, token)
        assert refused.value.response.status_code == 401


def test_listens_on_localhost_by_default():
    with Server("ndarray", port=0, token="t") as running:
        assert running.host == "127.0.0.1"


def test_op_names_outside_the_protocol_are_refused(server):
    socket = raw(server)
    for name in ("__class__", "_device_of", "into_data", "to_device", "fuser", "system"):
        error, _, _ = ask(socket, [[name, 1, []]], ["sync"])
        assert error is not None and "not an op" in error[1], name
    error, result, _ = ask(socket, [["ones", 1, [[2], F32, DEVICE]]], ["read", [1], ["float32"]])
    assert error is None and result == [["float32", [2]]]
    socket.close()


def test_handles_of_another_client_are_not_reachable(server):
    owner, thief = raw(server), raw(server)
    assert ask(owner, [["ones", 7, [[2], F32, DEVICE]]], ["sync"])[0] is None
    error, _, _ = ask(thief, [], ["read", [7], ["float32"]])
    assert error is not None and "not a tensor of this client" in error[1]
    error, _, _ = ask(thief, [["neg", 8, [handle(7), F32]]], ["read", [8], ["float32"]])
    assert error is not None and "not a tensor of this client" in error[1]
    owner.close()
    thief.close()


def test_sizes_are_bounded(server):
    server.max_elements = 1 << 20
    socket = raw(server)
    error, _, _ = ask(socket, [["zeros", 1, [[1 << 20, 1 << 20], F32, DEVICE]]], ["sync"])
    assert error is not None and "elements" in error[1]
    error, _, _ = ask(socket, [["ones", 9, [[1], F32, DEVICE]],
                               ["expand", 2, [handle(9), [1 << 30]]]], ["sync"])
    assert error is not None and "elements" in error[1]
    # A payload announced over the limit closes the connection before any byte is kept.
    data = msgpack.ExtType(5, msgpack.packb(["float32", [1 << 30], 0]))
    socket.send(message([["from_data", 3, [data, DEVICE]]], None, [4 << 30]))
    with pytest.raises(ConnectionClosed) as closed:
        socket.recv(timeout=10)
    assert closed.value.rcvd.code == 1008
    # Data whose bytes do not fill its shape is an error for the op.
    socket = raw(server)
    data = msgpack.ExtType(5, msgpack.packb(["float32", [3], 0]))
    socket.send(message([["from_data", 3, [data, DEVICE]]], ["read", [3], ["float32"]], [8]))
    socket.send(b"\0" * 8)
    error = msgpack.unpackb(socket.recv(timeout=10))[0]
    assert error is not None and "bytes" in error[1]
    socket.close()
    still_serving(server)


def test_elementwise_ops_check_their_operands(server):
    socket = raw(server)
    error, _, _ = ask(socket, [["neg", 1, [2.0, F32]]], ["read", [1], ["float32"]])
    assert error is not None  # a scalar where the tensor goes
    error, _, _ = ask(socket, [["ones", 1, [[2], F32, DEVICE]], ["neg", -1, [handle(1), F32]]],
                      ["sync"])
    assert error is not None and "out of range" in error[1]
    # An op on a failed op's result fails with that op's error, at every read of it.
    ops = [["zeros", 2, [[-1], F32, DEVICE]], ["neg", 3, [handle(2), F32]],
           ["mul_scalar", 4, [handle(3), 2.0, F32]]]
    for _ in range(2):
        error, _, _ = ask(socket, ops, ["read", [4], ["float32"]])
        assert error is not None and "not a shape" in error[1]
        ops = []
    socket.close()
    still_serving(server)


def test_a_client_s_bytes_are_bounded():
    with Server("ndarray", "127.0.0.1", 0, token="t", max_client_bytes=64) as running:
        socket = raw(running, "t")
        # Eight float32 are 32 bytes: two such tensors fit, a third does not.
        error, _, _ = ask(socket, [["ones", 1, [[8], F32, DEVICE]],
                                   ["neg", 2, [handle(1), F32]]], ["sync"])
        assert error is None
        error, _, _ = ask(socket, [["neg", 3, [handle(2), F32]]], ["sync"])
        assert error is not None and "limit of 64" in error[1]
        # A freed tensor makes room; a handle written twice holds one tensor, counted once.
        socket.send(msgpack.packb([[], [1], None]) + msgpack.packb(None))
        error, result, _ = ask(socket, [["neg", 3, [handle(2), F32]],
                                        ["add_scalar", 3, [handle(2), 1.0, F32]]],
                               ["read", [3], ["float32"]])
        assert error is None and result == [["float32", [8]]]
        assert socket.recv(timeout=10) == np.zeros(8, np.float32).tobytes()
        socket.close()


def test_bad_arguments_get_errors(server):
    socket = raw(server)
    for args in ([[2], msgpack.ExtType(2, b"complex128"), DEVICE], [[2], F32, DEVICE, 1, 2, 3, 4],
                 [{"a": 1}, F32, DEVICE], [[-5], F32, DEVICE], [["x"], F32, DEVICE]):
        socket.send(message([["ones", 1, args]], ["read", [1], ["float32"]]))
        try:
            reply = msgpack.unpackb(socket.recv(timeout=10))
        except ConnectionClosed:  # a malformed extension value: the connection is closed
            socket = raw(server)
            continue
        assert reply[0] is not None, args
    socket.close()
    still_serving(server)


def test_fuzzed_and_truncated_frames_never_crash_the_server(server):
    rng = random.Random(0)
    valid = message([["ones", 1, [[2, 3], F32, DEVICE]], ["neg", 2, [handle(1), F32]]],
                    ["read", [2], ["float32"]])
    frames = [valid[:i] for i in range(len(valid))]
    for _ in range(200):
        mutated = bytearray(valid)
        for _ in range(rng.randint(1, 6)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        frames.append(bytes(mutated))
    frames += [bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))) for _ in range(100)]
    frames += [b"\xdf\xff\xff\xff\xff", b"\x91" * 5000, b"\xc7\xff\xff\xff\xff\x01"]
    socket = raw(server)
    for frame in frames:
        try:
            socket.send(frame)
            socket.send(message([], ["sync"]))
            socket.recv(timeout=10)
        except (ConnectionClosed, TimeoutError):
            socket.close()
            socket = raw(server)
    socket.send("a text frame")
    with pytest.raises(ConnectionClosed):
        socket.recv(timeout=10)
    still_serving(server)
    deadline = time.monotonic() + 10  # the closed connections' sessions end on their threads
    while server.live_tensors() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.live_tensors() == 0


@pytest.mark.skipif(shutil.which("openssl") is None,
                    reason="needs the openssl command to make a test certificate")
def test_tls(tmp_path, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    with Server("ndarray", "localhost", 0, token="t", certfile=str(cert),
                keyfile=str(key)) as running:
        assert running.url.startswith("wss://")
        url = f"wss://localhost:{running.port}"
        backend = RemoteBackend()
        with pytest.raises(bn.DeviceError):  # a certificate nobody vouched for
            backend.device(url, "t")
        device = backend.device(url, "t", cafile=str(cert))
        x = bn.Tensor.from_numpy(np.arange(4, dtype=np.float32), device=device)
        assert (x * 2).tolist() == [0.0, 2.0, 4.0, 6.0]
