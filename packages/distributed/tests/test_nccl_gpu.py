"""NCCL joined from torchrun-style variables alone (two processes, the unique id through the
rendezvous on MASTER_ADDR), on two GPUs. Skipped, naming what is missing, without CuPy, NCCL or
two GPUs; the GPU machine runs it (``pytest packages/distributed/tests/test_nccl_gpu.py``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
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


def test_two_ranks_join_nccl_from_torchrun_variables(tmp_path):
    two_gpus()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    processes = [subprocess.Popen(
        [sys.executable, str(RANKS), "nccl", str(tmp_path)],
        env={**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
             "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        for rank in range(2)]
    assert [p.wait(timeout=300) for p in processes] == [0, 0]
    for rank in range(2):
        got = np.load(tmp_path / f"nccl-{rank}.npz")
        assert str(got["device"]) == f"cuda:{rank}"
        np.testing.assert_array_equal(got["sum"], np.full(3, 3.0, np.float32))
        np.testing.assert_array_equal(got["gather"], [[1.0] * 3, [2.0] * 3])
