"""``MpiCommunicator``: collectives through MPI (mpi4py) on host copies of burnish tensors, for
every backend; each waits at most ``timeout`` seconds and then names the ranks that did not
answer."""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from burnish import Tensor
from burnish.distributed import gradients
from burnish.distributed.communicator import (
    DistributedError,
    Pending,
    check_op,
    check_root,
)

#: Seconds a collective waits by default before it names the ranks that did not join
#: (``BURNISH_DISTRIBUTED_TIMEOUT`` sets another).
DEFAULT_TIMEOUT_S = 300.0
#: Seconds the ranks that timed out spend finding out which others still answer.
PROBE_S = 3.0
_PROBE_TAG = 7207
_REPLY_TAG = 7208


def load_mpi() -> Any:
    """mpi4py's ``MPI`` module, initialised. Raises ImportError saying what to install."""
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise ImportError(
            f"burnish.distributed's MPI collectives need mpi4py and an MPI library ({error}); "
            "pip install 'burnish-distributed[mpi]' (mpi4py with the mpich wheel), or mpi4py "
            "built against your cluster's MPI") from error
    return MPI


def default_timeout() -> float:
    """``BURNISH_DISTRIBUTED_TIMEOUT`` in seconds, else ``DEFAULT_TIMEOUT_S``."""
    value = os.environ.get("BURNISH_DISTRIBUTED_TIMEOUT")
    if value is None:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"BURNISH_DISTRIBUTED_TIMEOUT={value!r} is not a number of seconds"
                         ) from None
    if not seconds > 0:
        raise ValueError(f"BURNISH_DISTRIBUTED_TIMEOUT must be positive, got {value}")
    return seconds


class MpiCommunicator:
    """A ``Communicator`` over an MPI communicator (``MPI.COMM_WORLD`` by default), for tensors
    of any backend: each collective copies the tensor to a NumPy array, runs MPI's non-blocking
    collective on it and makes the result a tensor on the argument's device again.

    Every wait is bounded: a collective that has not completed after ``timeout`` seconds (a
    rank died, hangs, or called other collectives) raises ``DistributedError`` naming the ranks
    that did not answer a probe (``error.ranks``), and the process then ends the whole job when
    it exits (``MPI_Abort``; a normal exit would wait in ``MPI_Finalize`` for the dead rank).
    Launchers that end the whole job when one process dies (mpiexec's default) do so first;
    the timeout is for the others (``srun`` without ``--kill-on-bad-exit``, a hung rank).
    """

    def __init__(self, comm: Any = None, timeout: float | None = None):
        self._mpi = load_mpi()
        self._comm = (self._mpi.COMM_WORLD if comm is None else comm).Dup()
        self._probe = self._comm.Dup()  # its own context: probes never meet collectives
        self.rank: int = self._comm.Get_rank()
        self.world_size: int = self._comm.Get_size()
        self.timeout = default_timeout() if timeout is None else float(timeout)
        if not self.timeout > 0:
            raise ValueError(f"MpiCommunicator: timeout must be positive, got {timeout}")
        self._in_flight: list[Any] = []
        self._replies: list[Any] = []  # probes' and replies' sends, kept until they complete

    def __repr__(self) -> str:
        return f"MpiCommunicator(rank={self.rank}, world_size={self.world_size})"

    # -- collectives ------------------------------------------------------------------------

    def all_reduce(self, tensor: Tensor, op: str = "sum") -> Tensor:
        """The elementwise ``op`` (``"sum"``, ``"mean"``, ``"max"``, ``"min"``, ``"prod"``) of
        ``tensor`` over all ranks, on every rank, as a new tensor of its backend, shape and
        dtype. Raises ValueError for an unknown op, DTypeError for bools and the mean of
        integers, DistributedError on a timeout."""
        return self.all_reduce_start([tensor], op).wait()[0]

    def all_reduce_start(self, tensors: Sequence[Tensor], op: str = "sum") -> Pending:
        """``all_reduce`` of every tensor (of one dtype), in one flat buffer and one
        ``MPI_Iallreduce``, started now; ``wait()`` on the result finishes it."""
        tensors = list(tensors)
        if not tensors:
            return Pending(list)
        for tensor in tensors:
            check_op(op, tensor)
        arrays = [_host(t) for t in tensors]
        if len({a.dtype for a in arrays}) > 1:
            raise ValueError(f"all_reduce_start: the tensors have several dtypes "
                             f"{sorted({str(a.dtype) for a in arrays})}; start one per dtype")
        send = np.concatenate([a.reshape(-1) for a in arrays])
        recv = np.empty_like(send)
        mpi_op = {"sum": self._mpi.SUM, "mean": self._mpi.SUM, "max": self._mpi.MAX,
                  "min": self._mpi.MIN, "prod": self._mpi.PROD}[op]
        request = self._comm.Iallreduce(send, recv, mpi_op)
        self._in_flight.append(request)

        def finish() -> list[Tensor]:
            self._wait(request, "all_reduce")
            out = recv / self.world_size if op == "mean" else recv
            results, start = [], 0
            for tensor, array in zip(tensors, arrays):
                part = out[start:start + array.size].reshape(array.shape).astype(array.dtype)
                results.append(_tensor(part, tensor))
                start += array.size
            return results

        return Pending(finish)

    def broadcast(self, tensor: Tensor, root: int = 0) -> Tensor:
        """Rank ``root``'s ``tensor`` on every rank, as a new tensor (any dtype)."""
        check_root(root, self.world_size)
        array = np.array(_host(tensor), order="C")  # a copy: MPI writes into it
        self._wait(self._comm.Ibcast(array, root=root), "broadcast")
        return _tensor(array, tensor)

    def all_gather(self, tensor: Tensor) -> Tensor:
        """Every rank's ``tensor`` stacked in rank order: ``[world_size, *shape]``."""
        array = np.ascontiguousarray(_host(tensor))
        out = np.empty((self.world_size, *array.shape), array.dtype)
        self._wait(self._comm.Iallgather(array, out), "all_gather")
        return _tensor(out, tensor)

    def reduce_scatter(self, tensor: Tensor, op: str = "sum") -> Tensor:
        """Part ``rank`` (of ``world_size`` along the first dim) of the ``op`` over the ranks.
        Raises ValueError when the first dim is not a multiple of the world size."""
        check_op(op, tensor, "reduce_scatter")
        array = np.ascontiguousarray(_host(tensor))
        if array.ndim == 0 or array.shape[0] % self.world_size:
            raise ValueError(f"reduce_scatter: the first dim of shape {list(array.shape)} must "
                             f"be a multiple of the world size {self.world_size}")
        out = np.empty((array.shape[0] // self.world_size, *array.shape[1:]), array.dtype)
        mpi_op = {"sum": self._mpi.SUM, "mean": self._mpi.SUM, "max": self._mpi.MAX,
                  "min": self._mpi.MIN, "prod": self._mpi.PROD}[op]
        self._wait(self._comm.Ireduce_scatter_block(array, out, mpi_op), "reduce_scatter")
        if op == "mean":
            out = (out / self.world_size).astype(array.dtype)
        return _tensor(out, tensor)

    def barrier(self) -> None:
        """Return once every rank has called it (DistributedError on a timeout)."""
        self._wait(self._comm.Ibarrier(), "barrier")

    def all_reduce_gradients(self, grads: Any, params_or_module: Any, op: str = "mean") -> Any:
        """``grads`` with every trained parameter's gradient averaged (``op="mean"``) or summed
        over the ranks, one MPI call per dtype; see burnish.distributed.gradients."""
        if op not in ("mean", "sum"):
            raise ValueError(f"all_reduce_gradients: op must be 'mean' or 'sum', got {op!r}")
        return gradients.reduce_gradients(
            grads, params_or_module,
            lambda flats: [self.all_reduce_start([flat], op).wait()[0] for flat in flats])

    def broadcast_module(self, module: Any, root: int = 0) -> Any:
        """A copy of ``module`` holding rank ``root``'s parameter values (frozen ones too)."""
        check_root(root, self.world_size)
        return gradients.replace_params(
            module, lambda flats: [self.broadcast(flat, root) for flat in flats])

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Free the communicators (every rank closes its own)."""
        for comm in (self._comm, self._probe):
            if comm != self._mpi.COMM_NULL:
                comm.Free()
        self._comm = self._probe = self._mpi.COMM_NULL

    def abort(self, code: int = 1) -> None:
        """End every rank's process (``MPI_Abort``), after an error that leaves the job unable
        to go on."""
        sys.stdout.flush()
        sys.stderr.flush()
        # The launcher forwards what the ranks wrote on its own time and stops forwarding when
        # it ends the job: a moment for the error just printed to reach the user.
        time.sleep(1.0)
        self._mpi.COMM_WORLD.Abort(code)

    def __enter__(self) -> MpiCommunicator:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.close()

    # -- waiting ----------------------------------------------------------------------------

    def _wait(self, request: Any, name: str) -> None:
        """Wait for ``request`` (polling, so the wait can end, and answering the probes of
        ranks that timed out), then raise on the timeout."""
        deadline = time.monotonic() + self.timeout
        pause = 0.0
        while not request.Test():
            if time.monotonic() > deadline:
                silent = self._silent_ranks()
                who = (f"rank {', '.join(map(str, silent))} did not answer (dead, hung, or "
                       f"calling other collectives)") if silent else (
                       "every rank answers, but they called different collectives")
                # MPI_Finalize at exit would wait for the silent ranks: once the error has been
                # reported (Python prints it before running atexit), end the job instead.
                atexit.register(self.abort)
                raise DistributedError(
                    f"{name} on rank {self.rank} of {self.world_size} did not complete within "
                    f"{self.timeout:g} s: {who}", silent)
            if pause:  # waiting for a while: another rank may be asking who is alive
                self._answer_probes()
            time.sleep(pause)
            pause = min(0.005, pause + 0.0002)
        if request in self._in_flight:
            self._in_flight.remove(request)

    def progress(self) -> None:
        """Let MPI move the collectives started and not yet waited for (MPI progresses them
        only inside its calls, unless its library runs a progress thread)."""
        self._in_flight = [r for r in self._in_flight if not r.Test()]

    def _answer_probes(self) -> None:
        """Reply to every probe that has arrived: this rank is alive and waiting."""
        status = self._mpi.Status()
        while self._probe.Iprobe(source=self._mpi.ANY_SOURCE, tag=_PROBE_TAG, status=status):
            source = status.Get_source()
            self._probe.Recv(np.zeros(1, np.int8), source=source, tag=_PROBE_TAG)
            self._replies.append(self._probe.Isend(np.ones(1, np.int8), dest=source,
                                                   tag=_REPLY_TAG))

    def _silent_ranks(self) -> list[int]:
        """The ranks that do not reply within ``PROBE_S`` to a probe sent to each of them: a
        rank waiting in a collective replies (while it waits, and while it probes in turn); a
        dead or hung one, or one busy elsewhere, does not."""
        others = [r for r in range(self.world_size) if r != self.rank]
        token = np.ones(1, np.int8)
        self._replies += [self._probe.Isend(token, dest=r, tag=_PROBE_TAG) for r in others]
        buffers = {r: np.zeros(1, np.int8) for r in others}
        receives = {r: self._probe.Irecv(buffers[r], source=r, tag=_REPLY_TAG) for r in others}
        deadline = time.monotonic() + PROBE_S
        answered: set[int] = set()
        while time.monotonic() < deadline and len(answered) < len(others):
            self._answer_probes()
            answered |= {r for r, req in receives.items() if r not in answered and req.Test()}
            time.sleep(0.01)
        return [r for r in others if r not in answered]  # sends left pending: the job ends


def _host(tensor: Tensor) -> np.ndarray:
    """The tensor's values on the host (an autodiff tensor's, untracked)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"expected a burnish Tensor, got {type(tensor).__name__}")
    return np.asarray(tensor.to_numpy())


def _tensor(array: np.ndarray, like: Tensor) -> Tensor:
    return Tensor.from_data(np.ascontiguousarray(array), like.device, like.dtype)
