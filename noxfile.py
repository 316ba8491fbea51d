"""Every routine task of the monorepo as a nox session; ``nox -l`` lists them.

Run ``python3 -m pip install nox`` once, then for example ``python3 -m nox -s tests``. Sessions run
in virtual environments under ``.nox/`` made from the interpreter nox runs on, and reuse them on
the next run; ``nox -R -s tests`` also skips the installs (fast, when nothing's dependencies
changed).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import os
import re
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
nox.options.sessions = ["lint", "docs", "tests", "conformance"]

RUFF = "ruff==0.17.6"
#: The documentation site's tools (``nox -s docs``); ruff lays out long signatures.
DOCS = ("mkdocs==1.6.1", "mkdocs-material==9.8.2", "mkdocstrings==1.0.8",
        "mkdocstrings-python==2.0.11", "griffelib==2.4.1", RUFF)
MYPY = "mypy==2.4.1"
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
#: burnish-web's tests drive Chromium over the DevTools protocol (websockets).
EXTRAS["web"] = "[browser]"

#: What the conformance session runs without arguments: every first-party backend and its
#: gradients, and ndarray, wgpu, rocm and cpu with every op recorded and replayed
#: (``--replay``). Each entry is a backend followed by options of the suite. The GPU backends run
#: on whatever drivers the machine has (CI: Mesa's lavapipe for wgpu, PoCL for rocm); cpu needs a
#: C compiler. ``router(a,b)`` runs on a router over two backends, tensors made on the first
#: one's device. remote runs against a loopback server running ndarray, started by
#: burnish-remote's pytest plugin (a second process: the client and the server each take a core).
#: ``run_parallel`` runs them two or more at a time, in this order: the first entry on each of
#: the driver backends (the autodiff one, which compiles the most kernels) runs before the others
#: on that backend start, which then find its compiled kernels in the driver's disk cache
#: (PoCL's, Mesa's, burnish.cpu's) instead of compiling them again side by side; on a fresh
#: machine compiling is most of a PoCL run. Then the longest first.
#: ``--sample N`` runs one case in N of each test (``nox -s conformance-full`` runs them all):
#: the replays of rocm repeat, on the slowest driver, what ``wgpu --replay`` and
#: ``cpu --replay`` check of the same burnish.jit runtime.
CONFORMANCE_BACKENDS = ("autodiff+rocm", "autodiff+cpu", "autodiff+wgpu",
                        "rocm --replay --sample 4", "fusion+rocm", "rocm", "autodiff+fusion+wgpu",
                        "autodiff+router(wgpu,ndarray)", "wgpu --replay", "wgpu",
                        "router(wgpu,ndarray)", "fusion+wgpu", "cpu --replay", "fusion+cpu",
                        "autodiff+remote", "cpu", "remote", "autodiff+router(ndarray,wgpu)",
                        "ndarray --replay", "autodiff+ndarray", "router(ndarray,wgpu)", "ndarray",
                        "fusion+ndarray")
#: Backends that need a driver; ``BURNISH_REQUIRE_BACKENDS`` (comma-separated, or ``all``) makes
#: one that cannot start fail the sessions instead of being skipped (CI sets it).
DRIVER_BACKENDS = {"wgpu": "a Vulkan, Metal or DX12 driver (Linux without a GPU: apt install "
                           "mesa-vulkan-drivers)",
                   "rocm": "an OpenCL driver (Debian: apt install pocl-opencl-icd; else the [pocl] "
                           "extra installs PoCL for the CPU)",
                   "cpu": "a C compiler (Debian: apt install gcc)"}


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
    # nox: tests/test_release.py runs the bump session's function on a copy of the tree.
    session.install("pytest", "rich>=13", "pexpect", "nox", *EXAMPLE_REQUIREMENTS)
    # burnish-distributed's tests start ranks with mpiexec: mpi4py and the mpich wheel's MPI.
    session.install("mpi4py>=4", "mpich>=4")
    # pytest-xdist: the tests in BURNISH_JOBS processes (the machine's cores by default), each
    # taking the next test when it is free (a few tests compile large kernels on a software GPU
    # driver for minutes, so whole files per process would not even out).
    session.install("pytest-xdist>=3.6")
    jobs = max(1, int(os.environ.get("BURNISH_JOBS", os.cpu_count() or 1)))
    paths = [str(p) for p in sorted(PACKAGES.glob("*/tests"))] + [str(ROOT / "tests")]
    # importlib mode: test files of the same name in two packages do not collide. pytest's exit
    # status 5 (no tests collected) fails the session like any other non-zero status.
    session.run("pytest", "--import-mode=importlib", "-n", str(jobs), "--dist", "worksteal",
                *paths, *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """The conformance suite: ``nox -s conformance -- --backend NAME``. Without arguments it
    runs on every backend of ``CONFORMANCE_BACKENDS``, the autodiff ones running its gradient
    part too; a GPU backend without a driver is skipped with a warning, unless
    ``BURNISH_REQUIRE_BACKENDS`` names it (CI), where it fails."""
    run_conformance(session, sample=True)


@nox.session(name="conformance-full")
def conformance_full(session: nox.Session) -> None:
    """``conformance`` with every case of every entry (no ``--sample``): the nightly run."""
    run_conformance(session, sample=False)


def run_conformance(session: nox.Session, sample: bool) -> None:
    install_editable(session, "core", "backend-ndarray", "autodiff", "fusion", "router",
                     "conformance", "jit", "backend-wgpu", "backend-rocm", "backend-cpu", "remote")
    if session.posargs:
        session.run("pytest", "--pyargs", "burnish.conformance", *session.posargs)
        return
    required, skipped = required_backends(), set()
    for name in DRIVER_BACKENDS:
        reason = None if name in required else unavailable(session, name)
        if reason:
            session.warn(f"conformance: skipping {name} (needs {DRIVER_BACKENDS[name]}): {reason}")
            skipped.add(name)
    # An entry is skipped with every backend it names: autodiff+router(wgpu,ndarray) with wgpu.
    entries, drivers = [], []
    for entry in CONFORMANCE_BACKENDS:
        names = set(re.findall(r"[\w-]+", entry.split()[0]))
        if not skipped & names:
            entries.append(entry if sample else re.sub(r" --sample \d+", "", entry))
            drivers.append(names & set(DRIVER_BACKENDS))
    # Each entry waits for the first entry on its driver backend (one at most: none names two).
    first = {}
    for index, names in enumerate(drivers):
        for name in names:
            first.setdefault(name, index)
    after = [next((first[name] for name in names if first[name] != index), None)
             for index, names in enumerate(drivers)]
    run_parallel(session, [["-q", "-p", "no:cacheprovider", "--pyargs", "burnish.conformance",
                            "--backend", *entry.split()] for entry in entries], entries, after)


def run_parallel(session: nox.Session, runs: list[list[str]], names: list[str],
                 after: list[int | None] | None = None) -> None:
    """pytest with each argument list of ``runs``, ``BURNISH_JOBS`` at once (the machine's cores
    by default: the suite is single-threaded Python), each into a log of its own, in the order
    given; ``after[i]``, where not None, is the index of a run that must end before run ``i``
    starts. A run's closing line is printed as it ends, a failed run's whole log at the end,
    and the session fails when any run failed."""
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
    after = after or [None] * len(runs)
    assert all(first is None or first < index for index, first in enumerate(after))

    def run(index: int) -> tuple[int, Path, float]:
        log = logs / f"{index:02d}-{names[index].replace(' ', '_')}.log"
        start = time.monotonic()
        with log.open("w") as out:
            code = subprocess.run([python, "-m", "pytest", *runs[index]], stdout=out,
                                  stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
        return code, log, time.monotonic() - start

    failed, waiting, ended = [], list(range(len(runs))), set()
    running: dict[concurrent.futures.Future[tuple[int, Path, float]], int] = {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        while waiting or running:
            ready = [i for i in waiting if after[i] is None or after[i] in ended]
            for index in ready[:jobs - len(running)]:
                waiting.remove(index)
                running[pool.submit(run, index)] = index
            done, _ = concurrent.futures.wait(running, return_when="FIRST_COMPLETED")
            for future in done:
                index = running.pop(future)
                ended.add(index)
                code, log, took = future.result()
                lines = log.read_text(errors="replace").strip().splitlines()
                session.log(f"{names[index]}: {lines[-1] if lines else 'no output'} "
                            f"({took:.0f} s)")
                if code:
                    failed.append((names[index], log))
    for name, log in failed:
        print(f"----- {name} ({log}) -----\n{log.read_text(errors='replace')}", flush=True)
    if failed:
        session.error(f"conformance failed on: {', '.join(name for name, _ in failed)}")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole repository, then mypy over every package's sources, with the root
    pyproject.toml's settings (``nox -s lint -- PATH...`` passes paths to ruff alone)."""
    session.install(RUFF, MYPY)
    session.run("ruff", "check", str(ROOT), *session.posargs)
    if not session.posargs:
        typecheck(session)


def typecheck(session: nox.Session) -> None:
    """mypy over every package's ``src``. burnish is one package spread over the packages'
    ``src`` folders (core owns ``burnish/__init__.py``), so they all go on mypy's search path,
    and each package's own folders are checked. Third-party libraries are not installed here:
    mypy sees NumPy, CuPy, wgpu, PyOpenCL or onnx as ``Any`` and checks burnish's own types."""
    sources = [folder / "src" for folder in packages() if (folder / "src").is_dir()]
    targets = [str(p) for src in sources for p in sorted((src / "burnish").iterdir())
               if p.is_dir() and p.name != "__pycache__" or p.suffix == ".py"]
    session.run("mypy", "--cache-dir", str(ROOT / ".nox" / ".mypy_cache"), *targets,
                env={"MYPYPATH": os.pathsep.join(str(src) for src in sources)})


@nox.session
def docs(session: nox.Session) -> None:
    """The book (docs/) and the API reference generated from the docstrings, as a static site
    in site/ (open site/index.html; it works from file://): ``mkdocs build --strict``, so a
    broken link, anchor or reference fails it. ``nox -s docs -- serve`` serves it instead, with
    reloads on every edit. The sources are read, not imported: no package is installed."""
    session.install(*DOCS)
    # NO_MKDOCS_2_WARNING: Material's notice about its successor, printed on every build.
    session.run("mkdocs", *(session.posargs or ["build", "--strict"]),
                env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session
def build(session: nox.Session) -> None:
    """A wheel and an sdist of every package, into dist/ (emptied first: no stale versions)."""
    session.install("build")
    shutil.rmtree(ROOT / "dist", ignore_errors=True)
    for folder in packages():
        session.run("python", "-m", "build", "--outdir", str(ROOT / "dist"), str(folder))


#: ``version = "..."`` of a pyproject.toml's [project] table (the only top-level version line).
_VERSION_LINE = re.compile(r'^version = "([^"]*)"$', re.MULTILINE)
#: ``__version__ = "..."`` in burnish-core's ``burnish/__init__.py``.
_DUNDER_VERSION = re.compile(r'^__version__ = "([^"]*)"$', re.MULTILINE)
#: A requirement on a sibling distribution: ``burnish-core>=0.1.0`` (name, operator, version).
SIBLING_PIN = re.compile(r'"(burnish-[a-z0-9-]+(?:\[[a-z0-9,-]+\])?)(>=|==|~=)([^"\s,;]+)"')
#: A release's heading in CHANGELOG.md: ``## [0.1.0] - 2026-11-26``.
CHANGELOG_RELEASE = re.compile(r"^## \[(\d[^\]]*)\] - \d{4}-\d{2}-\d{2}$", re.MULTILINE)


def tree_version(root: Path = ROOT) -> str:
    """The version of the monorepo: burnish-core's, which every distribution shares."""
    text = (root / "packages" / "core" / "pyproject.toml").read_text(encoding="utf-8")
    return _VERSION_LINE.search(text).group(1)


def set_version(root: Path, version: str, today: datetime.date | None = None) -> list[Path]:
    """Move every distribution under ``root/packages`` to ``version`` together: each
    pyproject.toml's version and its pins on siblings, ``burnish.__version__``, and a heading
    for the release in CHANGELOG.md over what ``Unreleased`` listed. Returns the files
    changed; raises ValueError (changing nothing) for a version that is not PEP 440 or is
    not above the current one."""
    from packaging.version import InvalidVersion, Version

    try:
        new = Version(version)
    except InvalidVersion as error:
        raise ValueError(f"not a version: {version!r} ({error})") from None
    if str(new) != version:
        raise ValueError(f"write the version as {str(new)!r}, not {version!r}")
    current = tree_version(root)
    if new <= Version(current):
        raise ValueError(f"{version} is not above the current version {current}")
    changes: dict[Path, str] = {}
    for pyproject in sorted((root / "packages").glob("*/pyproject.toml")):
        text = pyproject.read_text(encoding="utf-8")
        text, count = _VERSION_LINE.subn(f'version = "{version}"', text, count=1)
        if not count:
            raise ValueError(f"{pyproject}: no version line")
        changes[pyproject] = SIBLING_PIN.sub(rf'"\g<1>\g<2>{version}"', text)
    init = root / "packages" / "core" / "src" / "burnish" / "__init__.py"
    text, count = _DUNDER_VERSION.subn(f'__version__ = "{version}"', init.read_text("utf-8"))
    if not count:
        raise ValueError(f"{init}: no __version__ line")
    changes[init] = text
    changelog = root / "CHANGELOG.md"
    text = changelog.read_text(encoding="utf-8")
    if "## [Unreleased]\n" not in text:
        raise ValueError(f"{changelog}: no '## [Unreleased]' heading")
    date = (today or datetime.date.today()).isoformat()
    changes[changelog] = text.replace("## [Unreleased]\n",
                                      f"## [Unreleased]\n\n## [{version}] - {date}\n", 1)
    for path, text in changes.items():
        path.write_text(text, encoding="utf-8")
    return list(changes)


@nox.session(python=False)
def bump(session: nox.Session) -> None:
    """Move the whole monorepo to a new version: ``nox -s bump -- 0.2.0`` (docs/releasing.md)."""
    if len(session.posargs) != 1:
        session.error("give the new version: nox -s bump -- 0.2.0")
    try:
        changed = set_version(ROOT, session.posargs[0])
    except ValueError as error:
        session.error(str(error))
    for path in changed:
        session.log(f"wrote {path.relative_to(ROOT)}")


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
