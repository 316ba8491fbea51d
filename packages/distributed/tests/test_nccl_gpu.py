"""NCCL joined from torchrun-style variables alone (two processes, the unique id through the
rendezvous on MASTER_ADDR), on two GPUs. Skipped, naming what is missing, without CuPy, NCCL or
two GPUs; the GPU machine runs it (``pytest packages/distributed/tests/test_nccl_gpu.py``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

RANKS = Path(__file__).with_name("ranks.py")


def two_gpus() -> None:
    try:
        from burnish.cuda import distributed
    except ImportError as error:
        pytest.skip(f"needs burnish-backend-cuda ({error})")
    from burnish.errors import UnsupportedError

    try:
        distributed.load_nccl()
        gpus = distributed.gpu_count()
    except UnsupportedError as error:
        pytest.skip(f"needs NVIDIA GPUs with CuPy and NCCL ({error})")
    if gpus < 2:
        pytest.skip(f"needs two GPUs, this machine has {gpus}")


def start(*args: str) -> list[subprocess.Popen[str]]:
    """``ranks.py ARGS`` on two processes given torchrun's variables alone."""
    two_gpus()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return [subprocess.Popen(
        [sys.executable, str(RANKS), *args], stderr=subprocess.PIPE, text=True,
        env={**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
             "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        for rank in range(2)]


def finish(processes: list[subprocess.Popen[str]], timeout: float = 300
           ) -> tuple[list[int], list[str]]:
    """Each process's exit status and what it wrote to stderr."""
    codes = [p.wait(timeout=timeout) for p in processes]
    return codes, [p.stderr.read() for p in processes]  # type: ignore[union-attr]


def test_two_ranks_join_nccl_from_torchrun_variables(tmp_path):
    codes, errors = finish(start("nccl", str(tmp_path)))
    assert codes == [0, 0], errors
    for rank in range(2):
        got = np.load(tmp_path / f"nccl-{rank}.npz")
        assert str(got["device"]) == f"cuda:{rank}"
        np.testing.assert_array_equal(got["sum"], np.full(3, 3.0, np.float32))
        np.testing.assert_array_equal(got["gather"], [[1.0] * 3, [2.0] * 3])


def test_gradients_reduced_during_backward_are_the_whole_batch_gradients(tmp_path):
    """GradientReducer's buckets all-reduced on NCCL's stream while the backward pass goes on
    (small buckets: several), after the pass, and through all_reduce_gradients: each equal to
    one process's gradients of the whole batch."""
    codes, errors = finish(start("gradients", str(tmp_path), "400", "nccl"))
    assert codes == [0, 0], errors
    single = np.load(tmp_path / "single.npz")
    for r in range(2):
        got = np.load(tmp_path / f"rank-{r}.npz")
        assert got["buckets"] > 1
        for i in range(6):
            for way in ("overlap", "after", "plain"):
                np.testing.assert_allclose(got[f"{way}{i}"], single[f"grad{i}"], atol=1e-6)


def test_a_killed_rank_ends_the_other_within_seconds(tmp_path):
    """NCCL would wait for the dead rank forever; the watchdog ends rank 0, naming rank 1."""
    from burnish.distributed.watchdog import EXIT_CODE

    processes = start("nccl_die", str(tmp_path))
    began = time.monotonic()
    try:
        codes, errors = finish(processes, timeout=120)
    finally:
        for p in processes:
            p.kill()
    assert time.monotonic() - began < 120
    assert codes[1] == -signal.SIGKILL
    assert codes[0] == EXIT_CODE, errors[0]
    assert "rank 1 of 2 left the job without closing its communicator" in errors[0]
    assert int((tmp_path / "step-0").read_text()) >= 4
