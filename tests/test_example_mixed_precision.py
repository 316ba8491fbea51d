"""examples/mixed-precision trains the MNIST CNN under autocast: bfloat16, and float16 with a
loss scaler, on a few hundred digits of the shipped test set."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[1] / "examples" / "mixed-precision"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_trains(run, dtype):
    out = run(sys.executable, FOLDER / "mixed-precision.py", "--dtype", dtype, "--limit", "640",
              "--epochs", "1", cwd=FOLDER, timeout=600).stdout
    assert f"products in {dtype}" in out
    assert f"logits {dtype}, loss float32, parameters float32" in out
    found = re.search(r"epoch 1/1: train loss ([\d.]+), validation accuracy ([\d.]+)%", out)
    assert found, out
    loss, accuracy = float(found.group(1)), float(found.group(2))
    assert math.isfinite(loss) and loss < 2.3, out  # below chance (ln 10 = 2.303) on average
    assert 0.0 <= accuracy <= 100.0
    if dtype == "float16":
        scaling = re.search(r"loss scale (\d+), (\d+) steps skipped", out)
        assert scaling and int(scaling.group(1)) >= 1, out
    else:
        assert "loss scale" not in out
