"""The DataLoader's worker processes: they read and collate the items of whole batches by index,
and the loader takes the results back in order."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import random
import signal
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

from .errors import DataError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

#: How often (seconds) a waiting worker checks that its parent lives, and the loader that its
#: workers do.
POLL_SECONDS = 1.0
#: How long a shutdown waits for a worker to finish its batch and leave before terminating it.
JOIN_SECONDS = 5.0


class WorkerError(DataError):
    """A DataLoader worker process failed: its dataset or batcher cannot be sent to it, it died,
    or it raised an exception that cannot be re-raised as itself in the loader's process."""


@dataclass(frozen=True)
class WorkerInfo:
    """Who the code running in a DataLoader worker is: ``id`` in ``range(num_workers)``, the
    loader's ``seed``, and the worker's own copy of the ``dataset``."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_current = threading.local()


def get_worker_info() -> WorkerInfo | None:
    """The ``WorkerInfo`` of the DataLoader worker (process or thread) running this code; ``None``
    outside the workers."""
    return getattr(_current, "info", None)


def set_worker_info(info: WorkerInfo) -> None:
    _current.info = info


@contextmanager
def seeded_generators(seed: int, epoch: int, position: int) -> Iterator[None]:
    """Seeds Python's ``random`` and NumPy's global generator from ``(seed, epoch, position)``
    for the building of one batch, and gives them back their state afterwards, so augmentations
    drawn from them are the same whichever process builds the batch and after a resume."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    words = np.random.SeedSequence([seed, epoch, position]).generate_state(2)
    random.seed(int(words[0]))
    np.random.seed(int(words[1]))
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def default_context() -> str:
    """"forkserver" where there is one (Linux, macOS): a fork of a process that runs no threads,
    so workers cannot inherit a lock that another thread held; "spawn" elsewhere (Windows)."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def preload_worker_modules(ctx: Any) -> None:
    """Have the fork server import this module (NumPy, burnish) before it forks any worker, so
    each worker starts in milliseconds instead of importing them again (a fifth of a second).
    Takes effect only if the server has not started yet, and keeps what others asked for."""
    from multiprocessing import forkserver

    modules = list(getattr(forkserver._forkserver, "_preload_modules", None) or ["__main__"])
    if __name__ not in modules:
        ctx.set_forkserver_preload([*modules, __name__])


def pickled(**named: Any) -> bytes:
    """The values the workers need (the dataset, the batcher...) as the bytes they are sent; a
    ``WorkerError`` naming the one that cannot be pickled otherwise."""
    try:
        return bytes(ForkingPickler.dumps(tuple(named.values())))
    except Exception as error:  # PicklingError, AttributeError, TypeError: all mean the same
        what = next((name for name, value in named.items() if _fails_to_pickle(value)), "data")
        raise WorkerError(
            f"DataLoader worker processes need the {what} pickled, and it cannot be "
            f"({type(error).__name__}: {error}). Define its classes and functions at module "
            "level (not lambdas or local functions, which pickle cannot name), or use "
            "worker_mode='thread', whose workers share this process's objects."
        ) from error


def _fails_to_pickle(value: Any) -> bool:
    try:
        ForkingPickler.dumps(value)
    except Exception:
        return True
    return False


class ProcessWorkers:
    """``num_workers`` processes that build batches: each takes tasks (a batch's position, epoch,
    seed and item indices) from one queue, reads ``dataset.get(i)`` for each index (with the
    generators seeded by ``seeded_generators``), collates the items with ``batcher.collate`` when
    a batcher is given, and puts the result, or the exception with its traceback, on the result
    queue.

    ``run`` hands the results of one list of tasks back in order. A pool serves one iteration at
    a time: starting one abandons the one before, whose remaining tasks the workers skip.
    ``shutdown`` (also run when the pool is garbage-collected or the interpreter exits) stops the
    processes, terminating any that do not leave in time.
    """

    def __init__(
        self,
        dataset: Any,
        batcher: Any,
        num_workers: int,
        seed: int,
        worker_init_fn: Callable[[int], None] | None,
        context: str | None,
    ):
        start_method = context or default_context()
        ctx = multiprocessing.get_context(start_method)
        if start_method == "forkserver":
            preload_worker_modules(ctx)
        # A fork shares the objects as they are; the other start methods need them pickled.
        if start_method == "fork":
            payload: Any = (dataset, batcher)
        else:
            payload = pickled(dataset=dataset, batcher=batcher)
            pickled(worker_init_fn=worker_init_fn)
        self.tasks = ctx.Queue()
        self.results = ctx.Queue()
        widen_pipe(self.results)
        self.generation = ctx.RawValue("q", 0)
        self.processes = []
        for worker_id in range(num_workers):
            process = ctx.Process(  # type: ignore[attr-defined]  # typeshed's BaseContext
                target=worker_loop,
                args=(worker_id, num_workers, seed, payload, worker_init_fn, self.tasks,
                      self.results, self.generation, os.getpid()),
                name=f"burnish-data-{worker_id}",
                daemon=True,
            )
            self.processes.append(process)
        self._shutdown = weakref.finalize(
            self, shut_down, self.processes, self.tasks, self.results
        )
        try:
            for process in self.processes:
                process.start()
        except BaseException:
            self.shutdown()
            raise

    @property
    def alive(self) -> bool:
        return self._shutdown.alive

    def shutdown(self) -> None:
        """Stop the workers (once; later calls do nothing)."""
        self._shutdown()

    def run(
        self, seed: int, epoch: int, tasks: list[tuple[int, list[int]]], ahead: int
    ) -> Iterator[Any]:
        """The results of ``tasks`` (``(position, indices)`` of epoch ``epoch``) in their order,
        at most ``ahead`` of them built or being built beyond the one being consumed.

        A worker's exception is raised here when its batch's turn comes, as itself (or a
        ``WorkerError`` when it cannot be sent), with a note naming the worker, the item and the
        worker's traceback; a worker that dies raises ``WorkerError``."""
        self.generation.value += 1
        generation = self.generation.value
        sent = min(len(tasks), ahead)
        for position, indices in tasks[:sent]:
            self.tasks.put((generation, position, epoch, seed, indices))
        arrived: dict[int, tuple[Any, Any]] = {}
        for position, _ in tasks:
            while position not in arrived:
                if self.generation.value != generation:
                    raise RuntimeError(
                        "this iteration of the DataLoader was abandoned when a newer one started "
                        "on the same persistent workers; read one iteration at a time"
                    )
                result = self._next_result()
                if result[0] == generation:  # older ones belong to an abandoned iteration
                    arrived[result[1]] = result[2:]
            payload, failure = arrived.pop(position)
            if sent < len(tasks):
                next_position, indices = tasks[sent]
                self.tasks.put((generation, next_position, epoch, seed, indices))
                sent += 1
            if failure is not None:
                raise rebuilt_exception(failure)
            yield payload

    def _next_result(self) -> tuple:
        while True:
            try:
                return self.results.get(timeout=POLL_SECONDS)
            except queue.Empty:
                for worker_id, process in enumerate(self.processes):
                    if not process.is_alive():
                        code = process.exitcode
                        how = (f"was killed by signal {signal.Signals(-code).name}"
                               if code is not None and code < 0 else f"exited with code {code}")
                        raise WorkerError(
                            f"DataLoader worker process {worker_id} (pid {process.pid}) {how} "
                            "unexpectedly (out of memory? a crash in native code?)"
                        ) from None


def widen_pipe(channel: Any) -> None:
    """Let the result queue's pipe hold a whole batch or more (Linux: up to pipe-max-size, 1 MiB
    unless raised). With the default 64 KiB, a worker's batch waits in the worker and crosses in
    64 KiB turns, each waking the worker and then the loader, which delays every batch by a few
    scheduler turns on a busy machine."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    writer = getattr(channel, "_writer", None)
    if set_size is None or writer is None:
        return
    for size in (1 << 20, 1 << 18):
        try:
            fcntl.fcntl(writer.fileno(), set_size, size)
            return
        except OSError:  # above this user's limit: try less
            continue


def shut_down(processes: list, tasks: Any, results: Any) -> None:
    """Ask each worker to leave, wait for it a while, terminate those still there."""
    started = [process for process in processes if process.pid is not None]
    for _ in started:
        try:
            tasks.put(None)
        except (OSError, ValueError):
            break
    for process in started:
        process.join(JOIN_SECONDS)
    for process in started:
        if process.is_alive():
            process.terminate()
            process.join(JOIN_SECONDS)
        if process.is_alive():
            process.kill()
            process.join()
    for channel in (tasks, results):
        channel.cancel_join_thread()  # nothing left in them is wanted
        channel.close()


def rebuilt_exception(failure: tuple) -> BaseException:
    """The exception a worker sent, with a note naming where it happened and its traceback."""
    data, kind, message, where, text = failure
    error = None
    if data is not None:
        try:
            error = pickle.loads(data)
        except Exception:
            error = None
    if not isinstance(error, BaseException):
        error = WorkerError(f"{kind}: {message}")
    error.add_note(f"{where}; the worker's traceback:\n{text.rstrip()}")
    return error


def worker_loop(
    worker_id: int,
    num_workers: int,
    seed: int,
    payload: Any,
    worker_init_fn: Callable[[int], None] | None,
    tasks: Any,
    results: Any,
    generation: Any,
    loader_pid: int,
) -> None:
    """The body of a worker process: set up, then build batches until told to leave or the
    loader's process (``loader_pid``) is gone."""
    # Ctrl-C reaches the whole process group; the loader's process decides what stops, and it
    # stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Never wait at exit to flush results that nobody will read.
    results.cancel_join_thread()
    where = f"in DataLoader worker process {worker_id} (pid {os.getpid()})"
    try:
        dataset, batcher = pickle.loads(payload) if isinstance(payload, bytes) else payload
        set_worker_info(WorkerInfo(worker_id, num_workers, seed, dataset))
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
    except BaseException as error:
        failure: tuple | None = describe(error, f"{where}, while starting")
        dataset = batcher = None
    else:
        failure = None
    while True:
        try:
            task = tasks.get(timeout=POLL_SECONDS)
        except queue.Empty:
            if not process_exists(loader_pid):  # killed: leave rather than linger forever
                return
            continue
        if task is None:
            return
        task_generation, position, epoch, batch_seed, indices = task
        if task_generation != generation.value:
            continue  # the iteration that wanted it was abandoned
        if failure is not None:
            results.put((task_generation, position, None, failure))
            continue
        index = None
        try:
            with seeded_generators(batch_seed, epoch, position):
                items = []
                for index in indices:
                    items.append(dataset.get(index))
                index = None
                out = items if batcher is None else batcher.collate(items)
            results.put((task_generation, position, out, None))
        except Exception as error:
            what = (f"reading item {index}" if index is not None else "collating the items")
            place = f"{where}, {what} of batch {position} of epoch {epoch}"
            results.put((task_generation, position, None, describe(error, place)))


def process_exists(pid: int) -> bool:
    """Whether process ``pid`` is there. (A fork server's worker cannot watch its parent, the
    server, which itself waits for its workers to leave before it does.)"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, but another user's: the pid was reused
        return False
    return True


def describe(error: BaseException, where: str) -> tuple:
    """What the loader's process needs to re-raise ``error``: the pickled exception when it
    survives a round trip, its type name and message, where it happened, its traceback."""
    text = "".join(traceback.format_exception(error))
    try:
        data = pickle.dumps(error)
        pickle.loads(data)
    except Exception:
        data = None
    return data, type(error).__qualname__, str(error), where, text

