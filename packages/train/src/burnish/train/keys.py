"""Keys typed while the dashboard runs: read from the terminal in a thread, without echo."""

from __future__ import annotations

import os
import select
import sys
import threading
from collections.abc import Callable

#: What each key sequence means: ↑/k/shift-tab select the previous metric, ↓/j/tab the next.
KEYS = {"\x1b[A": -1, "k": -1, "\x1b[Z": -1, "\x1b[B": 1, "j": 1, "\t": 1}


class KeyReader:
    """Calls ``on_move(-1 | 1)`` for each navigation key typed on standard input while running.

    The terminal goes to cbreak mode (keys arrive at once, unechoed; Ctrl-C still interrupts)
    and is restored by ``stop()``. Nothing happens when standard input is not a terminal.
    """

    def __init__(self, on_move: Callable[[int], None]):
        self.on_move = on_move
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved: list | None = None
        self._fd = -1

    def start(self) -> None:
        try:
            import termios
            import tty

            self._fd = sys.stdin.fileno()
            if not os.isatty(self._fd):
                return
            self._saved = termios.tcgetattr(self._fd)
            tty.setcbreak(self._fd)
        except (ImportError, OSError, ValueError, AttributeError):
            # No terminal to read (a pipe, a closed stdin, Windows): the dashboard still draws.
            self._saved = None
            return
        self._thread = threading.Thread(target=self._run, name="burnish-keys", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        if self._saved is not None:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd], [], [], 0.1)
            if not ready:
                continue
            try:
                typed = os.read(self._fd, 8).decode(errors="ignore")
            except OSError:
                return
            # One read may hold several keys (typed fast, or arrows' escape sequences).
            at = 0
            while at < len(typed):
                for sequence, move in KEYS.items():
                    if typed.startswith(sequence, at):
                        self.on_move(move)
                        at += len(sequence)
                        break
                else:
                    at += 1
