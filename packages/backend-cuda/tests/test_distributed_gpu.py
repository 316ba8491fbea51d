"""burnish.cuda.distributed on real GPUs through NCCL: collectives in one process, then
``launch``ed ranks that train an MLP and end with the parameters single-process training
reaches. Skipped, naming what is missing, without CuPy, NCCL or a GPU; the two-rank tests need
two GPUs, except the one that tries two ranks on one GPU (NCCL normally refuses: then it skips
with NCCL's own words)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish.cuda import distributed
from burnish.errors import DeviceError, UnsupportedError

# The ranks import what they run by module name: the workers' folder goes on sys.path, which
# spawned processes inherit, whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent))
from distributed_workers import STEPS, collectives, initial_weights, train, train_rank  # noqa: E402


def _gpus() -> int:
    """How many GPUs NCCL can use here; skips the test, saying what is missing, when none."""
    try:
        distributed.load_nccl()
        return distributed.gpu_count()
    except UnsupportedError as error:
        pytest.skip(f"needs an NVIDIA GPU with CuPy and NCCL ({error})")


# -- a world of one, in this process ----------------------------------------------------------


def test_collectives_in_a_world_of_one():
    _gpus()
    with distributed.Communicator(0, 1, distributed.unique_id()) as comm:
        assert str(comm.device) == "cuda:0" and comm.device.backend.name == "cuda"
        results = collectives(comm)
    _check_collectives(results, 1)


def test_errors_name_the_backend_and_the_devices():
    gpus = _gpus()
    with distributed.Communicator(0, 1, distributed.unique_id()) as comm:
        with pytest.raises(DeviceError, match="backend 'ndarray'"):
            comm.all_reduce(Tensor.ones([2], device="ndarray"))
        if gpus > 1:
            other = Tensor.ones([2], device="cuda:1")
            with pytest.raises(DeviceError, match="on cuda:1, but rank 0's communicator is on "
                                                  "cuda:0"):
                comm.broadcast(other)
        with pytest.raises(ValueError, match="root 1"):
            comm.broadcast(Tensor.ones([2], device=comm.device), root=1)
        with pytest.raises(UnsupportedError, match="int16"):
            comm.all_reduce(Tensor.ones([2], device=comm.device, dtype="int16"))


def test_world_size_beyond_the_gpus_names_both_numbers():
    gpus = _gpus()
    with pytest.raises(DeviceError, match=f"world_size {gpus + 1} is larger than the number of "
                                          f"GPUs, {gpus}"):
        distributed.launch(collectives, gpus + 1)


# -- launched ranks ---------------------------------------------------------------------------


def test_a_world_of_one_trains_like_a_single_process():
    _gpus()
    (results,) = distributed.launch(collectives, 1, timeout=300)
    _check_collectives(results, 1)
    (trained,) = distributed.launch(train_rank, 1, (STEPS,), timeout=300)
    single = train(bn.backend("autodiff+cuda").devices()[0], None, STEPS)
    assert trained.keys() == single.keys()
    for name in single:
        np.testing.assert_allclose(trained[name], single[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    # Training moved the weights: the comparison is not of two untouched models.
    assert not np.allclose(single["layers.0.weight"], initial_weights()["layers.0.weight"])


def test_two_ranks_on_two_gpus_train_like_one_on_the_whole_batch():
    if _gpus() < 2:
        pytest.skip(f"needs two GPUs; this machine has {_gpus()}")
    _check_collectives(distributed.launch(collectives, 2, timeout=300), 2)
    _assert_like_one_process(distributed.launch(train_rank, 2, (STEPS,), timeout=300), STEPS)


def _assert_like_one_process(ranks: list, steps: int) -> None:
    single = train(bn.backend("autodiff+cuda").devices()[0], None, steps)
    for name in single:
        # Every rank applies the same averaged gradients: their models stay identical...
        np.testing.assert_allclose(ranks[1][name], ranks[0][name], rtol=1e-6, atol=1e-7,
                                   err_msg=name)
        # ...and equal to the model trained on the whole batch, up to rounding.
        np.testing.assert_allclose(ranks[0][name], single[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_a_captured_step_with_an_all_reduce_runs_eagerly():
    """``burnish.capture`` refuses a step that all-reduces through NCCL (a replay would skip
    the collective and the ranks would drift apart): the step runs eagerly, the ranks' models
    stay identical and equal to one process's on the whole batch."""
    if _gpus() < 2:
        pytest.skip(f"needs two GPUs; this machine has {_gpus()}")
    steps = 12
    _assert_like_one_process(distributed.launch(train_rank, 2, (steps, True), timeout=300),
                             steps)


def test_two_ranks_sharing_one_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    gpus = _gpus()
    if gpus != 1:
        pytest.skip(f"tries two ranks on one GPU, which is what a one-GPU machine can do; this "
                    f"one has {gpus} (the two-GPU test runs instead)")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.setenv("NCCL_DEBUG_FILE", str(tmp_path / "nccl.%h.%p.log"))
    try:
        results = distributed.launch(collectives, devices=[0, 0], timeout=300)
    except distributed.LaunchError as error:
        text = error.traceback or ""
        if "NcclError" not in text:
            raise
        refusal = [line for line in text.splitlines() if "NcclError" in line][-1].strip()
        said = [line.strip() for log in tmp_path.glob("nccl.*.log")
                for line in log.read_text(errors="replace").splitlines() if "Duplicate" in line]
        pytest.skip(f"NCCL refuses two ranks on one GPU: {refusal}"
                    + (f"; NCCL_DEBUG=WARN says: {said[0]}" if said else ""))
    _check_collectives(results, 2)


def _check_collectives(results: list[dict] | dict, world: int) -> None:
    results = results if isinstance(results, list) else [results]
    assert [r["rank"] for r in results] == list(range(world))
    total = world * (world + 1) / 2
    for r in results:
        np.testing.assert_array_equal(r["sum"], np.full((3, 2), total, np.float32))
        np.testing.assert_allclose(r["mean"], np.full((3, 2), total / world), rtol=1e-6)
        np.testing.assert_array_equal(r["max"], np.full((3, 2), world, np.float32))
        np.testing.assert_array_equal(r["min"], np.full((3, 2), 1, np.float32))
        np.testing.assert_array_equal(r["int64"], np.full(4, total, np.int64))
        np.testing.assert_array_equal(r["bfloat16"], np.full((3, 2), total, np.float32))
        np.testing.assert_array_equal(r["view"], np.arange(6.0).reshape(2, 3).T * total)
        np.testing.assert_array_equal(r["broadcast"], np.full(5, world - 1, np.float32))
        np.testing.assert_array_equal(r["broadcast_bool"], np.ones(3, bool))
        np.testing.assert_array_equal(
            r["all_gather"], np.stack([np.full(2, k + 1, np.float32) for k in range(world)]))
        chunks = np.arange(4 * world, dtype=np.float32).reshape(2 * world, 2) * total
        mine = chunks[2 * r["rank"]:2 * r["rank"] + 2]
        np.testing.assert_array_equal(r["reduce_scatter"], mine)
        np.testing.assert_allclose(r["reduce_scatter_mean"], mine / world, rtol=1e-6)
        np.testing.assert_array_equal(r["started"][0], np.full((3, 2), total, np.float32))
        np.testing.assert_array_equal(r["started"][1], np.full((3, 2), 2 * total, np.float32))
        backend, tracked, values = r["autodiff"]
        assert (backend, tracked) == ("autodiff+cuda", False)
        np.testing.assert_array_equal(values, np.full(2, total, np.float32))
        if isinstance(r["fusion"], tuple):
            backend, values = r["fusion"]
            assert backend == "fusion+cuda"
            np.testing.assert_array_equal(values, np.full(2, 2 * total + world, np.float32))
