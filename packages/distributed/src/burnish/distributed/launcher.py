"""The job a process belongs to, read from its launcher's environment: torchrun-style variables,
SLURM (``srun``), Open MPI (``mpirun``) and MPICH / Intel MPI (PMI)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

#: Each launcher's variables: (rank, world size, local rank, local world size), first found wins
#: in this order. torchrun first: it is the one that also gives MASTER_ADDR, and a torchrun job
#: inside a SLURM allocation sees both.
LAUNCHERS = {
    "torchrun": ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    "openmpi": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE"),
    "mpich": ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    "slurm": ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
}
#: Launchers whose processes are MPI processes (mpi4py can join their world without addresses).
MPI_LAUNCHERS = ("openmpi", "mpich")


@dataclass(frozen=True)
class Job:
    """This process's place in a job: ``rank`` of ``world_size`` processes, ``local_rank`` of
    the ``local_world_size`` on this machine (which GPU it drives), the rendezvous address
    (``MASTER_ADDR:MASTER_PORT``; None when the launcher gave none) and ``launcher``, the name
    of the launcher it was read from (``"single"`` when none: a world of one)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    master_addr: str | None = None
    master_port: int | None = None
    launcher: str = "single"

    @property
    def is_distributed(self) -> bool:
        """Whether the job has more than one process."""
        return self.world_size > 1


def detect_job(environ: Mapping[str, str] | None = None) -> Job:
    """The ``Job`` that ``environ`` (the process's environment by default) describes.

    Read in this order: torchrun-style (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``LOCAL_WORLD_SIZE``), Open MPI (``OMPI_COMM_WORLD_*``), MPICH and Intel MPI (``PMI_RANK``,
    ``PMI_SIZE``, ``MPI_LOCALRANKID``), SLURM (``SLURM_PROCID``, ``SLURM_NTASKS``,
    ``SLURM_LOCALID``); none of them is a world of one. ``MASTER_ADDR`` and ``MASTER_PORT``
    are read with any of them. Raises ValueError naming the variable for a value that is not a
    number, a rank outside the world, or a rank without a world size."""
    env = os.environ if environ is None else environ
    for launcher, (rank_var, size_var, local_var, local_size_var) in LAUNCHERS.items():
        if rank_var not in env and size_var not in env:
            continue
        if rank_var not in env or size_var not in env:
            have, missing = (rank_var, size_var) if rank_var in env else (size_var, rank_var)
            raise ValueError(f"the environment sets {have} but not {missing}: a {launcher} job "
                             f"gives both")
        rank = _integer(env, rank_var)
        world_size = _integer(env, size_var)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"{rank_var}={rank} is outside the world of {size_var}="
                             f"{world_size} processes")
        local_rank = _integer(env, local_var) if local_var in env else rank
        local_size = (_local_size(env[local_size_var], local_size_var)
                      if local_size_var in env else world_size)
        port = _integer(env, "MASTER_PORT") if "MASTER_PORT" in env else None
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"MASTER_PORT={port} is not a TCP port (1 to 65535)")
        return Job(rank, world_size, local_rank, local_size, env.get("MASTER_ADDR") or None,
                   port, launcher)
    return Job()


def _integer(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise ValueError(f"{name}={env[name]!r} is not an integer") from None


def _local_size(value: str, name: str) -> int:
    """SLURM writes tasks per node as ``2`` or ``2(x3)`` (2 on each of 3 nodes): the first."""
    head = value.split("(", 1)[0].split(",", 1)[0]
    try:
        return int(head)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None
