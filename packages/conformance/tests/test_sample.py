"""``--sample N``: one case in N of each test, at least one of each, the same ones every run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest


def collect(tmp_path, *options: str) -> list[str]:
    env = {**os.environ, "COLUMNS": "1000"}
    env.pop("PYTEST_ADDOPTS", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "burnish.conformance.test_math",
         "--backend", "ndarray", "--collect-only", "-q", "-p", "no:cacheprovider", *options],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == (pytest.ExitCode.USAGE_ERROR if "0" in options else 0), \
        result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if "::" in line] or [result.stderr]


def function(case: str) -> str:
    return re.sub(r"\[.*\]$", "", case)


def test_a_sample_keeps_every_test_and_a_share_of_its_cases(tmp_path):
    every = collect(tmp_path)
    sampled = collect(tmp_path, "--sample", "3")
    assert set(sampled) < set(every)
    assert {function(case) for case in sampled} == {function(case) for case in every}
    assert len(every) / 4 < len(sampled) < len(every) / 2
    assert collect(tmp_path, "--sample", "3") == sampled


def test_a_sample_of_zero_is_a_usage_error(tmp_path):
    (error,) = collect(tmp_path, "--sample", "0")
    assert "--sample takes a count of 1 or more, not 0" in error
