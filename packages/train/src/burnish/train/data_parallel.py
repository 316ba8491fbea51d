"""The Learner's data parallelism: joining the launcher's job (burnish-distributed, imported only
when asked for), reducing gradients during backward, and summing metrics over the ranks."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

import burnish as bn

#: Variables that say the process is one rank of several (torchrun-style, Open MPI, MPICH, SLURM).
WORLD_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")


def launched_by_job() -> bool:
    """Whether the environment says this process is one of several ranks."""
    for name in WORLD_VARIABLES:
        value = os.environ.get(name, "1")
        if value.isdigit() and int(value) > 1:
            return True
    return False


def join(backend: str | None = None) -> Any:
    """``burnish.distributed.init(backend)``; ImportError naming the package when it is not
    installed."""
    try:
        import burnish.distributed as distributed
    except ImportError as error:
        raise ImportError(
            f"data-parallel training needs burnish-distributed ({error}): pip install "
            "'burnish[distributed]' (or burnish-distributed[mpi] for MPI collectives)") from error
    return distributed.init(backend)


def reducer(communicator: Any, model: Any) -> Any:
    """A ``GradientReducer`` of ``model`` over ``communicator``."""
    from burnish.distributed import GradientReducer

    return GradientReducer(communicator, model)


def sum_states(communicator: Any, states: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each metric's ``state()`` summed over the ranks (numbers, and arrays of counts, padded
    to the longest rank's length): the epoch's value over every rank's samples."""
    device = _device(communicator)
    out = []
    for state in states:
        summed: dict[str, Any] = {}
        for key, value in sorted(state.items()):
            array = np.asarray(value, np.float64)
            if array.ndim:
                length = communicator.all_reduce(
                    bn.Tensor.from_data(np.array([array.shape[-1]], np.int64), device),
                    "max").to_numpy()[0]
                pad = [(0, 0)] * (array.ndim - 1) + [(0, int(length) - array.shape[-1])]
                array = np.pad(array, pad)
            total = communicator.all_reduce(bn.Tensor.from_data(array, device), "sum")
            result = total.to_numpy()
            summed[key] = result.tolist() if array.ndim else float(result.reshape(-1)[0])
        out.append(summed)
    return out


def agree(communicator: Any, flag: bool) -> bool:
    """True on every rank when it is true on any (rank 0's early stopping decides for all,
    and they decide alike from the same summed metrics)."""
    device = _device(communicator)
    value = communicator.all_reduce(bn.Tensor.from_data(np.array([int(flag)], np.int32),
                                                        device), "max")
    return bool(value.to_numpy()[0])


def _device(communicator: Any) -> Any:
    """Where small host values go to be reduced: the communicator's device (NCCL's GPU), else
    the default device (MPI takes any)."""
    return getattr(communicator, "device", None)
