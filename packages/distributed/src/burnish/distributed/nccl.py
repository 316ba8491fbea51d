"""NCCL across machines: the unique id that every rank's communicator is made with, sent by rank
0 to the others through a rendezvous on ``MASTER_ADDR:MASTER_PORT`` (or through MPI)."""

from __future__ import annotations

import itertools
import os
import socket
import time
from datetime import timedelta
from typing import Any

from burnish.distributed.communicator import DistributedError
from burnish.distributed.launcher import Job

#: NCCL's unique id is 128 bytes; the rendezvous reads no more than this from a peer.
ID_BYTES = 128
_MAGIC = b"burnish-nccl-id:"
#: Each exchange of a job (every rank makes them in the same order) has a key of its own in
#: torch's store.
_exchanges = itertools.count()


def exchange_unique_id(job: Job, make_id: Any, timeout: float = 300.0) -> bytes:
    """Rank 0's ``make_id()`` (128 bytes) on every rank of ``job``, through a TCP rendezvous:
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
        return _through_torch_store(job, make_id, timeout)
    address = (job.master_addr, job.master_port)
    deadline = time.monotonic() + timeout
    if job.rank == 0:
        ident = bytes(make_id())
        if len(ident) != ID_BYTES:
            raise ValueError(f"an NCCL unique id has {ID_BYTES} bytes, got {len(ident)}")
        _serve(ident, address, job.world_size - 1, deadline)
        return ident
    return _fetch(address, deadline, job.rank)


def _through_torch_store(job: Job, make_id: Any, timeout: float) -> bytes:
    """The id through torchrun's agent store: rank 0 sets it, the others wait for the key."""
    from torch.distributed import TCPStore

    key = f"burnish/nccl-unique-id/{next(_exchanges)}"
    store = TCPStore(job.master_addr, job.master_port, job.world_size, False,
                     timedelta(seconds=timeout))
    if job.rank == 0:
        ident = bytes(make_id())
        store.set(key, ident)
        return ident
    try:
        return bytes(store.get(key))
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
                    hello = _read(conn, len(_MAGIC))
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
                reply = _read(conn, len(_MAGIC) + ID_BYTES)
            if reply[:len(_MAGIC)] != _MAGIC:
                raise DistributedError(f"NCCL rendezvous: {address[0]}:{address[1]} is not "
                                       f"burnish's rendezvous (it answered something else)")
            return reply[len(_MAGIC):]
        except OSError as caught:  # rank 0 not listening yet
            error = caught
            time.sleep(0.2)
    raise DistributedError(f"NCCL rendezvous: rank {rank} could not reach rank 0 at "
                           f"{address[0]}:{address[1]} in time ({error})", [0])


def _read(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"the peer closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def nccl_communicator(job: Job, timeout: float = 300.0) -> Any:
    """This rank's ``burnish.cuda.distributed.Communicator`` for ``job``, on GPU
    ``cuda:local_rank``: the unique id comes through MPI when the job was started by an MPI
    launcher and mpi4py is installed, else through the rendezvous on ``MASTER_ADDR``."""
    from burnish.cuda.distributed import Communicator, load_nccl
    from burnish.cuda.distributed.communicator import as_id

    nccl = load_nccl()

    def make_id() -> bytes:
        return as_id(nccl.get_unique_id())

    ident = None
    if job.launcher in ("openmpi", "mpich") and job.master_addr is None:
        from burnish.distributed.mpi import load_mpi

        comm = load_mpi().COMM_WORLD
        ident = comm.bcast(make_id() if job.rank == 0 else None, root=0)
    if ident is None:
        ident = exchange_unique_id(job, make_id, timeout)
    return Communicator(job.rank, job.world_size, ident, job.local_rank)
