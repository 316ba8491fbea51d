"""Autotune end to end on a real device (the rocm backend, PoCL in CI): the first process times
the matmul tile shapes and writes its choice; a second process with the same cache finds it,
times nothing and compiles only the chosen tiling; ``BURNISH_AUTOTUNE=0`` times nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from burnish.jit.kernels.matmul import TILINGS

# One tiled product (large enough for the tiled kernel), then what this process measured and
# which tilings it compiled.
PRODUCT = """
import json
import numpy as np
import burnish
from burnish import Tensor
from burnish.jit import autotune

backend = burnish.backend("rocm")
device = backend.default_device()
rng = np.random.default_rng(0)
a = rng.standard_normal((96, 80)).astype(np.float32)
b = rng.standard_normal((80, 112)).astype(np.float32)
out = (Tensor.from_numpy(a, device) @ Tensor.from_numpy(b, device)).to_numpy()
tilings = [key[1].name for key in backend.runtime(device)._kernels if key[0] == "matmul_tiled"]
print(json.dumps({
    "close": bool(np.allclose(out, a.astype(np.float64) @ b, atol=1e-4)),
    "measured": {key: sorted(times) for key, times in autotune.measurements.items()},
    "tilings": sorted(set(tilings)),
}))
"""


# The rocm backend only: ``jit_backend`` skips, naming what to install, without PyOpenCL or an
# OpenCL device.
ROCM = pytest.mark.parametrize("jit_backend", ["rocm"], indirect=True)


def _product(cache, **env) -> dict:
    environment = {k: v for k, v in os.environ.items() if k != "BURNISH_AUTOTUNE"}
    environment.update(BURNISH_CACHE_DIR=str(cache), **env)
    done = subprocess.run([sys.executable, "-c", PRODUCT], env=environment,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@ROCM
def test_a_second_process_uses_the_cached_tile_shape(jit_backend, tmp_path):
    names = sorted(t.name for t in TILINGS)
    first = _product(tmp_path)
    assert first["close"]
    (key, timed), = first["measured"].items()
    assert "matmul/float32/" in key
    assert timed == names and first["tilings"] == names
    files = list((tmp_path / "autotune").glob("*.json"))
    assert len(files) == 1
    table = json.loads(files[0].read_text())
    chosen = table[key.split("|", 1)[1]]
    assert chosen in names

    second = _product(tmp_path)
    assert second["close"]
    assert second["measured"] == {}
    assert second["tilings"] == [chosen]


@ROCM
def test_tuning_turned_off_times_nothing_and_takes_the_default(jit_backend, tmp_path):
    result = _product(tmp_path, BURNISH_AUTOTUNE="0")
    assert result["close"]
    assert result["measured"] == {}
    assert result["tilings"] == [TILINGS[0].name]
    assert not (tmp_path / "autotune").exists()
