"""The remote backend through a loopback server, against local ndarray and a plain socket.

    python bench/bench_remote.py                 # both cases, 3 repeats each
    python bench/bench_remote.py --ops 10000 --mib 256 --repeat 5

Cases:

- **ops**: ``--ops`` tiny ops (float32 ``[4]``: adds and multiplies by a scalar, alternating)
  then one read, on ``remote`` (a server running ndarray in another process) and on local
  ``ndarray``; the per-op cost of each and their ratio (goal: at most 3x).
- **bytes**: a ``--mib`` MiB float32 tensor sent to the server and read back, against a plain
  TCP socket copy of the same bytes to an echo process and back, in the same run; each as GB/s
  of the bytes moved both ways, and their ratio (goal: at least 50%).

Each figure is the best of ``--repeat`` runs (after a warm-up): the machine is shared, the best
is the least disturbed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import time

import numpy as np

import burnish as bn
from burnish.remote.backend import RemoteBackend

ECHO = """
import socket, sys
size = int(sys.argv[1])
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
while True:
    conn, _ = server.accept()
    buffer = bytearray(size)
    view, at = memoryview(buffer), 0
    while at < size:
        at += conn.recv_into(view[at:])
    conn.sendall(buffer)
    conn.close()
"""


def start_server() -> tuple[subprocess.Popen[str], str, str]:
    token = secrets.token_urlsafe(16)
    process = subprocess.Popen(
        [sys.executable, "-m", "burnish.remote", "serve", "--port", "0"], text=True,
        stdout=subprocess.PIPE, env={**os.environ, "BURNISH_REMOTE_TOKEN": token})
    line = process.stdout.readline() if process.stdout else ""
    return process, line.rsplit(" on ", 1)[1].strip(), token


def tiny_ops(device: bn.Device, count: int) -> float:
    """Seconds for ``count`` tiny ops and one read on ``device``."""
    y = bn.Tensor.ones([4], device=device)
    y.tolist()
    start = time.perf_counter()
    for _ in range(count // 2):
        y = y + 1.0
        y = y * 0.5
    y.tolist()
    return time.perf_counter() - start


def remote_copy(device: bn.Device, array: np.ndarray) -> float:
    start = time.perf_counter()
    back = bn.Tensor.from_numpy(array, device=device).to_numpy()
    took = time.perf_counter() - start
    assert back.shape == array.shape and back[-1] == array[-1]
    return took


def socket_copy(port: int, array: np.ndarray) -> float:
    data = memoryview(array.reshape(-1).view(np.uint8))
    buffer = bytearray(len(data))
    view, at = memoryview(buffer), 0
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(data)
        while at < len(buffer):
            at += conn.recv_into(view[at:])
    took = time.perf_counter() - start
    assert buffer[-4:] == data[-4:]
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    process, url, token = start_server()
    try:
        device = RemoteBackend().device(url, token)
        local = bn.backend("ndarray").default_device()
        tiny_ops(device, 1000)
        tiny_ops(local, 1000)
        remote = min(tiny_ops(device, args.ops) for _ in range(args.repeat))
        here = min(tiny_ops(local, args.ops) for _ in range(args.repeat))
        print(f"ops: {args.ops} tiny ops + 1 read: remote {remote / args.ops * 1e6:.1f} us/op, "
              f"local ndarray {here / args.ops * 1e6:.1f} us/op, ratio {remote / here:.2f}x "
              f"(goal <= 3x)")

        array = np.random.default_rng(0).standard_normal(args.mib << 18).astype(np.float32)
        echo = subprocess.Popen([sys.executable, "-c", ECHO, str(array.nbytes)], text=True,
                                stdout=subprocess.PIPE)
        try:
            port = int(echo.stdout.readline()) if echo.stdout else 0
            moved = 2 * array.nbytes / 1e9
            remote_copy(device, array)
            socket_copy(port, array)
            through_remote, through_socket = [], []
            for _ in range(args.repeat):  # taking turns: both see the same disturbances
                through_remote.append(remote_copy(device, array))
                through_socket.append(socket_copy(port, array))
            r, s = moved / min(through_remote), moved / min(through_socket)
            print(f"bytes: {args.mib} MiB there and back: remote {r:.2f} GB/s, plain socket "
                  f"{s:.2f} GB/s, ratio {r / s:.0%} (goal >= 50%)")
        finally:
            echo.kill()
    finally:
        process.kill()


if __name__ == "__main__":
    main()
