"""The conformance suite fails a backend whose values are right but whose result dtype is wrong,
and one whose donating ops write memory another tensor still reads: each is run on the suite's
cases that concern it, and those fail while the cases the breakage does not touch pass."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def conformance(backend: str, tests: str, tmp_path: Path, *args: str) -> dict:
    """Run the suite's ``tests`` on a backend of ``fixtures/broken_backends.py``: ``failed``
    maps the id of each failed case to its reason, ``passed`` counts the others."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(FIXTURES), os.environ.get("PYTHONPATH")]))}
    env.pop("PYTEST_ADDOPTS", None)
    env["COLUMNS"] = "1000"  # the summary's reasons are cut at the terminal's width
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", tests, "--backend", backend,
         "-p", "broken_backends", "-p", "no:cacheprovider", "-q", "-rfE", "-o",
         "console_output_style=classic", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.returncode not in (0, 1) or "passed" not in summary:
        raise AssertionError(f"the suite did not run ({result.returncode}):\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    failed = dict(re.findall(r"^FAILED \S*::(\S+) - (.*)$", result.stdout, re.MULTILINE))
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    return {"failed": failed, "passed": passed}


def test_an_int_sum_in_int64_fails(tmp_path):
    outcome = conformance("int64-sum", "burnish.conformance.test_reduction::test_sum", tmp_path)
    failed = outcome["failed"]
    # Every int dtype but int64 itself, whatever the dim; floats are untouched and pass.
    assert failed, "the suite passed a backend whose int sums are int64"
    dtypes = {case.split("[")[1].split("-")[0] for case in failed}
    assert dtypes == {"int32", "int16", "int8", "uint8"}, failed
    assert all("read back values of int64" in reason for reason in failed.values()), failed
    assert outcome["passed"] > 0


def test_assign_ops_that_write_an_alias_fail(tmp_path):
    outcome = conformance("inplace-assign", "burnish.conformance.test_assign", tmp_path,
                          "-k", "float32")
    failed = outcome["failed"]
    assert failed, "the suite passed a backend whose donating ops write shared memory"
    kinds = {case.split("[")[0] for case in failed}
    assert kinds == {"test_assign_keeps_an_alias", "test_assign_to_an_alias_keeps_the_original"}, (
        failed)
    # Every op, whichever tensor shares the memory (a broadcast view cannot even be written).
    ops = {re.match(r".*\[(\w+?)_float32", case).group(1) for case in failed}
    assert ops == {"add", "sub", "mul", "div"}, failed
    aliases = {case.rstrip("]").rsplit("-", 1)[1] for case in failed}
    assert aliases == {"reshape", "slice", "transpose", "expand", "primitive"}, failed
    # Unshared tensors may be written in place: those cases pass.
    assert outcome["passed"] > 0
