"""burnish.distributed: data-parallel training across processes and machines. ``init()`` joins
the job the process was started in (torchrun-style variables, SLURM, Open MPI, MPICH) and
returns its ``Communicator``: NCCL for the cuda backend, MPI (mpi4py) for every backend.

```
comm = burnish.distributed.init()                  # under mpiexec -n 4, srun, torchrun...
model = comm.broadcast_module(model)               # rank 0's weights everywhere
reducer = GradientReducer(comm, model)
for batch in loader:                               # a ShardedLoader: this rank's share
    with reducer.overlap(model):
        grads = loss(model, batch).backward()      # buckets all-reduced as they are ready
    model = optimizer.step(lr, model, reducer.gradients(grads))
```
"""

from __future__ import annotations

from typing import Any

from burnish.distributed.communicator import (
    REDUCE_OPS,
    Communicator,
    DistributedError,
    Pending,
)
from burnish.distributed.launcher import Job, detect_job
from burnish.distributed.overlap import GradientReducer

__all__ = [
    "REDUCE_OPS",
    "Communicator",
    "DistributedError",
    "GradientReducer",
    "Job",
    "Pending",
    "ShardedLoader",
    "detect_job",
    "init",
]


def init(backend: str | None = None, timeout: float | None = None) -> Communicator:
    """The ``Communicator`` of the job this process was started in (see ``detect_job``).

    ``backend``: ``"nccl"`` (GPU tensors of the cuda backend; rank ``r`` drives
    ``cuda:local_rank``; the NCCL id goes through MPI under an MPI launcher, else through a
    rendezvous on ``MASTER_ADDR:MASTER_PORT``) or ``"mpi"`` (tensors of any backend, through
    mpi4py; the job must be started by an MPI launcher: ``mpiexec``, or ``srun --mpi=pmi2``
    / ``pmix``). None picks ``"mpi"`` when the processes were started by MPI, else ``"nccl"``.
    ``timeout``: the seconds a collective waits before it names the ranks that did not answer
    (``BURNISH_DISTRIBUTED_TIMEOUT``, else 300); under NCCL a watchdog thread does the waiting
    and ends the process (``burnish.distributed.watchdog``), and a rank that dies ends the
    others at once.

    Without a launcher this is a world of one (MPI when mpi4py is installed). Raises ImportError
    naming the package to install, ValueError for an unknown ``backend`` or malformed launcher
    variables, DistributedError when the job cannot be joined in time."""
    job = detect_job()
    if backend is None:
        backend = "mpi" if job.launcher in ("openmpi", "mpich") or not job.is_distributed \
            else "nccl"
    if backend == "mpi":
        from burnish.distributed.mpi import MpiCommunicator

        communicator = MpiCommunicator(timeout=timeout)
        if communicator.world_size != job.world_size and job.launcher != "single":
            raise DistributedError(
                f"the {job.launcher} environment says {job.world_size} ranks, MPI's world has "
                f"{communicator.world_size}: start the processes with mpiexec (or srun "
                f"--mpi=pmi2), not a launcher that MPI cannot see; NCCL joins such jobs "
                f"(backend='nccl')")
        return communicator
    if backend == "nccl":
        from burnish.distributed.nccl import nccl_communicator

        return nccl_communicator(job, collective_timeout=timeout)
    raise ValueError(f"burnish.distributed.init: backend must be 'nccl' or 'mpi', got "
                     f"{backend!r}")


def __getattr__(name: str) -> Any:
    # ShardedLoader extends burnish-train's DataLoader: imported when asked for.
    if name == "ShardedLoader":
        from burnish.distributed.sampler import ShardedLoader

        return ShardedLoader
    raise AttributeError(f"module 'burnish.distributed' has no attribute {name!r}")
