"""Temporary files left by writes killed midway are removed by the next write, never a live
writer's and never a file of another naming."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from burnish.record import load, save
from burnish.record.atomic import GRACE_SECONDS, remove_stale_temporaries
from burnish.tensor_data import TensorData

fcntl = pytest.importorskip("fcntl", reason="file locks (fcntl) are POSIX-only")


def aged(path: Path, seconds: float = GRACE_SECONDS + 60) -> Path:
    path.write_bytes(b"half a record")
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_a_killed_write_leaves_a_temporary_file_the_next_write_removes(tmp_path: Path) -> None:
    # A writer killed (SIGKILL) after writing its temporary file and before renaming it.
    script = (
        "import os, signal, sys\n"
        "from burnish.record import atomic\n"
        "atomic.os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        "atomic.atomic_write(sys.argv[1], b'new bytes')\n"
    )
    target = tmp_path / "model.safetensors"
    killed = subprocess.run([sys.executable, "-c", script, str(target)], check=False)
    assert killed.returncode == -9
    (left,) = tmp_path.glob(".model.safetensors.*.tmp")
    aged(left)
    save({"w": TensorData([1.0])}, target)
    assert not left.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]
    load(target).tensors["w"].assert_eq(TensorData([1.0]))


def test_live_young_and_foreign_files_are_kept(tmp_path: Path) -> None:
    stale = aged(tmp_path / ".m.bin.0123456789ab.tmp")
    young = aged(tmp_path / ".m.bin.00000000000a.tmp", seconds=1)
    live = aged(tmp_path / ".m.bin.00000000000b.tmp")
    foreign = [aged(tmp_path / name) for name in
               (".m.bin.tmp", "m.bin.0123456789ab.tmp", ".m.bin.0123456789AB.tmp", "notes.tmp")]
    os.symlink(tmp_path / "m.bin", tmp_path / ".link.0123456789ac.tmp")
    holder = os.open(live, os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # as a writer still at work holds it
        assert remove_stale_temporaries(tmp_path) == [stale]
    finally:
        os.close(holder)
    assert young.exists() and live.exists() and all(path.exists() for path in foreign)
    assert (tmp_path / ".link.0123456789ac.tmp").is_symlink()
    assert remove_stale_temporaries(tmp_path) == [live]
