"""The remote backend against a loopback server: values, batching, lifetimes, isolation, moves."""

from __future__ import annotations

import time

import numpy as np
import pytest

import burnish as bn
from burnish.errors import DeviceError
from burnish.remote import RemoteError, Server, connect
from burnish.remote.backend import RemoteBackend
from burnish.remote.client import Connection


def wait_until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def fresh_device(server: Server):
    """A device of a backend of its own (a connection no other test shares)."""
    return RemoteBackend().device(server.url, server.token)


def test_values_and_shapes_without_round_trips(server, monkeypatch):
    device = fresh_device(server)
    x = bn.Tensor.from_data(np.arange(12, dtype=np.float32).reshape(3, 4), device=device)
    requests = []
    original = Connection.request
    monkeypatch.setattr(Connection, "request",
                        lambda self, r: requests.append(r[0]) or original(self, r))
    y = ((x * 2 + 1).exp().log() @ x.T).sum(1).reshape(3, 1)
    assert y.shape == [3, 1] and requests == []  # shapes known with no round trip
    expected = ((np.arange(12).reshape(3, 4) * 2 + 1) @ np.arange(12).reshape(3, 4).T).sum(1)
    np.testing.assert_allclose(y.to_numpy().ravel(), expected, rtol=1e-5)
    assert requests == ["read"]


def test_module_op_shape_asked_once(server, monkeypatch):
    device = fresh_device(server)
    x = bn.Tensor.random([1, 2, 8, 8], device=device)
    w = bn.Tensor.random([3, 2, 3, 3], device=device)
    calls = []
    original = Connection.request
    monkeypatch.setattr(Connection, "request",
                        lambda self, r: calls.append(r[0]) or original(self, r))
    for _ in range(3):
        y = device.backend.conv(x.primitive, w.primitive, None, (1, 1), (0, 0), (1, 1), 1)
        assert y.shape == (1, 3, 6, 6)
    assert calls == ["call"]


def test_freed_on_drop_and_on_disconnect(server):
    device = fresh_device(server)
    xs = [bn.Tensor.ones([4], device=device) for _ in range(5)]
    device.backend.sync(device)
    assert server.live_tensors() == 5
    del xs[:3]
    device.backend.sync(device)
    assert server.live_tensors() == 2
    device.native.close()
    assert wait_until(lambda: server.live_tensors() == 0)


def test_clients_are_isolated(server):
    a, b = fresh_device(server), fresh_device(server)
    x = bn.Tensor.full([2], 1.0, device=a)
    y = bn.Tensor.full([2], 2.0, device=b)  # the same handle number on another connection
    assert x.primitive.id == y.primitive.id
    assert x.tolist() == [1.0, 1.0] and y.tolist() == [2.0, 2.0]
    a.native.close()
    assert y.tolist() == [2.0, 2.0]


def test_async_error_raised_at_next_read(server):
    device = fresh_device(server)
    x = bn.Tensor.from_data([1.0, 2.0], device=device)
    backend = device.backend
    bad = backend.reshape(x.primitive, (3,))  # a shape the server's backend refuses
    with pytest.raises(Exception, match="reshape|size"):
        backend.into_data(bad, bn.float32)
    assert x.tolist() == [1.0, 2.0]  # the connection goes on


def test_token_refused(server):
    with pytest.raises(DeviceError, match="token was refused"):
        Connection(server.url, "wrong-token")
    with pytest.raises(DeviceError, match="no token"):
        Connection(server.url, "")


def test_unreachable_server():
    with pytest.raises(DeviceError, match="cannot connect"):
        Connection("ws://127.0.0.1:1", "t")


def test_device_strings_and_autodiff(server, monkeypatch):
    monkeypatch.setenv("BURNISH_REMOTE_TOKEN", server.token)
    device = connect(server.url)
    assert bn.Tensor.zeros([2], device=server.url).device == device
    ad = bn.backend("autodiff+remote")
    w = bn.Tensor.from_data([1.0, 2.0], device=ad.wrap_device(device)).require_grad()
    loss = (w * w).sum()
    grads = loss.backward()
    assert w.grad(grads).tolist() == [2.0, 4.0]


def test_tensor_moves_between_servers_directly(server, monkeypatch):
    with Server("ndarray", token="other-token") as other:
        backend = RemoteBackend()
        a = backend.device(server.url, server.token)
        b = backend.device(other.url, other.token)
        x = bn.Tensor.from_data(np.arange(6, dtype=np.float32), device=a) * 3
        reads = []
        original = Connection.read
        monkeypatch.setattr(Connection, "read",
                            lambda self, *args: reads.append(self.url) or original(self, *args))
        y = x.to_device(b)
        assert reads == []  # the values never came to the client
        assert y.device == b and other.live_tensors() == 1
        assert y.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0, 15.0]


def test_big_tensor_round_trip(server):
    device = fresh_device(server)
    values = np.random.default_rng(0).standard_normal(3 << 20).astype(np.float32)  # 12 MiB
    x = bn.Tensor.from_numpy(values, device=device)
    np.testing.assert_array_equal(x.to_numpy(), values)


def test_closed_connection_is_a_clear_error(server):
    device = fresh_device(server)
    x = bn.Tensor.ones([2], device=device)
    device.native.close()
    with pytest.raises(RemoteError, match="closed"):
        x.tolist()


def test_without_a_server_the_backend_is_unsupported_here_and_says_how_to_name_one(monkeypatch):
    from burnish.remote.backend import RemoteBackend

    monkeypatch.delenv("BURNISH_REMOTE_URL", raising=False)
    with pytest.raises(bn.UnsupportedError, match="BURNISH_REMOTE_URL"):
        RemoteBackend().default_device()


def test_seeding_every_backend_passes_over_a_closed_connection(server):
    from burnish.remote import connect

    device = connect(server.url, token=server.token)
    bn.backend("remote").disconnect(server.url)
    for step in range(300):  # more than a batch: the Learner reseeds every step
        bn.seed(step)  # every backend of the process, the remote one with its closed connection
    assert device.native.closed
