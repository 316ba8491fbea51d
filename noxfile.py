"""Every routine task of the monorepo as a nox session; ``nox -l`` lists them.

Run ``python3 -m pip install nox`` once, then for example ``python3 -m nox -s tests``. Sessions run
in virtual environments under ``.nox/`` made from the interpreter nox runs on, and reuse them on
the next run; ``nox -R -s tests`` also skips the installs (fast, when nothing's dependencies
changed).
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import sys
import time
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


def has_system_opencl_driver() -> bool:
    """Whether an OpenCL driver (an ICD file) is registered with the system's loader."""
    vendors = Path(os.environ.get("OCL_ICD_VENDORS", "/etc/OpenCL/vendors"))
    return any(vendors.glob("*.icd"))


#: Extras installed with a package wherever the sessions install it. Where the system has no
#: OpenCL driver, PyPI's PoCL (an OpenCL driver for the CPU), so that the rocm backend runs on
#: machines without a GPU. Where it has one (CI: Debian's pocl-opencl-icd) that one alone: a
#: second PoCL would add a second device, and PyPI's LLVM 14 cannot compile for newer CPUs.
EXTRAS = {} if has_system_opencl_driver() else {"backend-rocm": "[pocl]"}

#: What the conformance session runs without arguments: every first-party backend and its
#: gradients, and ndarray, wgpu and rocm with every op recorded and replayed (``--replay``). Each
#: entry is a backend followed by options of the suite. The GPU backends run on whatever drivers the
#: machine has (CI: Mesa's lavapipe for wgpu, PoCL for rocm).
#: The longest first: ``run_parallel`` runs them two or more at a time.
CONFORMANCE_BACKENDS = ("rocm --replay", "autodiff+rocm", "rocm", "fusion+rocm",
                        "autodiff+fusion+wgpu", "autodiff+wgpu", "wgpu --replay", "wgpu",
                        "fusion+wgpu", "ndarray --replay", "autodiff+ndarray", "ndarray",
                        "fusion+ndarray")
#: Backends that need a driver; ``BURNISH_REQUIRE_BACKENDS`` (comma-separated, or ``all``) makes
#: one that cannot start fail the sessions instead of being skipped (CI sets it).
DRIVER_BACKENDS = {"wgpu": "a Vulkan, Metal or DX12 driver (Linux without a GPU: apt install "
                           "mesa-vulkan-drivers)",
                   "rocm": "an OpenCL driver (Debian: apt install pocl-opencl-icd; else the [pocl] "
                           "extra installs PoCL for the CPU)"}


#: What examples/ needs beyond burnish's packages (each example's README says which of them).
EXAMPLE_REQUIREMENTS = ("matplotlib>=3.7", "tokenizers>=0.15")


def install_editable(session: nox.Session, *names: str) -> None:
    """Install the named packages/ folders (every one when none is named) editable, together,
    with their ``EXTRAS``."""
    folders = [PACKAGES / name for name in names] if names else packages()
    args = []
    for folder in folders:
        args += ["-e", str(folder) + EXTRAS.get(folder.name, "")]
    session.install(*args)


def required_backends() -> set[str]:
    """The backends ``BURNISH_REQUIRE_BACKENDS`` says must start (``all``: every one)."""
    wanted = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
    return set(DRIVER_BACKENDS) if "all" in wanted else wanted & set(DRIVER_BACKENDS)


def unavailable(session: nox.Session, name: str) -> str | None:
    """Why backend ``name`` cannot start in the session's environment (None when it can)."""
    probe = (f"import burnish\ntry:\n    burnish.backend({name!r}).default_device()\n"
             "except Exception as e:\n    print(f'{type(e).__name__}: {e}')")
    out = session.run("python", "-c", probe, silent=True)
    return (out or "").strip() or None  # None from session.run: --install-only ran nothing


@nox.session
def tests(session: nox.Session) -> None:
    """Each package's tests and the cross-package tests in tests/ (-m "not slow": skip the ones
    that build wheels and virtual environments)."""
    install_editable(session)
    # rich draws burnish-train's dashboard; its pseudo-terminal tests need it (and pexpect). The
    # examples' tests run them with what their READMEs install: matplotlib for plots, tokenizers
    # for the text examples.
    session.install("pytest", "rich>=13", "pexpect", *EXAMPLE_REQUIREMENTS)
    paths = [str(p) for p in sorted(PACKAGES.glob("*/tests"))] + [str(ROOT / "tests")]
    # importlib mode: test files of the same name in two packages do not collide. pytest's exit
    # status 5 (no tests collected) fails the session like any other non-zero status.
    session.run("pytest", "--import-mode=importlib", *paths, *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """The conformance suite: ``nox -s conformance -- --backend NAME``. Without arguments it
    runs on every backend of ``CONFORMANCE_BACKENDS``, the autodiff ones running its gradient
    part too; a GPU backend without a driver is skipped with a warning, unless
    ``BURNISH_REQUIRE_BACKENDS`` names it (CI), where it fails."""
    install_editable(session, "core", "backend-ndarray", "autodiff", "fusion", "conformance",
                     "jit", "backend-wgpu", "backend-rocm")
    if session.posargs:
        session.run("pytest", "--pyargs", "burnish.conformance", *session.posargs)
        return
    required, skipped = required_backends(), set()
    for name in DRIVER_BACKENDS:
        reason = None if name in required else unavailable(session, name)
        if reason:
            session.warn(f"conformance: skipping {name} (needs {DRIVER_BACKENDS[name]}): {reason}")
            skipped.add(name)
    entries = [entry for entry in CONFORMANCE_BACKENDS
               if entry.split()[0].split("+")[-1] not in skipped]
    run_parallel(session, [["-q", "-p", "no:cacheprovider", "--pyargs", "burnish.conformance",
                            "--backend", *entry.split()] for entry in entries], entries)


def run_parallel(session: nox.Session, runs: list[list[str]], names: list[str]) -> None:
    """pytest with each argument list of ``runs``, ``BURNISH_JOBS`` at once (the machine's cores
    by default: the suite is single-threaded Python), each into a log of its own. A run's
    closing line is printed as it ends, a failed run's whole log at the end, and the session
    fails when any run failed."""
    if session.posargs or "--install-only" in sys.argv:
        return
    jobs = max(1, int(os.environ.get("BURNISH_JOBS", os.cpu_count() or 1)))
    logs = Path(session.virtualenv.location) / "logs"
    logs.mkdir(exist_ok=True)
    python = str(Path(session.bin) / "python")
    env = dict(os.environ)
    for key, value in session.env.items():  # None: the session unsets it
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value

    def run(index: int) -> tuple[int, Path, float]:
        log = logs / f"{index:02d}-{names[index].replace(' ', '_')}.log"
        start = time.monotonic()
        with log.open("w") as out:
            code = subprocess.run([python, "-m", "pytest", *runs[index]], stdout=out,
                                  stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
        return code, log, time.monotonic() - start

    failed = []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(run, i): i for i in range(len(runs))}
        for future in concurrent.futures.as_completed(futures):
            code, log, took = future.result()
            lines = log.read_text(errors="replace").strip().splitlines()
            name = names[futures[future]]
            session.log(f"{name}: {lines[-1] if lines else 'no output'} ({took:.0f} s)")
            if code:
                failed.append((name, log))
    for name, log in failed:
        print(f"----- {name} ({log}) -----\n{log.read_text(errors='replace')}", flush=True)
    if failed:
        session.error(f"conformance failed on: {', '.join(name for name, _ in failed)}")


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
