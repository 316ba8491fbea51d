"""The watchdog that NCCL jobs run (burnish.distributed.watchdog), on this machine without
GPUs: three processes on loopback with a stand-in for the communicator's progress. A rank that
dies or hangs ends every other rank within a bounded time, naming it; a clean end ends nothing."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from burnish.distributed import DistributedError
from burnish.distributed.watchdog import EXIT_CODE, Watchdog

RANK = Path(__file__).with_name("watchdog_rank.py")
WORLD = 3


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(scenario: str) -> list[subprocess.Popen[str]]:
    port = free_port()
    ranks = [subprocess.Popen([sys.executable, str(RANK), str(r), str(WORLD), str(port),
                               scenario], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(WORLD)]
    for process in ranks:  # every rank connected before the scenario goes on
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "joined", process.stderr.read()
    for process in ranks:
        process.stdin.write("go\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
    return ranks


def finish(ranks: list[subprocess.Popen[str]], within: float) -> list[tuple[int, str]]:
    """Each rank's exit status and stderr; fails if one runs past ``within`` seconds."""
    deadline = time.monotonic() + within
    results = []
    try:
        for process in ranks:
            code = process.wait(timeout=max(0.1, deadline - time.monotonic()))
            results.append((code, process.stderr.read()))  # type: ignore[union-attr]
    finally:
        for process in ranks:
            process.kill()
            process.wait()
    return results


def test_a_clean_end_ends_nothing():
    assert finish(start("clean"), within=30) == [(0, "")] * WORLD


@pytest.mark.parametrize("dead", [1, 0])
def test_a_killed_rank_ends_the_others_naming_it(dead):
    began = time.monotonic()
    results = finish(start(f"kill{dead}"), within=20)
    assert time.monotonic() - began < 20
    assert results[dead][0] == -signal.SIGKILL
    for rank, (code, err) in enumerate(results):
        if rank != dead:
            assert code == EXIT_CODE, err
            assert f"rank {dead} of {WORLD} left the job without closing its communicator" \
                in err, err
            assert f"rank {rank} stops too" in err


def test_a_collective_that_one_rank_never_issues_names_that_rank():
    results = finish(start("hang"), within=30)
    for code, err in results:
        assert code == EXIT_CODE, err
        assert "collective #3 did not complete within 1 s" in err, err
        assert "rank 1 had not called it" in err, err


def test_a_silent_rank_0_is_named_by_the_ranks_that_wait():
    ranks = start("silent0")
    ranks[0].send_signal(signal.SIGSTOP)  # hung: alive, connected, never answering
    try:
        results = finish(ranks[1:], within=30)
    finally:
        ranks[0].kill()
        ranks[0].wait()
    for code, err in results:
        assert code == EXIT_CODE, err
        assert "rank 0 did not answer when asked which ranks are behind" in err, err


def test_joining_without_the_other_ranks_names_them():
    listener = socket.create_server(("127.0.0.1", 0))
    with pytest.raises(DistributedError, match=r"heard from 0 of the 2 other ranks .*"
                                               r"missing: rank 1, 2"):
        Watchdog.join(0, 3, ("127.0.0.1", 0), listener, connect_timeout=0.5)
    with pytest.raises(DistributedError, match=r"rank 2 could not reach rank 0 at 127\.0\.0\.1"):
        Watchdog.join(2, 3, ("127.0.0.1", free_port()), connect_timeout=0.5)
