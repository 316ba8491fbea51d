"""The monorepo releases as one: every distribution at the tree's version, every pin on a
sibling at it too, the changelog with its entry, type markers in place; and ``nox -s bump``
moves all of that together."""

from __future__ import annotations

import datetime
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = sorted((ROOT / "packages").glob("*/pyproject.toml"))
INIT = Path("packages/core/src/burnish/__init__.py")


@pytest.fixture(scope="module")
def noxfile():
    """noxfile.py as a module (it needs nox, which the tests session installs)."""
    spec = importlib.util.spec_from_file_location("burnish_noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def project(pyproject: Path) -> dict:
    """The [project] table of a pyproject.toml."""
    import tomllib

    return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]


def requirements(table: dict) -> list[str]:
    """Every requirement a [project] table lists: dependencies and every extra's."""
    extras = table.get("optional-dependencies", {}).values()
    return list(table.get("dependencies", [])) + [r for extra in extras for r in extra]


def versions(root: Path) -> dict[str, str]:
    """Each distribution's version under ``root``, by name, and ``burnish.__version__``."""
    found = {project(p)["name"]: project(p)["version"]
             for p in sorted((root / "packages").glob("*/pyproject.toml"))}
    init = (root / INIT).read_text(encoding="utf-8")
    found["burnish.__version__"] = re.search(r'^__version__ = "(.*)"$', init, re.M).group(1)
    return found


def sibling_pins(root: Path) -> list[tuple[str, str, str]]:
    """(distribution, requirement, pinned version) for every requirement on a burnish-*
    distribution under ``root``."""
    pins = []
    for pyproject in sorted((root / "packages").glob("*/pyproject.toml")):
        table = project(pyproject)
        for requirement in requirements(table):
            if requirement.startswith("burnish-"):
                match = re.fullmatch(r"(burnish-[a-z0-9-]+)(?:\[[a-z0-9,-]+\])?>=(\S+)",
                                     requirement)
                assert match, f"{table['name']}: {requirement!r} is not name>=version"
                pins.append((table["name"], requirement, match.group(2)))
    return pins


def test_every_distribution_has_the_tree_version(noxfile):
    version = noxfile.tree_version()
    assert len(PYPROJECTS) == 18
    assert versions(ROOT) == dict.fromkeys(versions(ROOT), version)


def test_every_pin_on_a_sibling_is_the_tree_version(noxfile):
    version = noxfile.tree_version()
    names = {project(p)["name"] for p in PYPROJECTS}
    pins = sibling_pins(ROOT)
    assert len(pins) > 20
    for name, requirement, pinned in pins:
        assert requirement.split(">=")[0].split("[")[0] in names, (name, requirement)
        assert pinned == version, f"{name} requires {requirement}, the tree is at {version}"


def test_the_changelog_has_the_tree_version(noxfile):
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]\n" in text
    released = noxfile.CHANGELOG_RELEASE.findall(text)
    assert released and released[0] == noxfile.tree_version(), released


def test_every_import_package_is_marked_typed():
    for pyproject in PYPROJECTS:
        src = pyproject.parent / "src" / "burnish"
        if not src.is_dir():
            continue  # the meta-distribution ships no code
        owned = [src] if (src / "__init__.py").exists() else [
            d for d in src.iterdir() if (d / "__init__.py").exists()]
        assert owned, src
        for package in owned:
            assert (package / "py.typed").is_file(), f"{package} has no py.typed"


def copy_tree(tmp_path: Path) -> Path:
    """The files ``set_version`` rewrites, copied under ``tmp_path`` in the tree's layout."""
    for path in [*PYPROJECTS, ROOT / INIT, ROOT / "CHANGELOG.md"]:
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return tmp_path


def test_bump_moves_every_version_and_pin_together(noxfile, tmp_path):
    root = copy_tree(tmp_path)
    before = {p: p.read_text(encoding="utf-8") for p in root.rglob("*") if p.is_file()}
    old = noxfile.tree_version(root)
    new = "99.0.0"
    changed = noxfile.set_version(root, new, today=datetime.date(2031, 2, 3))

    assert sorted(changed) == sorted(before)
    assert noxfile.tree_version(root) == new
    assert versions(root) == dict.fromkeys(versions(root), new)
    pins = sibling_pins(root)
    assert len(pins) == len(sibling_pins(ROOT))
    assert {pinned for _, _, pinned in pins} == {new}
    # Nothing else moved: putting the old version back gives the files as they were.
    for path, text in before.items():
        after = path.read_text(encoding="utf-8")
        if path.name == "CHANGELOG.md":
            assert after == text.replace("## [Unreleased]\n",
                                         f"## [Unreleased]\n\n## [{new}] - 2031-02-03\n", 1)
        else:
            assert after.replace(new, old) == text, path
    assert noxfile.CHANGELOG_RELEASE.findall((root / "CHANGELOG.md").read_text())[0] == new


@pytest.mark.parametrize("version", ["0.0.1", "0.1.0", "not-a-version", "1.00", "v9.0.0"])
def test_bump_refuses_a_bad_version_and_changes_nothing(noxfile, tmp_path, version):
    root = copy_tree(tmp_path)
    before = {p: p.read_text(encoding="utf-8") for p in root.rglob("*") if p.is_file()}
    with pytest.raises(ValueError):
        noxfile.set_version(root, version)
    assert {p: p.read_text(encoding="utf-8") for p in before} == before


def test_the_publishing_order_puts_requirements_first():
    """docs/releasing.md's publishing steps name every distribution once, each after the
    siblings it requires (the meta-distribution's extras included)."""
    text = (ROOT / "docs" / "releasing.md").read_text(encoding="utf-8")
    section = text.split("## Publishing", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d+\. (.*(?:\n   .*)*)", section, re.MULTILINE)
    step_of: dict[str, int] = {}
    for number, step in enumerate(steps):
        for name in re.findall(r"`(burnish[a-z-]*)`", step):
            assert name not in step_of, f"{name} is published twice"
            step_of[name] = number
    tables = [project(p) for p in PYPROJECTS]
    assert sorted(step_of) == sorted(t["name"] for t in tables)
    for table in tables:
        for requirement in requirements(table):
            name = re.match(r"[a-z0-9-]+", requirement).group(0)
            if name.startswith("burnish-"):
                assert step_of[name] < step_of[table["name"]], (table["name"], requirement)
