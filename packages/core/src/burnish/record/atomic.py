"""Atomic file writes: a reader sees the old file or the new one, never a half-written one."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: staleness is told by age alone
    fcntl = None  # type: ignore[assignment]

#: The temporary files ``atomic_write`` makes: ``.<target's name>.<12 hex digits>.tmp``.
TEMPORARY_NAME = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")
#: A temporary file younger than this is never removed: its writer may have just created it and
#: not yet locked it.
GRACE_SECONDS = 60.0
#: Where no lock can tell whether a writer is alive, a temporary file is stale after this long.
STALE_SECONDS = 3600.0


def atomic_write(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that the file is replaced whole or not at all.

    The bytes go to a temporary file in the same directory (``os.replace`` is atomic only within
    one file system), are flushed and fsynced, then renamed over ``path``; the directory is synced
    so the rename survives a crash. On any error, interruption included, the temporary file is
    removed, the previous file is untouched, and the error propagates (OSError from the system).

    A process killed mid-write cannot remove its temporary file; the next write into the same
    directory does (``remove_stale_temporaries``). While writing, the temporary file is locked
    (``flock``) so that no other process takes it for a stale one.
    """
    target = Path(path)
    remove_stale_temporaries(target.parent)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    # os.open with mode 0o666 lets the umask decide permissions, as for any new file; mkstemp
    # would make the record readable by its owner only.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    descriptor = os.open(temporary, flags, 0o666)
    try:
        if fcntl is not None:
            # Released by the system when the process ends, however it ends.
            with contextlib.suppress(OSError):
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with open(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_directory(target.parent)
    return target


def remove_stale_temporaries(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files that interrupted ``atomic_write`` calls left in ``directory``
    and return their paths.

    Only regular files named as ``atomic_write`` names them (``TEMPORARY_NAME``) are candidates,
    never links or other files, and only once they are ``GRACE_SECONDS`` old. A candidate is
    stale when no process holds its lock (a writer holds it until it ends, killed or not); where
    locks are unavailable (Windows, a file system without them) when it is ``STALE_SECONDS``
    old. Failures (a directory that does not exist, a file removed meanwhile) are ignored: this
    is housekeeping, and never stops a write.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not TEMPORARY_NAME.fullmatch(entry.name):
            continue
        with contextlib.suppress(OSError):
            info = entry.stat(follow_symlinks=False)
            age = now - info.st_mtime
            if stat.S_ISREG(info.st_mode) and age >= GRACE_SECONDS and _unused(entry.path, age):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _unused(path: str, age: float) -> bool:
    """Whether no live writer holds the temporary file at ``path`` (see above)."""
    if fcntl is None:
        return age >= STALE_SECONDS
    descriptor = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return age >= STALE_SECONDS
    finally:
        os.close(descriptor)
    return True


def _sync_directory(directory: Path) -> None:
    # Windows cannot open directories; there the rename is as durable as the system makes it.
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
