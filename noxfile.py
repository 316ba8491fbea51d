"""Every routine task of the monorepo as a nox session; ``nox -l`` lists them.

Run ``python3 -m pip install nox`` once, then for example ``python3 -m nox -s tests``. Sessions run
in virtual environments under ``.nox/`` made from the interpreter nox runs on, and reuse them on
the next run; ``nox -R -s tests`` also skips the installs (fast, when nothing's dependencies
changed).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PACKAGES = ROOT / "packages"

nox.options.reuse_venv = "yes"
# A session that cannot start (no interpreter, a tool outside its venv) is a failure, never a skip.
nox.options.error_on_missing_interpreters = True
nox.options.error_on_external_run = True
nox.options.sessions = ["lint", "tests", "conformance"]

RUFF = "ruff==0.17.6"
# The PyTorch that bench/RESULTS.md was measured against. PyPI's Linux wheel is the CUDA build;
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu gets the CPU one (what bench uses).
TORCH = "torch==2.13.0"


def packages() -> list[Path]:
    """Every distribution of the monorepo: the folders under packages/ with a pyproject.toml."""
    return sorted(p.parent for p in PACKAGES.glob("*/pyproject.toml"))


def install_editable(session: nox.Session, *names: str) -> None:
    """Install the named packages/ folders (every one when none is named) editable, together."""
    folders = [PACKAGES / name for name in names] if names else packages()
    args = []
    for folder in folders:
        args += ["-e", str(folder)]
    session.install(*args)


@nox.session
def tests(session: nox.Session) -> None:
    """Each package's tests and the cross-package tests in tests/ (-m "not slow": skip the ones
    that build wheels and virtual environments)."""
    install_editable(session)
    # rich draws burnish-train's dashboard; its pseudo-terminal tests need it (and pexpect).
    session.install("pytest", "rich>=13", "pexpect")
    paths = [str(p) for p in sorted(PACKAGES.glob("*/tests"))] + [str(ROOT / "tests")]
    # importlib mode: test files of the same name in two packages do not collide. pytest's exit
    # status 5 (no tests collected) fails the session like any other non-zero status.
    session.run("pytest", "--import-mode=importlib", *paths, *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """The conformance suite: ``nox -s conformance -- --backend NAME``. Without arguments it
    runs twice: on ndarray, and on autodiff+ndarray, where its gradient part runs too."""
    install_editable(session, "core", "backend-ndarray", "autodiff", "conformance")
    if session.posargs:
        session.run("pytest", "--pyargs", "burnish.conformance", *session.posargs)
        return
    for backend in ("ndarray", "autodiff+ndarray"):
        session.run("pytest", "--pyargs", "burnish.conformance", "--backend", backend)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole repository, with the root pyproject.toml's rules."""
    session.install(RUFF)
    session.run("ruff", "check", str(ROOT), *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """A wheel and an sdist of every package, into dist/ (emptied first: no stale versions)."""
    session.install("build")
    shutil.rmtree(ROOT / "dist", ignore_errors=True)
    for folder in packages():
        session.run("python", "-m", "build", "--outdir", str(ROOT / "dist"), str(folder))


@nox.session
def demo(session: nox.Session) -> None:
    """The demo in examples/demo, on an install of only core and the ndarray backend."""
    install_editable(session, "core", "backend-ndarray")
    session.run("python", str(ROOT / "examples" / "demo" / "demo.py"))


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmarks: ``nox -s bench -- --markdown``; ``-- --torch`` adds PyTorch to compare."""
    install_editable(session, "core", "backend-ndarray", "autodiff", "nn")
    if "--torch" in session.posargs:
        session.install(TORCH)
    session.run("python", str(ROOT / "bench" / "run.py"), *session.posargs)
