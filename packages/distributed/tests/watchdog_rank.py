"""One rank of the watchdog tests (no GPU: a stand-in for the communicator's progress):
``python watchdog_rank.py RANK WORLD PORT SCENARIO``; prints ``joined`` once the ranks are
connected, then acts out SCENARIO (see test_watchdog.py)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

from burnish.distributed.watchdog import Watchdog

rank, world, port, scenario = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
listener = socket.create_server(("127.0.0.1", port)) if rank == 0 else None
start = time.monotonic()
# "hang": ranks 0 and 2 wait in their collective #3, which rank 1 never issues.
# "silent0": ranks 1 and 2 wait in collective #3; rank 0 is stopped by the test.
stuck = {"hang": {0, 2}, "silent0": {1, 2}}.get(scenario, set())


def progress():
    if rank in stuck:
        return 3, (3, "allReduce", start)
    return 2, None


dog = Watchdog.join(rank, world, ("127.0.0.1", port), listener, progress,
                    timeout=1.0 if stuck else 120.0, connect_timeout=30.0)
print("joined", flush=True)
if scenario == "clean":
    time.sleep(0.3 * rank)
    dog.close()
    sys.exit(0)
if scenario == f"kill{rank}":
    sys.stdin.readline()  # the test's go, once every rank has joined
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(120)
print("still running", flush=True)
sys.exit(3)
