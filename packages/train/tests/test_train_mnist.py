"""examples/mnist trains its CNN to at least 97% validation accuracy (when MNIST is at hand)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "mnist" / "mnist.py"


@pytest.mark.skipif(not os.environ.get("BURNISH_MNIST_DIR"),
                    reason="set BURNISH_MNIST_DIR to the MNIST folder")
def test_mnist_example_reaches_97_percent(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--run-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    accuracy = float(re.search(r"validation accuracy ([\d.]+)%", done.stdout).group(1))
    assert accuracy >= 97.0, done.stdout
    assert (tmp_path / "model.safetensors").is_file()
    assert re.search(r"(\d+)/10 right", done.stdout)
