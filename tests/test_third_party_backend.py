"""A backend published outside this repository is found through its entry point and passes the
conformance suite with nothing but the protocol's required ops."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).parent / "fixtures" / "thirdparty-backend"

ONLY_REQUIRED = """
from burnish.backend import Backend, required_ops
from burnish_toy import ToyBackend

protocol = {n for n in dir(Backend) if not n.startswith("_") and callable(getattr(Backend, n))}
own = {
    name
    for cls in ToyBackend.__mro__ if cls.__module__.startswith("burnish_toy")
    for name in vars(cls) if name in protocol
}
print(sorted(own - set(required_ops())), sorted(set(required_ops()) - own))
"""


@pytest.fixture(scope="module")
def python(wheel, make_venv):
    # No ndarray backend here: the toy must stand on core alone.
    return make_venv(wheel("core"), wheel("conformance"), wheel(FIXTURE))


def test_info_finds_the_toy_backend(python, burnish_info):
    text, backends = burnish_info(python)
    assert backends == ["toy"], text
    assert "burnish-toy-backend" in text


def test_toy_implements_only_the_required_ops(run, python, tmp_path):
    out = run(python, "-c", ONLY_REQUIRED, cwd=tmp_path).stdout
    assert out.strip() == "[] []", f"(beyond required, required but missing): {out}"


def test_toy_passes_the_conformance_suite(run, python, tmp_path):
    result = run(python, "-m", "pytest", "--pyargs", "burnish.conformance", "--backend", "toy",
                 "-q", "-p", "no:cacheprovider", cwd=tmp_path)
    summary = result.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) > 0, result.stdout[-3000:]
    assert "failed" not in summary and "error" not in summary, result.stdout[-3000:]
