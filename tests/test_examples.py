"""Every example in examples/ runs to the end (a smoke test: it checks the exit status only)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: Each example is a folder with a README.md and a script named after the folder.
FOLDERS = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())
#: Arguments of examples that need more than the script's defaults. Without a folder, the MNIST
#: example downloads MNIST, which tests never do; a short run is enough here, since
#: packages/train/tests/test_train_mnist.py trains it in full and checks its accuracy.
MNIST = ["--limit", "2000", "--epochs", "1"]
#: Examples that need backends with drivers (skipped without them, unless CI requires them).
BACKENDS = {"custom-wgsl-kernel": ("wgpu", "rocm"), "cuda-data-parallel": ("cuda",)}


def test_there_are_examples():
    assert FOLDERS, f"no examples found in {EXAMPLES}"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_example_runs(folder, run, tmp_path, needs_backends):
    assert (folder / "README.md").is_file(), f"{folder.name} has no README.md"
    needs_backends(*BACKENDS.get(folder.name, ()))
    script = folder / f"{folder.name}.py"
    assert script.is_file(), f"{folder.name} has no {script.name}"
    args = []
    if folder.name == "mnist":
        if not os.environ.get("BURNISH_MNIST_DIR"):
            pytest.skip("set BURNISH_MNIST_DIR to the MNIST folder (the example would download it)")
        args = [*MNIST, "--run-dir", tmp_path]
    out = run(sys.executable, script, *args, cwd=folder, timeout=600).stdout
    assert out.strip(), f"{script.name} printed nothing"
