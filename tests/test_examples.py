"""Every example in examples/ runs to the end (a smoke test: it checks the exit status only)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: Each example is a folder with a README.md and a script named after the folder.
FOLDERS = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())


def test_there_are_examples():
    assert FOLDERS, f"no examples found in {EXAMPLES}"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_example_runs(folder, run):
    assert (folder / "README.md").is_file(), f"{folder.name} has no README.md"
    script = folder / f"{folder.name}.py"
    assert script.is_file(), f"{folder.name} has no {script.name}"
    out = run(sys.executable, script, cwd=folder, timeout=600).stdout
    assert out.strip(), f"{script.name} printed nothing"
