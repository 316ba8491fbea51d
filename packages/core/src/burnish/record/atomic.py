"""Atomic file writes: a reader sees the old file or the new one, never a half-written one."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that the file is replaced whole or not at all.

    The bytes go to a temporary file in the same directory (``os.replace`` is atomic only within
    one file system), are flushed and fsynced, then renamed over ``path``; the directory is synced
    so the rename survives a crash. On any error, interruption included, the temporary file is
    removed, the previous file is untouched, and the error propagates (OSError from the system).
    """
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    # os.open with mode 0o666 lets the umask decide permissions, as for any new file; mkstemp
    # would make the record readable by its owner only.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    descriptor = os.open(temporary, flags, 0o666)
    try:
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


def _sync_directory(directory: Path) -> None:
    # Windows cannot open directories; there the rename is as durable as the system makes it.
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
