"""Installed from their wheels: core and the ndarray backend alone make a working burnish, and
every distribution together (the meta-distribution with its ``[all]`` extra) installs, imports
and carries its type marker; installed from their sdists, every distribution together too."""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))

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


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def build_env(run, tmp_path_factory) -> Path:
    """The python of a venv holding every package's build backend and ``build``: packages are
    built there without build isolation (one build environment instead of one per package,
    most of the time a build takes)."""
    where = tmp_path_factory.mktemp("build-env")
    run(sys.executable, "-m", "venv", where)
    python = where / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    requires = sorted({r for f in FOLDERS for r in project(f)["build-system"]["requires"]})
    run(python, "-m", "pip", "install", "build", *requires)
    return python


@pytest.fixture(scope="module")
def wheels(run, build_env, tmp_path_factory) -> dict[str, Path]:
    """A wheel of every distribution under packages/, by name."""
    out = tmp_path_factory.mktemp("all-wheels")
    run(build_env, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir",
        out, *FOLDERS)
    built = {p.name.split("-")[0].replace("_", "-"): p for p in out.glob("*.whl")}
    assert sorted(built) == sorted(project(f)["project"]["name"] for f in FOLDERS)
    return built


@pytest.fixture(scope="module")
def sdists(run, build_env, tmp_path_factory) -> dict[str, Path]:
    """An sdist of every distribution under packages/, by name (what ``nox -s build`` puts
    beside the wheels)."""
    out = tmp_path_factory.mktemp("all-sdists")
    for folder in FOLDERS:
        run(build_env, "-m", "build", "--sdist", "--no-isolation", "--outdir", out, folder)
    built = {p.name[:-len(".tar.gz")].rsplit("-", 1)[0].replace("_", "-"): p
             for p in out.glob("*.tar.gz")}
    assert sorted(built) == sorted(project(f)["project"]["name"] for f in FOLDERS)
    return built


@pytest.fixture(scope="module")
def python(wheels, make_venv):
    return make_venv(wheels["burnish-core"], wheels["burnish-backend-ndarray"])


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


# -- every distribution -------------------------------------------------------------------------


def requirements(wheel: Path) -> dict[str, set[str]]:
    """The names a wheel requires, by extra ("" for those it always requires)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    found: dict[str, set[str]] = {"": set()}
    for requirement in metadata.get_all("Requires-Dist") or []:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        extra = re.search(r"extra == ['\"]([^'\"]+)['\"]", requirement)
        found.setdefault(extra.group(1) if extra else "", set()).add(name)
    return found


def test_every_wheel_marks_its_packages_typed(wheels):
    for name, path in wheels.items():
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
        packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")
                    and n.count("/") <= 2}
        if name == "burnish-core":
            packages = {"burnish"}  # its subpackages are covered by burnish/py.typed
        elif name != "burnish":
            packages = {p for p in packages if p.count("/") == 1}
            assert packages, f"{name} ships no package"
        for package in packages:
            assert f"{package}/py.typed" in names, f"{path.name} has no {package}/py.typed"


def test_the_extras_add_every_distribution(wheels):
    found = requirements(wheels["burnish"])
    every = found.pop("all")  # burnish[every other extra], which the wheel spells out
    named = set().union(*(names for extra, names in found.items() if extra))
    assert every in ({"burnish"}, named), every
    assert named <= set(wheels), named - set(wheels)
    # What the extras name, and what those require in turn, is every distribution.
    reached, todo = {"burnish"}, list(named)
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += [n for n in requirements(wheels[name])[""] if n.startswith("burnish")]
    assert reached == set(wheels)


@pytest.fixture(scope="module")
def everything(wheels, make_venv):
    """A venv with ``burnish[all]``, every burnish distribution from its wheel (the others from
    the package index)."""
    others = [path for name, path in sorted(wheels.items()) if name != "burnish"]
    return make_venv(f"{wheels['burnish']}[all]", *others)


def test_all_installs_every_distribution_at_one_version(run, everything, wheels):
    listed = json.loads(run(everything, "-m", "pip", "list", "--format=json").stdout)
    ours = {p["name"].lower(): p["version"] for p in listed
            if p["name"].lower().startswith("burnish")}
    assert sorted(ours) == sorted(wheels)
    assert len(set(ours.values())) == 1, ours
    run(everything, "-m", "pip", "check")


def test_every_package_imports(run, everything, tmp_path):
    names = sorted(p.name for f in FOLDERS if f.name != "core" and (f / "src").is_dir()
                   for p in (f / "src" / "burnish").iterdir() if (p / "__init__.py").exists())
    code = "import importlib\n" + "".join(f"importlib.import_module('burnish.{n}')\n"
                                           for n in names)
    run(everything, "-c", code, cwd=tmp_path)
    assert {"autodiff", "ndarray", "nn", "optim", "train", "data", "onnx"} <= set(names)


def test_info_lists_the_backends_and_decorators(everything, burnish_info):
    text, backends = burnish_info(everything)
    assert {"ndarray", "wgpu", "rocm", "cuda", "cpu"} <= set(backends), text
    assert "autodiff" in text and "fusion" in text, text
    assert "router" in text and "burnish-router" in text, text


def test_the_sdists_install_together(run, sdists, make_venv, tmp_path):
    # pip builds each sdist in an isolated environment from its own build requirements, as it
    # does for a user installing from them: every file a wheel needs must be in the sdist.
    others = [path for name, path in sorted(sdists.items()) if name != "burnish"]
    python = make_venv(f"{sdists['burnish']}[all]", *others)
    listed = json.loads(run(python, "-m", "pip", "list", "--format=json").stdout)
    ours = {p["name"].lower(): p["version"] for p in listed
            if p["name"].lower().startswith("burnish")}
    assert sorted(ours) == sorted(sdists)
    assert len(set(ours.values())) == 1, ours
    code = ("import burnish, burnish.nn, burnish.train, burnish.onnx, burnish.conformance\n"
            "from importlib.resources import files\n"
            "assert files('burnish').joinpath('py.typed').is_file()\n"
            "print(burnish.__version__)")
    assert run(python, "-c", code, cwd=tmp_path).stdout.strip() == next(iter(ours.values()))
