"""Faults: a server or a client killed in the middle of a stream, on loopback, with time limits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import burnish as bn
from burnish.remote import RemoteError
from burnish.remote.backend import RemoteBackend

LIMIT = 20.0  # seconds: PING_INTERVAL + PING_TIMEOUT (15 s) and some


def start_server(token: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "burnish.remote", "serve", "--port", "0"], text=True,
        stdout=subprocess.PIPE, env={**os.environ, "BURNISH_REMOTE_TOKEN": token})
    line = process.stdout.readline() if process.stdout else ""
    assert " on ws://" in line, line
    return process, line.rsplit(" on ", 1)[1].strip()


def test_server_killed_mid_stream_raises_in_bounded_time():
    process, url = start_server("kill-me")
    try:
        device = RemoteBackend().device(url, "kill-me")
        x = bn.Tensor.ones([64, 64], device=device)
        outcome: list[BaseException | None] = []

        def stream() -> None:
            try:
                y = x
                while True:
                    y = (y * 0.5 + 1).tanh()
                    y.sum().item()
            except BaseException as error:  # noqa: BLE001 (reported to the test)
                outcome.append(error)

        worker = threading.Thread(target=stream, daemon=True)
        worker.start()
        time.sleep(0.5)
        process.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        worker.join(LIMIT)
        assert not worker.is_alive(), "the client hangs after its server was killed"
        assert time.monotonic() - killed < LIMIT
        assert isinstance(outcome[0], RemoteError), outcome
        assert url in str(outcome[0])
        with pytest.raises(RemoteError):
            x.tolist()
    finally:
        process.kill()
        process.wait()


def test_client_killed_mid_stream_leaves_the_server_as_before(server):
    before = server.live_tensors()
    client = textwrap.dedent(f"""
        import burnish as bn
        from burnish.remote.backend import RemoteBackend
        device = RemoteBackend().device({server.url!r}, {server.token!r})
        kept = [bn.Tensor.ones([256, 256], device=device) for _ in range(50)]
        device.backend.sync(device)
        print("ready", flush=True)
        y = kept[0]
        while True:
            y = (y * 0.5 + 1).tanh()
            kept.append(y)
    """)
    process = subprocess.Popen([sys.executable, "-c", client], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        assert server.live_tensors() >= 50
        time.sleep(0.3)
        process.send_signal(signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + LIMIT
        while time.monotonic() < deadline and (server.sessions or server.live_tensors()):
            time.sleep(0.05)
        assert server.live_tensors() == before and not server.sessions
    finally:
        process.kill()
        process.wait()
