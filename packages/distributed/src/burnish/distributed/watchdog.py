"""``Watchdog``: the ranks of a job watching each other, for a collective library that cannot.
NCCL's collectives wait on the GPU, forever, for a rank that died or hangs; the watchdog ends
every rank's process within a bounded time instead, naming the rank at fault.

Each rank keeps one TCP connection to rank 0 (a star; rank 0 listens on a port it publishes
with NCCL's unique id) and a thread that watches it:

- a rank that dies, or exits without closing its communicator, closes its connection (the
  operating system does so for a killed process): rank 0 sees it at once and tells the others;
  rank 0's own death closes every connection;
- a collective of this rank that has not completed ``timeout`` seconds after it was issued
  (``progress``) is reported to rank 0, which asks every rank how many collectives it has
  issued and names those that have not reached that one (hung, or calling other collectives)
  and those that do not answer.

Either way each rank prints what happened, naming the ranks, and its process exits with status
``EXIT_CODE``: the collective cannot finish, its results would be wrong, and the GPU work
queued behind it cannot be cancelled from Python (PyTorch's NCCL watchdog ends the process
too). Resume from the last checkpoint.
"""

from __future__ import annotations

import os
import select
import selectors
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence

from burnish.distributed.communicator import DistributedError

#: One message: a kind byte and a signed 64-bit value.
_FRAME = struct.Struct("!cq")
#: What a rank sends first on its connection (then a ``H`` frame with its rank).
_HELLO = b"burnish-watchdog"
#: Seconds between two looks at this rank's collectives.
POLL_S = 0.5
#: Seconds rank 0 waits for the ranks' counts after a collective timed out somewhere.
PROBE_S = 3.0
#: The exit status of a process the watchdog ends.
EXIT_CODE = 1

#: ``progress()``: the number of collectives this rank has issued, and its oldest one that has
#: not completed as (its number, counting from 1; a name; ``time.monotonic()`` when issued),
#: or None.
Progress = Callable[[], tuple[int, "tuple[int, str, float] | None"]]
#: ``on_failure(ranks, message)``: what a rank does once the job has failed.
OnFailure = Callable[[Sequence[int], str], None]


def stop_process(ranks: Sequence[int], message: str) -> None:
    """The default ``on_failure``: print ``message`` to stderr and end the process."""
    print(f"burnish.distributed: {message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(EXIT_CODE)


def listen() -> socket.socket:
    """Rank 0's listening socket, on a free port of every interface (its port goes to the
    other ranks with NCCL's unique id)."""
    return socket.create_server(("", 0))


class Watchdog:
    """One rank's side of the watch; made by ``join`` on every rank once the communicator
    exists, ended by ``close`` (a clean end: the others stop watching this rank) when the
    communicator closes. ``timeout``: seconds a collective may take before the ranks behind
    are named; ``progress``: what this rank's communicator has issued (None: deaths only)."""

    def __init__(self, rank: int, world_size: int, links: dict[int, socket.socket],
                 progress: Progress | None, timeout: float, on_failure: OnFailure = stop_process):
        self.rank = rank
        self.world_size = world_size
        self.timeout = timeout
        self._links = links
        self._progress = progress
        self._on_failure = on_failure
        self._send_lock = threading.Lock()
        self._closed = threading.Event()
        self._failed = False
        self._quit: set[int] = set()          # ranks that closed cleanly
        self._buffers = {peer: b"" for peer in links}
        self._reported: int | None = None     # the collective this rank reported as stuck
        self._asked_at = 0.0
        self._probe: dict | None = None       # rank 0: the counts being gathered
        self._behind: list[int] = []          # rank != 0: the verdict being received
        self._silent: list[int] = []
        self._selector = selectors.DefaultSelector()
        for peer, link in links.items():
            link.setblocking(False)
            self._selector.register(link, selectors.EVENT_READ, peer)
        self._thread = threading.Thread(target=self._run, name=f"burnish-watchdog-{rank}",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def join(cls, rank: int, world_size: int, address: tuple[str, int],
             listener: socket.socket | None = None, progress: Progress | None = None,
             timeout: float = 300.0, connect_timeout: float = 300.0,
             on_failure: OnFailure = stop_process) -> Watchdog:
        """Connect the job's ranks: rank 0 accepts the others on ``listener`` (from
        ``listen()``, closed here), each other rank connects to rank 0 at ``address``. Raises
        DistributedError naming the ranks that did not connect within ``connect_timeout``."""
        deadline = time.monotonic() + connect_timeout
        if rank == 0:
            if listener is None:
                raise ValueError("Watchdog.join: rank 0 needs its listener (from listen())")
            with listener:
                links = _accept(listener, world_size, deadline)
        else:
            links = {0: _connect(address, rank, deadline)}
        return cls(rank, world_size, links, progress, timeout, on_failure)

    def close(self) -> None:
        """A clean end: the other ranks are told, then the connections close."""
        if self._closed.is_set():
            return
        self._send_all(b"Q", self.rank)
        self._closed.set()
        self._thread.join(2 * POLL_S + 1.0)
        for link in self._links.values():
            link.close()

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closed.is_set() and not self._failed:
            for key, _ in self._selector.select(POLL_S):
                if self._closed.is_set():
                    return
                self._read(key.data, key.fileobj)  # type: ignore[arg-type]
            if not self._closed.is_set():
                self._check_collectives()
                self._check_probe()

    def _read(self, peer: int, link: socket.socket) -> None:
        try:
            data = link.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._selector.unregister(link)
            self._lost(peer)
            return
        buffer = self._buffers[peer] + data
        while len(buffer) >= _FRAME.size:
            kind, value = _FRAME.unpack_from(buffer)
            buffer = buffer[_FRAME.size:]
            self._message(peer, kind, value)
        self._buffers[peer] = buffer

    def _lost(self, peer: int) -> None:
        if peer in self._quit:
            return
        if self.rank == 0:
            self._send_all(b"D", peer)
        self._fail([peer], f"rank {peer} of {self.world_size} left the job without closing its "
                           f"communicator (its process died or failed); rank {self.rank} stops "
                           f"too, since no collective can complete without it")

    def _message(self, peer: int, kind: bytes, value: int) -> None:
        if kind == b"Q":
            self._quit.add(peer)
        elif kind == b"D":  # from rank 0: rank `value` is gone
            self._fail([value], f"rank {value} of {self.world_size} left the job without "
                                f"closing its communicator (its process died or failed); rank "
                                f"{self.rank} stops too, since no collective can complete "
                                f"without it")
        elif kind == b"T":  # to rank 0: `peer`'s collective `value` timed out
            self._start_probe(value)
        elif kind == b"P":  # from rank 0: how many collectives has this rank issued?
            self._send(0, b"N", self._issued())
        elif kind == b"N" and self._probe is not None:
            self._probe["counts"][peer] = value
        elif kind == b"B":
            self._behind.append(value)
        elif kind == b"S":
            self._silent.append(value)
        elif kind == b"E":
            self._fail(self._behind + self._silent,
                       self._verdict_message(value, self._behind, self._silent))

    # -- collectives that do not complete ---------------------------------------------------

    def _issued(self) -> int:
        return self._progress()[0] if self._progress is not None else 0

    def _check_collectives(self) -> None:
        now = time.monotonic()
        if self._reported is not None and self.rank != 0 \
                and now - self._asked_at > PROBE_S + 4 * POLL_S + 2.0:
            self._fail([0], f"collective #{self._reported} on rank {self.rank} of "
                            f"{self.world_size} did not complete within {self.timeout:g} s, and "
                            f"rank 0 did not answer when asked which ranks are behind (it is "
                            f"hung)")
            return
        if self._progress is None or self._reported is not None:
            return
        try:
            _, oldest = self._progress()
        except Exception:  # the library failed under us; the main thread will say how
            return
        if oldest is None or now - oldest[2] <= self.timeout:
            return
        self._reported, self._asked_at = oldest[0], now
        if self.rank == 0:
            self._start_probe(oldest[0])
        else:
            self._send(0, b"T", oldest[0])

    def _start_probe(self, number: int) -> None:
        if self._probe is not None:
            return
        self._probe = {"number": number, "counts": {0: self._issued()},
                       "deadline": time.monotonic() + PROBE_S}
        for peer in self._links:
            self._send(peer, b"P", 0)

    def _check_probe(self) -> None:
        probe = self._probe
        if probe is None:
            return
        counts = probe["counts"]
        if len(counts) < self.world_size and time.monotonic() < probe["deadline"]:
            return
        number = probe["number"]
        silent = [r for r in range(self.world_size) if r not in counts]
        behind = [r for r, count in sorted(counts.items()) if count < number]
        for peer in self._links:
            for rank in behind:
                self._send(peer, b"B", rank)
            for rank in silent:
                self._send(peer, b"S", rank)
            self._send(peer, b"E", number)
        self._fail(behind + silent, self._verdict_message(number, behind, silent))

    def _verdict_message(self, number: int, behind: list[int], silent: list[int]) -> str:
        parts = []
        if behind:
            parts.append(f"rank {', '.join(map(str, behind))} had not called it (hung, or "
                         f"calling other collectives)")
        if silent:
            parts.append(f"rank {', '.join(map(str, silent))} did not answer")
        who = "; ".join(parts) if parts else (
            "every rank had called it: they called different collectives, or with different "
            "shapes or dtypes")
        return (f"collective #{number} did not complete within {self.timeout:g} s on some "
                f"rank: {who}; rank {self.rank} of {self.world_size} stops")

    # -- sending and failing ----------------------------------------------------------------

    def _send(self, peer: int, kind: bytes, value: int) -> None:
        link = self._links.get(peer)
        if link is None:
            return
        frame = _FRAME.pack(kind, value)
        deadline = time.monotonic() + 5.0
        with self._send_lock:
            while frame and time.monotonic() < deadline:
                try:
                    frame = frame[link.send(frame):]
                except BlockingIOError:
                    select.select([], [link], [], 0.1)
                except OSError:
                    return  # that peer is gone: its connection's end says so

    def _send_all(self, kind: bytes, value: int) -> None:
        for peer in self._links:
            if peer != value:
                self._send(peer, kind, value)

    def _fail(self, ranks: Sequence[int], message: str) -> None:
        if self._failed or self._closed.is_set():
            return
        self._failed = True
        self._on_failure(list(ranks), message)


def _accept(listener: socket.socket, world_size: int, deadline: float) -> dict[int, socket.socket]:
    links: dict[int, socket.socket] = {}
    while len(links) < world_size - 1:
        listener.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            missing = [r for r in range(1, world_size) if r not in links]
            for link in links.values():
                link.close()
            raise DistributedError(f"watchdog: rank 0 heard from {len(links)} of the "
                                   f"{world_size - 1} other ranks before the timeout; missing: "
                                   f"rank {', '.join(map(str, missing))}", missing) from None
        conn.settimeout(10.0)
        try:
            hello = read_exactly(conn, len(_HELLO) + _FRAME.size)
        except OSError:
            conn.close()
            continue
        kind, rank = _FRAME.unpack_from(hello, len(_HELLO))
        if hello[:len(_HELLO)] != _HELLO or kind != b"H" or not 0 < rank < world_size \
                or rank in links:
            conn.close()  # not one of ours, or a rank twice: wait for the next
            continue
        links[rank] = conn
    return links


def _connect(address: tuple[str, int], rank: int, deadline: float) -> socket.socket:
    error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            conn = socket.create_connection(address, timeout=10.0)
        except OSError as caught:
            error = caught
            time.sleep(0.2)
            continue
        conn.sendall(_HELLO + _FRAME.pack(b"H", rank))
        return conn
    raise DistributedError(f"watchdog: rank {rank} could not reach rank 0 at "
                           f"{address[0]}:{address[1]} in time ({error})", [0])


def read_exactly(conn: socket.socket, size: int) -> bytes:
    """``size`` bytes from ``conn``; ConnectionError when the peer closes first."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"the peer closed after {len(data)} of {size} bytes")
        data += chunk
    return data
