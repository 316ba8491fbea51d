"""Reading the launcher's environment: torchrun-style, Open MPI, MPICH (PMI), SLURM."""

import pytest

from burnish.distributed import Job, detect_job


def test_no_launcher_is_a_world_of_one():
    assert detect_job({}) == Job()
    assert not detect_job({}).is_distributed


def test_torchrun_variables():
    job = detect_job({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
                      "MASTER_ADDR": "node0", "MASTER_PORT": "29500"})
    assert job == Job(5, 8, 1, 4, "node0", 29500, "torchrun")
    assert job.is_distributed


def test_torchrun_wins_over_slurm_in_the_same_allocation():
    job = detect_job({"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"})
    assert (job.launcher, job.rank, job.world_size) == ("torchrun", 1, 2)


def test_open_mpi_variables():
    job = detect_job({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
                      "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert job == Job(3, 4, 1, 2, None, None, "openmpi")


def test_mpich_pmi_variables():
    job = detect_job({"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0",
                      "MPI_LOCALNRANKS": "1"})
    assert job == Job(2, 3, 0, 1, None, None, "mpich")


def test_slurm_variables_and_tasks_per_node_notation():
    job = detect_job({"SLURM_PROCID": "7", "SLURM_NTASKS": "8", "SLURM_LOCALID": "3",
                      "SLURM_NTASKS_PER_NODE": "4(x2)", "MASTER_ADDR": "n1",
                      "MASTER_PORT": "1234"})
    assert job == Job(7, 8, 3, 4, "n1", 1234, "slurm")


@pytest.mark.parametrize("env, message", [
    ({"RANK": "1"}, "sets RANK but not WORLD_SIZE"),
    ({"WORLD_SIZE": "2"}, "sets WORLD_SIZE but not RANK"),
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not an integer"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2 is outside the world of WORLD_SIZE=2"),
    ({"PMI_RANK": "0", "PMI_SIZE": "0"}, "PMI_RANK=0 is outside the world of PMI_SIZE=0"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not"),
])
def test_malformed_variables_are_named(env, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        detect_job(env)
