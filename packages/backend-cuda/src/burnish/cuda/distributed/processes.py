"""Processes: ``launch`` starts one process per GPU (multiprocessing's spawn), each running a
function with its rank's ``Communicator``; ``run_ranks`` is the process machinery beneath it. A
failure in any process raises in the parent with that process's traceback."""

from __future__ import annotations

import multiprocessing
import pickle
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from numbers import Integral
from typing import Any

from burnish.cuda import runtime as cuda_runtime
from burnish.cuda.distributed.communicator import Communicator, as_id, load_nccl
from burnish.errors import BurnishError, DeviceError, UnsupportedError

#: Seconds the other ranks get to report once one has failed, before they are stopped: they
#: may be blocked in a collective that the failed rank will never join.
FAILURE_GRACE_S = 5.0
#: Seconds a rank that returned gets to exit (NCCL and CUDA teardown) before it is stopped.
EXIT_WAIT_S = 30.0


class LaunchError(BurnishError, RuntimeError):
    """A rank of ``launch`` or ``run_ranks`` raised, died, or ran past the timeout. ``rank`` is
    the rank that failed first (None on a timeout), ``traceback`` the text of its traceback
    (None when it died without one) and ``exitcode`` its process's exit status."""

    def __init__(self, message: str, rank: int | None = None, traceback: str | None = None,
                 exitcode: int | None = None):
        super().__init__(message)
        self.rank = rank
        self.traceback = traceback
        self.exitcode = exitcode


def launch(fn: Callable[..., Any], world_size: int | None = None, args: Sequence[Any] = (), *,
           devices: Sequence[int] | None = None, timeout: float | None = None) -> list[Any]:
    """Run ``fn(communicator, *args)`` in one new process per rank and return what each
    returned, in rank order (plain values: NumPy arrays, numbers; not GPU tensors).

    Rank ``r`` drives GPU ``cuda:r`` through its ``Communicator``; ``world_size`` defaults to
    every GPU CuPy sees. ``devices`` instead lists the GPU index of each rank (its length is
    the world size). The NCCL unique id is made here and handed to every rank. Processes are
    spawned (fresh interpreters, as CUDA requires), so ``fn`` and ``args`` must pickle and each
    process must be able to import ``fn`` by name: define it at module level of a script (whose
    own code sits under ``if __name__ == "__main__":``) or of a module on ``sys.path``.

    Raises UnsupportedError when CuPy, NCCL or a GPU is missing; DeviceError when
    ``world_size`` is larger than the number of GPUs; TypeError when ``fn`` or ``args`` do not
    pickle; ``LaunchError`` with the rank's traceback when a rank raises or dies (the others
    are then stopped), or when ``timeout`` seconds pass first.
    """
    check_picklable(fn, args)
    nccl = load_nccl()
    gpus = gpu_count()
    if devices is None:
        world_size = gpus if world_size is None else world_size
        check_world_size(world_size, gpus)
        world_size = int(world_size)
        devices = list(range(world_size))
    else:
        devices = [int(d) for d in devices]
        if world_size is not None and world_size != len(devices):
            raise ValueError(f"launch: world_size {world_size} but {len(devices)} devices "
                             f"{devices}")
        world_size = len(devices)
        check_world_size(world_size, world_size)
        missing = [d for d in devices if not 0 <= d < gpus]
        if missing:
            raise DeviceError(f"launch: devices {missing} do not exist; CuPy sees {gpus} "
                              f"GPU(s), cuda:0 to cuda:{gpus - 1}")
    # The root of NCCL's bootstrap listens in this process while the ranks connect to it.
    unique_id = as_id(nccl.get_unique_id())
    return run_ranks(_rank_main, world_size, (fn, tuple(args), world_size, unique_id, devices),
                     timeout=timeout)


def gpu_count() -> int:
    """The number of GPUs CuPy sees. Raises UnsupportedError when there are none."""
    cp = cuda_runtime.cp
    if cp is None:
        load_nccl()  # raises, saying to install CuPy
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except cp.cuda.runtime.CUDARuntimeError as error:
        count, reason = 0, str(error)
    else:
        reason = "no device"
    if count == 0:
        raise UnsupportedError(f"cuda distributed: no NVIDIA GPU is available ({reason})")
    return count


def check_world_size(world_size: int, gpus: int) -> None:
    """Raise ValueError for a world size below 1 and DeviceError, naming both numbers, for one
    larger than the ``gpus`` there are (one process per GPU)."""
    if isinstance(world_size, bool) or not isinstance(world_size, Integral) or world_size < 1:
        raise ValueError(f"launch: world_size must be a positive int, got {world_size!r}")
    if world_size > gpus:
        raise DeviceError(f"launch: world_size {world_size} is larger than the number of GPUs, "
                          f"{gpus}; each rank drives its own GPU")


def check_picklable(fn: Callable[..., Any], args: Sequence[Any]) -> bytes:
    """``fn`` and ``args`` pickled, as spawned processes receive them; TypeError when they do
    not pickle."""
    if not callable(fn):
        raise TypeError(f"launch: fn must be callable, got {type(fn).__name__}")
    try:
        return pickle.dumps((fn, tuple(args)))
    except Exception as error:
        raise TypeError(f"launch: fn and args must pickle, since each rank is a new process "
                        f"that receives them; define fn at module level (not a lambda or a "
                        f"nested function) ({type(error).__name__}: {error})") from error


def run_ranks(target: Callable[..., Any], world_size: int, args: Sequence[Any] = (),
              timeout: float | None = None) -> list[Any]:
    """Run ``target(rank, *args)`` for each rank in its own spawned process and return the
    results in rank order (what ``launch`` runs, with no GPU or NCCL of its own).

    Raises ``LaunchError`` with the first failing rank's traceback (or exit code, when it died
    without one) once every rank has reported or ``FAILURE_GRACE_S`` has passed, and when
    ``timeout`` seconds pass before every rank has returned; ranks still running then are
    stopped.
    """
    check_world_size(world_size, world_size)
    # Pickled here and unpickled in the child's own try: a function its process cannot import
    # (defined in __main__ of an interactive session, in a module off its sys.path) is then
    # reported with the child's traceback instead of killing it before it can report.
    payload = check_picklable(target, args)
    context = multiprocessing.get_context("spawn")
    processes: list[Any] = []
    readers: dict[Connection, int] = {}
    results: dict[int, Any] = {}
    failures: list[tuple[int, str | None]] = []
    late: list[int] = []
    try:
        for rank in range(world_size):
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(payload, rank, writer),
                                      name=f"burnish-rank-{rank}")
            process.start()
            writer.close()  # the child holds the other end: its exit ends the pipe
            processes.append(process)
            readers[reader] = rank
        late = _collect(readers, results, failures, timeout)
    finally:
        # Ranks that all returned get time to exit cleanly; otherwise some may be stuck.
        _stop(processes, EXIT_WAIT_S if len(results) == world_size else 0.0)
        for reader in readers:
            reader.close()
    if failures:
        rank, text = failures[0]
        code = processes[rank].exitcode
        others = sorted(r for r, _ in failures[1:])
        also = f" (rank {', '.join(map(str, others))} failed too)" if others else ""
        if text is None:
            raise LaunchError(f"rank {rank} of {world_size} died with exit code {code} before "
                              f"reporting (killed, or a crash in native code){also}",
                              rank, None, code)
        raise LaunchError(f"rank {rank} of {world_size} failed{also}:\n{text}", rank, text, code)
    if late:
        raise LaunchError(f"ranks {', '.join(map(str, late))} of {world_size} were still running "
                          f"after {timeout} s and were stopped")
    return [results[rank] for rank in range(world_size)]


def _rank_main(rank: int, fn: Callable[..., Any], args: tuple, world_size: int,
               unique_id: bytes, devices: list[int]) -> Any:
    """One rank of ``launch``: its communicator, the user's function, a clean close."""
    communicator = Communicator(rank, world_size, unique_id, devices[rank])
    try:
        result = fn(communicator, *args)
    except BaseException:
        communicator.abort()
        raise
    communicator.close()
    return result


def _child(payload: bytes, rank: int, conn: Connection) -> None:
    """A rank's process: unpickle the target, run it and send ``("ok", result)`` or
    ``("error", traceback)`` to the parent."""
    try:
        target, args = pickle.loads(payload)
        report = pickle.dumps(("ok", target(rank, *args)))
        failed = False
    except BaseException:
        report = pickle.dumps(("error", traceback.format_exc()))
        failed = True
    try:
        conn.send_bytes(report)
    finally:
        conn.close()
    if failed:
        raise SystemExit(1)


def _collect(readers: dict[Connection, int], results: dict[int, Any],
             failures: list[tuple[int, str | None]], timeout: float | None) -> list[int]:
    """Read each rank's report into ``results`` or ``failures``; return the ranks that had not
    reported by the deadline (none when all did, or when the grace after a failure ran out)."""
    pending = dict(readers)
    deadline = None if timeout is None else time.monotonic() + timeout
    grace_end = None
    while pending:
        ends = [end for end in (deadline, grace_end) if end is not None]
        left = None if not ends else max(0.0, min(ends) - time.monotonic())
        ready = wait(list(pending), timeout=left)
        if not ready:
            return [] if failures else sorted(pending.values())
        for conn in ready:
            rank = pending.pop(conn)
            try:
                status, payload = pickle.loads(conn.recv_bytes())
            except EOFError:  # the process ended without a word
                status, payload = "error", None
            except Exception as error:
                status, payload = "error", (f"its result could not be read here: "
                                            f"{type(error).__name__}: {error}")
            if status == "ok":
                results[rank] = payload
            else:
                failures.append((rank, payload))
                if grace_end is None:
                    grace_end = time.monotonic() + FAILURE_GRACE_S
    return []


def _stop(processes: list[Any], wait_s: float) -> None:
    """Let the processes exit within ``wait_s`` seconds, then terminate, then kill."""
    end = time.monotonic() + wait_s
    for process in processes:
        process.join(max(0.0, end - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(5.0)
        if process.is_alive():
            process.kill()
            process.join()
