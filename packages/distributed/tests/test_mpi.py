"""2 and 4 ranks started by mpiexec (the mpich wheel's) on ndarray: collectives against NumPy,
gradients against one process's of the whole batch, the MNIST MLP trained by the Learner to
one process's accuracy, resuming with another number of ranks, and a rank that dies or hangs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="mpi4py is not installed: pip install "
                    "'burnish-distributed[mpi]'")
RANKS = Path(__file__).with_name("ranks.py")
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
if MPIEXEC is None:
    pytest.skip("no mpiexec: pip install mpich (or install an MPI)", allow_module_level=True)


def run(ranks: int, *args: str, timeout: float = 240, env: dict | None = None,
        check: bool = True, mpiexec_flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``ranks.py ARGS`` on ``ranks`` processes (mpiexec), or on this one process for 0."""
    command = [sys.executable, str(RANKS), *args]
    if ranks:
        command = [MPIEXEC, *mpiexec_flags, "-n", str(ranks), *command]
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("PMI_", "OMPI_", "SLURM_")) and k not in ("RANK",
                                                                            "WORLD_SIZE")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env={**environ, **(env or {})})
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.parametrize("world", [2, 4])
def test_collectives_against_numpy(tmp_path, world):
    run(world, "collectives", str(tmp_path))
    x = [np.arange(6, dtype=np.float32).reshape(2, 3) + r for r in range(world)]
    chunks = [np.arange(4 * world, dtype=np.float32).reshape(2 * world, 2) * (r + 1)
              for r in range(world)]
    for r in range(world):
        got = np.load(tmp_path / f"rank-{r}.npz")
        np.testing.assert_allclose(got["sum"], sum(x))
        np.testing.assert_allclose(got["mean"], sum(x) / world, rtol=1e-6)
        np.testing.assert_allclose(got["max"], np.max(x, axis=0))
        np.testing.assert_allclose(got["min"], np.min(x, axis=0))
        np.testing.assert_allclose(got["prod"], np.prod(x, axis=0))
        assert got["int_sum"].dtype == np.int64
        np.testing.assert_array_equal(got["int_sum"], [sum(range(world)), world])
        np.testing.assert_array_equal(got["broadcast"], x[world - 1])
        np.testing.assert_array_equal(got["gather"], np.stack(x))
        np.testing.assert_allclose(got["scatter"], sum(chunks)[2 * r:2 * r + 2])


@pytest.mark.parametrize("world", [2, 4])
def test_reduced_gradients_are_the_whole_batch_gradients(tmp_path, world):
    run(world, "gradients", str(tmp_path))
    single = np.load(tmp_path / "single.npz")
    for r in range(world):
        got = np.load(tmp_path / f"rank-{r}.npz")
        assert got["buckets"] > 1  # small buckets: several, started during backward
        for i in range(6):
            np.testing.assert_allclose(got[f"overlap{i}"], single[f"grad{i}"], atol=1e-6)
            np.testing.assert_allclose(got[f"after{i}"], single[f"grad{i}"], atol=1e-6)
            np.testing.assert_allclose(got[f"plain{i}"], single[f"grad{i}"], atol=1e-6)


@pytest.fixture(scope="module")
def single_run(tmp_path_factory):
    """Two epochs of the MNIST MLP on one process."""
    out = tmp_path_factory.mktemp("single")
    run(0, "mnist", str(out), str(out / "run"), "2")
    return np.load(out / "result.npz")


def assert_same_training(result, single):
    np.testing.assert_allclose(result["accuracy"], single["accuracy"], atol=0.25)
    for i in range(4):  # Adam's steps on float32 means of the same batches
        np.testing.assert_allclose(result[f"param{i}"], single[f"param{i}"], atol=2e-4)


@pytest.mark.parametrize("world", [2, 4])
def test_mnist_mlp_trains_to_the_single_process_accuracy(tmp_path, world, single_run):
    run(world, "mnist", str(tmp_path), str(tmp_path / "run"), "2")
    result = np.load(tmp_path / "result.npz")
    assert result["accuracy"][-1] > 80.0
    assert_same_training(result, single_run)
    sums = [np.load(tmp_path / f"rank-{r}.npz")["checksum"] for r in range(world)]
    for other in sums[1:]:  # every rank holds the same model
        np.testing.assert_array_equal(other, sums[0])
    assert (tmp_path / "run" / "checkpoints").is_dir()  # rank 0 wrote them
    assert not (tmp_path / "run" / "ranks" / "1" / "checkpoints").exists()


def test_resume_with_another_number_of_ranks(tmp_path, single_run):
    run(2, "mnist", str(tmp_path), str(tmp_path / "run"), "1")  # epoch 1 on two ranks
    run(0, "mnist", str(tmp_path), str(tmp_path / "run"), "2", "1")  # epoch 2 on one
    assert_same_training(np.load(tmp_path / "result.npz"), single_run)


def test_a_hung_rank_is_named_within_the_timeout(tmp_path):
    start = time.monotonic()
    done = run(3, "die", str(tmp_path), "1", "hang", env={"BURNISH_DISTRIBUTED_TIMEOUT": "2"},
               check=False, timeout=60)
    assert done.returncode != 0
    assert time.monotonic() - start < 30
    errors = [p.read_text() for p in tmp_path.glob("error-*.txt")]
    assert errors, done.stdout + done.stderr
    assert all("DistributedError" in e and "rank 1 did not answer" in e for e in errors), errors
    assert not list(tmp_path.glob("done-*.txt"))


def test_a_killed_rank_ends_the_job(tmp_path):
    start = time.monotonic()
    done = run(3, "die", str(tmp_path), "1", "kill", env={"BURNISH_DISTRIBUTED_TIMEOUT": "5"},
               check=False, timeout=60)
    assert done.returncode != 0
    assert time.monotonic() - start < 30
    assert not list(tmp_path.glob("done-*.txt"))  # no rank went on as if nothing happened


def test_a_dead_rank_is_named_when_the_launcher_leaves_the_others_running(tmp_path):
    # MPICH's -disable-auto-cleanup: as srun without --kill-on-bad-exit, the launcher does not
    # end the job; the others' collective times out, names rank 1, and their exit ends the job.
    # Rank 2 joins the collective 3.5 s late, after rank 0 has timed out (2 s) and while it
    # probes (3 s): waiting, it answers, so that rank 1 alone is named.
    start = time.monotonic()
    done = run(3, "die", str(tmp_path), "1", "exit", "3.5",
               env={"BURNISH_DISTRIBUTED_TIMEOUT": "2"}, check=False, timeout=60,
               mpiexec_flags=("-disable-auto-cleanup",))
    assert done.returncode != 0
    assert time.monotonic() - start < 30
    assert "rank 1 did not answer" in done.stderr, done.stdout + done.stderr
    assert "DistributedError" in done.stderr
    assert not list(tmp_path.glob("done-*.txt"))
