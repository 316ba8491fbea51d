"""Opening a checkpoint directory removes what writes killed midway left behind."""

from __future__ import annotations

import os
import time

import pytest

from burnish.record.atomic import GRACE_SECONDS
from burnish.train.checkpoint import Checkpointer

pytest.importorskip("fcntl", reason="file locks (fcntl) are POSIX-only")


def test_opening_a_directory_removes_stale_temporary_files(tmp_path):
    folder = tmp_path / "epoch-3-iteration-0"
    folder.mkdir()
    left = [folder / ".model.safetensors.0123456789ab.tmp",
            tmp_path / ".manifest.json.ba9876543210.tmp"]
    kept = folder / "model.safetensors"
    then = time.time() - GRACE_SECONDS - 60
    for path in [*left, kept]:
        path.write_bytes(b"half")
        os.utime(path, (then, then))
    checkpointer = Checkpointer(tmp_path)
    assert sorted(checkpointer.removed_temporaries) == sorted(left)
    assert not any(path.exists() for path in left) and kept.exists()
