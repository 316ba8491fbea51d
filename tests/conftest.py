"""Fixtures of the cross-package tests: wheels of this repository's packages, fresh venvs, info."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Environment variables that would leak this process's environment into a fresh venv.
_LEAKY = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "BURNISH_BACKEND", "PYTEST_ADDOPTS")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: builds wheels and fresh virtual environments (a minute or more each); "
        "CI runs them, -m 'not slow' leaves them out"
    )


def _run(*args: str | Path, cwd: Path | None = None, timeout: float = 900
         ) -> subprocess.CompletedProcess:
    """Run a command in a clean environment; raise with its output when it fails."""
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(str(a) for a in args)} exited with {result.returncode}\n"
            f"--- stdout ---\n{result.stdout[-6000:]}\n--- stderr ---\n{result.stderr[-6000:]}"
        )
    return result


@pytest.fixture(scope="session")
def run() -> Callable[..., subprocess.CompletedProcess]:
    """``run(*args, cwd=None, timeout=900)``: run a command in an environment cleared of this
    process's Python settings; fail the test with the command's output when it fails."""
    return _run


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str | Path], Path]:
    """``wheel(folder)``: a wheel built (once per session) from a folder, given as a path or as
    the name of a folder under packages/."""
    out = tmp_path_factory.mktemp("wheels")
    built: dict[Path, Path] = {}

    def build(folder: str | Path) -> Path:
        folder = (ROOT / "packages" / folder) if isinstance(folder, str) else folder
        if folder not in built:
            target = out / folder.name
            _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", target, folder)
            (found,) = target.glob("*.whl")
            built[folder] = found
        return built[folder]

    return build


@pytest.fixture(scope="session")
def make_venv(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``make_venv(*requirements)``: the python of a new venv with only those installed (their
    dependencies come from the package index)."""

    def make(*requirements: str | Path) -> Path:
        where = tmp_path_factory.mktemp("venv")
        _run(sys.executable, "-m", "venv", where)
        bin_dir = where / ("Scripts" if os.name == "nt" else "bin")
        python = bin_dir / ("python.exe" if os.name == "nt" else "python")
        _run(python, "-m", "pip", "install", *requirements)
        return python

    return make


@pytest.fixture(scope="session")
def burnish_info() -> Callable[[Path], tuple[str, list[str]]]:
    """``burnish_info(python)``: the output of ``python -m burnish info`` and the backends it
    lists, in order."""

    def info(python: Path) -> tuple[str, list[str]]:
        text = _run(python, "-m", "burnish", "info").stdout
        backends, section = [], False
        for line in text.splitlines():
            if line == "Backends:":
                section = True
            elif section and not line.strip():
                break
            elif section and line[2:3].strip() and not line.strip().startswith("none"):
                backends.append(line.split()[0])  # a backend's first line starts at column 2
        return text, backends

    return info


#: What each backend that needs a driver asks for, for the skip messages.
DRIVERS = {
    "wgpu": "a Vulkan, Metal or DX12 driver (Linux without a GPU: apt install "
            "mesa-vulkan-drivers)",
    "rocm": "an OpenCL driver (pip install 'burnish-backend-rocm[pocl]' for PoCL on the CPU)",
    "cpu": "a C compiler (apt install gcc)",
}


@pytest.fixture(scope="session")
def needs_backends() -> Callable[..., None]:
    """``needs_backends(*names)`` skips the calling test unless every named backend starts
    here, naming what to install; where ``BURNISH_REQUIRE_BACKENDS`` (comma-separated, or
    ``all``) names one, it fails instead (CI, which has the drivers)."""
    import burnish

    required = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}

    def needs(*names: str) -> None:
        for name in names:
            try:
                burnish.backend(name).default_device()
            except Exception as error:
                message = (f"backend {name} cannot start here ({type(error).__name__}: {error})"
                           f"; it needs {DRIVERS.get(name, 'its package')}")
                if name in required or "all" in required:
                    pytest.fail(message + " [BURNISH_REQUIRE_BACKENDS requires it]",
                                pytrace=False)
                pytest.skip(message)

    return needs
