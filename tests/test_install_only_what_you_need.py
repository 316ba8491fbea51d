"""Core and the ndarray backend, installed from their wheels alone, make a working burnish."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

SEED = """
import math
import burnish as bn
import burnish.functional as F
from burnish import Tensor

device = bn.backend("ndarray").default_device()
a = Tensor.from_data([[2.0, 3.0], [4.0, 5.0]], device=device)
b = Tensor.ones_like(a)
print(a + b)

def gelu_custom(x: Tensor) -> Tensor:
    x = x * ((x / math.sqrt(2)).erf() + 1)
    return x / 2

print("sum", (a + b).tolist())
print("gelu", gelu_custom(a).all_close(F.gelu(a)))
"""

MISSING = """
import burnish
try:
    burnish.backend("wgpu")
except burnish.BackendNotInstalledError as error:
    print(error)
"""


@pytest.fixture(scope="module")
def python(wheel, make_venv):
    return make_venv(wheel("core"), wheel("backend-ndarray"))


def test_only_core_and_ndarray_are_installed(run, python):
    listed = json.loads(run(python, "-m", "pip", "list", "--format=json").stdout)
    ours = sorted(p["name"] for p in listed if p["name"].lower().startswith("burnish"))
    assert ours == ["burnish-backend-ndarray", "burnish-core"]


def test_info_lists_ndarray_as_the_only_backend(python, burnish_info):
    text, backends = burnish_info(python)
    assert backends == ["ndarray"], text


def test_seed_example_runs(run, python, tmp_path):
    out = run(python, "-c", SEED, cwd=tmp_path).stdout
    assert "sum [[3.0, 4.0], [5.0, 6.0]]" in out
    assert "gelu True" in out
    assert 'backend:  "ndarray"' in out  # the tensor's printout names its backend


def test_missing_backend_names_its_package(run, python, tmp_path):
    out = run(python, "-c", MISSING, cwd=tmp_path).stdout
    assert "'wgpu' is not installed" in out
    assert "pip install burnish-backend-wgpu" in out
