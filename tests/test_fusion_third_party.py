"""Fusion wraps any backend: a third-party backend with no fuser passes the whole conformance
suite as ``fusion+toy``, its ops running one by one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parent / "fixtures" / "thirdparty-backend"


def test_fusion_around_a_third_party_backend(run, wheel, make_venv, tmp_path):
    python = make_venv(wheel("core"), wheel("conformance"), wheel("fusion"), wheel(FIXTURE))
    result = run(python, "-m", "pytest", "--pyargs", "burnish.conformance", "--backend",
                 "fusion+toy", "-q", "-p", "no:cacheprovider", cwd=tmp_path)
    summary = result.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) > 0, result.stdout[-3000:]
    assert "failed" not in summary and "error" not in summary, result.stdout[-3000:]
