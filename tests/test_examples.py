"""Every example in examples/ runs to the end (a smoke test: it checks the exit status only)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: Each example is a folder with a README.md and a script named after the folder.
FOLDERS = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())
#: Examples with a test file of their own (``tests/test_example_<name>.py``, dashes as
#: underscores), which runs them on small data and checks what they print and write; the smoke
#: test below runs the others with their defaults.
OWN_TESTS = {p.name for p in FOLDERS
             if (Path(__file__).parent / f"test_example_{p.name.replace('-', '_')}.py").is_file()}
#: Arguments of examples that need more than the script's defaults. The MNIST example runs
#: offline here (tests never download), on the test set shipped in burnish-train; a short run is
#: enough, since test_readme_offline.py and packages/train/tests/test_train_mnist.py train it in
#: full and check its accuracy.
MNIST = ["--limit", "2000", "--epochs", "1"]
#: Examples that need backends with drivers (skipped without them, unless CI requires them).
BACKENDS = {"custom-wgsl-kernel": ("wgpu", "rocm"), "cuda-data-parallel": ("cuda",),
            "router": ("wgpu",)}


def test_there_are_examples():
    assert FOLDERS, f"no examples found in {EXAMPLES}"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_every_example_has_a_readme_and_a_script(folder):
    assert (folder / "README.md").is_file(), f"{folder.name} has no README.md"
    assert (folder / f"{folder.name}.py").is_file(), f"{folder.name} has no {folder.name}.py"


@pytest.mark.parametrize("folder", [p for p in FOLDERS if p.name not in OWN_TESTS],
                         ids=lambda p: p.name)
def test_example_runs(folder, run, tmp_path, needs_backends, monkeypatch):
    assert (folder / "README.md").is_file(), f"{folder.name} has no README.md"
    needs_backends(*BACKENDS.get(folder.name, ()))
    script = folder / f"{folder.name}.py"
    assert script.is_file(), f"{folder.name} has no {script.name}"
    args = []
    if folder.name == "mnist":
        monkeypatch.setenv("BURNISH_OFFLINE", "1")
        monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
        monkeypatch.delenv("BURNISH_MNIST_DIR", raising=False)
        args = [*MNIST, "--run-dir", tmp_path]
    elif folder.name == "distributed":  # its run folder (checkpoints, logs) is the test's
        args = ["--run-dir", tmp_path]
    out = run(sys.executable, script, *args, cwd=folder, timeout=600).stdout
    assert out.strip(), f"{script.name} printed nothing"
    if folder.name == "mnist":
        assert "training on the first 8,000 digits of the test set shipped" in out, out
