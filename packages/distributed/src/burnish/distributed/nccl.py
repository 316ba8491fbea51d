"""NCCL across machines: the unique id that every rank's communicator is made with, sent by rank
0 to the others through a rendezvous on ``MASTER_ADDR:MASTER_PORT`` (or through MPI), with the
port of rank 0's watchdog (``burnish.distributed.watchdog``)."""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from datetime import timedelta
from typing import Any

from burnish.distributed import watchdog
from burnish.distributed.communicator import DistributedError
from burnish.distributed.launcher import Job

#: NCCL's unique id is 128 bytes; the rendezvous reads no more than it and a port from a peer.
ID_BYTES = 128
_PORT = struct.Struct("!H")
_MAGIC = b"burnish-nccl-id:"
#: Each exchange of a job (every rank makes them in the same order) has a key of its own in
#: torch's store.
_exchanges = itertools.count()


def exchange_unique_id(job: Job, make_id: Any, timeout: float = 300.0,
                       port: int = 0) -> tuple[bytes, int]:
    """Rank 0's ``make_id()`` (128 bytes) and ``port`` (where its watchdog listens; rank 0
    passes it) on every rank of ``job``, through a TCP rendezvous:
    rank 0 listens on ``master_port`` and answers each of the other ``world_size - 1`` ranks'
    connections with the id; they connect to ``master_addr:master_port``, retrying until
    ``timeout`` seconds have passed (rank 0 may start last).

    The rendezvous moves one fixed-size message each way and nothing else (NCCL makes its own
    connections from the id). Under torchrun, whose agent already serves a key-value store on
    ``MASTER_PORT`` (``TORCHELASTIC_USE_AGENT_STORE=True``), the id goes through that store
    instead, with torch's client (torchrun comes with torch). Raises DistributedError naming
    the address when the rendezvous cannot be made in time, ValueError when the job has no
    ``MASTER_ADDR``/``MASTER_PORT``."""
    if job.master_addr is None or job.master_port is None:
        raise ValueError(f"joining NCCL through a rendezvous needs MASTER_ADDR and MASTER_PORT "
                         f"(rank {job.rank} of {job.world_size}, launcher {job.launcher}); set "
                         f"them, or start the job with mpiexec to exchange the id through MPI")
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return _through_torch_store(job, make_id, timeout, port)
    address = (job.master_addr, job.master_port)
    deadline = time.monotonic() + timeout
    if job.rank == 0:
        ident = _checked(make_id())
        _serve(ident + _PORT.pack(port), address, job.world_size - 1, deadline)
        return ident, port
    return _split(_fetch(address, deadline, job.rank))


def _checked(ident: Any) -> bytes:
    ident = bytes(ident)
    if len(ident) != ID_BYTES:
        raise ValueError(f"an NCCL unique id has {ID_BYTES} bytes, got {len(ident)}")
    return ident


def _split(payload: bytes) -> tuple[bytes, int]:
    return payload[:ID_BYTES], _PORT.unpack(payload[ID_BYTES:])[0]


def _through_torch_store(job: Job, make_id: Any, timeout: float,
                         port: int) -> tuple[bytes, int]:
    """The id through torchrun's agent store: rank 0 sets it, the others wait for the key."""
    from torch.distributed import TCPStore

    key = f"burnish/nccl-unique-id/{next(_exchanges)}"
    store = TCPStore(job.master_addr, job.master_port, job.world_size, False,
                     timedelta(seconds=timeout))
    if job.rank == 0:
        ident = _checked(make_id())
        store.set(key, ident + _PORT.pack(port))
        return ident, port
    try:
        return _split(bytes(store.get(key)))
    except RuntimeError as error:  # torch's timeout
        raise DistributedError(f"NCCL rendezvous: rank {job.rank} did not get rank 0's id from "
                               f"torchrun's store at {job.master_addr}:{job.master_port} "
                               f"({error})", [0]) from error


def _serve(ident: bytes, address: tuple[str, int], peers: int, deadline: float) -> None:
    with socket.create_server(("", address[1]), reuse_port=False) as server:
        served = 0
        while served < peers:
            server.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                conn, _ = server.accept()
            except TimeoutError:
                raise DistributedError(
                    f"NCCL rendezvous: rank 0 heard from {served} of the {peers} other ranks on "
                    f"port {address[1]} before the timeout") from None
            with conn:
                conn.settimeout(10.0)
                try:
                    hello = watchdog.read_exactly(conn, len(_MAGIC))
                except OSError:
                    continue  # not one of ours (a port scan): wait for the next
                if hello != _MAGIC:
                    continue
                conn.sendall(_MAGIC + ident)
                served += 1


def _fetch(address: tuple[str, int], deadline: float, rank: int) -> bytes:
    error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(address, timeout=10.0) as conn:
                conn.sendall(_MAGIC)
                reply = watchdog.read_exactly(conn, len(_MAGIC) + ID_BYTES + _PORT.size)
            if reply[:len(_MAGIC)] != _MAGIC:
                raise DistributedError(f"NCCL rendezvous: {address[0]}:{address[1]} is not "
                                       f"burnish's rendezvous (it answered something else)")
            return reply[len(_MAGIC):]
        except OSError as caught:  # rank 0 not listening yet
            error = caught
            time.sleep(0.2)
    raise DistributedError(f"NCCL rendezvous: rank {rank} could not reach rank 0 at "
                           f"{address[0]}:{address[1]} in time ({error})", [0])


def nccl_communicator(job: Job, timeout: float = 300.0, collective_timeout: float | None = None,
                      on_failure: watchdog.OnFailure = watchdog.stop_process) -> Any:
    """This rank's ``burnish.cuda.distributed.Communicator`` for ``job``, on GPU
    ``cuda:local_rank``: the unique id comes through MPI when the job was started by an MPI
    launcher and mpi4py is installed, else through the rendezvous on ``MASTER_ADDR``
    (``timeout``: seconds to wait for the other ranks there).

    The ranks then join a ``Watchdog`` (rank 0 listens on a free port sent with the id): a rank
    that dies, or a collective that has not completed after ``collective_timeout`` seconds
    (``BURNISH_DISTRIBUTED_TIMEOUT``, else 300), ends every rank's process with a message
    naming the ranks at fault (``on_failure``), instead of NCCL waiting forever."""
    from burnish.cuda.distributed import Communicator, load_nccl
    from burnish.cuda.distributed.communicator import as_id
    from burnish.distributed.mpi import default_timeout

    nccl = load_nccl()
    collective_timeout = default_timeout() if collective_timeout is None else collective_timeout

    def make_id() -> bytes:
        return as_id(nccl.get_unique_id())

    listener = watchdog.listen() if job.rank == 0 and job.world_size > 1 else None
    port = listener.getsockname()[1] if listener is not None else 0
    host = job.master_addr
    try:
        if job.world_size == 1:  # nobody to meet: a world of one needs no rendezvous
            ident = make_id()
        elif job.launcher in ("openmpi", "mpich") and job.master_addr is None:
            from burnish.distributed.mpi import load_mpi

            comm = load_mpi().COMM_WORLD
            ident, host, port = comm.bcast(
                (make_id(), socket.gethostname(), port) if job.rank == 0 else None, root=0)
        else:
            ident, port = exchange_unique_id(job, make_id, timeout, port)
        communicator = Communicator(job.rank, job.world_size, ident, job.local_rank)
        if job.world_size > 1:
            communicator.watchdog = watchdog.Watchdog.join(
                job.rank, job.world_size, (host or "127.0.0.1", port), listener,
                communicator.progress, collective_timeout, timeout, on_failure)
    finally:
        if listener is not None:
            listener.close()
    return communicator
