"""README.md's first command, unchanged, installs burnish and trains on MNIST without a network.

What is simulated: a fresh virtual environment on a machine whose package installer can reach an
index (PyPI, or a local mirror or wheelhouse that pip is configured with), but where nothing else
can be reached. The install half of the command runs as written, from this checkout's folders
(pip builds each wheel, so the data files must be in the wheels). The example half then runs with
every HTTP(S) proxy variable pointing at a local port that nothing listens on, so every download
``urllib`` tries is refused at once, as on a machine with no route out; ``BURNISH_CACHE`` points
at an empty folder (no MNIST cached earlier) and ``BURNISH_MNIST_DIR`` is unset (no folder of
MNIST files). Only the folder the example runs in differs from the README: a temporary one, so
that ``runs/mnist`` lands there and not in the checkout.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/mnist/mnist.py"
PROXIES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


def readme_first_command() -> tuple[list[str], list[str]]:
    """README.md's command that runs the MNIST example, as its install and its run."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^```sh\n(.*?)\n```", readme, re.MULTILINE | re.DOTALL)
    (command,) = [c for c in commands if EXAMPLE in c]
    install, example = command.split(" && ")
    return shlex.split(install), shlex.split(example)


def closed_port() -> int:
    """A local TCP port that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def fresh_python(run, tmp_path_factory) -> Path:
    """The python of a new, empty virtual environment."""
    where = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", where)
    return where / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def test_the_readme_command_trains_mnist_offline(run, fresh_python, tmp_path, monkeypatch):
    install, example = readme_first_command()
    assert install[:4] == ["python3", "-m", "pip", "install"], install
    assert example == ["python3", EXAMPLE], example
    run(fresh_python, *install[1:], cwd=ROOT, timeout=900)

    unreachable = f"http://127.0.0.1:{closed_port()}"
    for name in PROXIES:
        monkeypatch.setenv(name, unreachable)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("BURNISH_MNIST_DIR", raising=False)
    monkeypatch.delenv("BURNISH_OFFLINE", raising=False)
    monkeypatch.setenv("BURNISH_CACHE", str(tmp_path / "cache"))
    started = time.perf_counter()
    done = run(fresh_python, ROOT / EXAMPLE, cwd=tmp_path, timeout=600)
    seconds = time.perf_counter() - started

    out = done.stdout
    assert "could not download train-images-idx3-ubyte" in done.stderr, done.stderr
    assert "MNIST could not be downloaded: training on the first 8,000 digits" in out, out
    accuracy = float(re.search(r"validation accuracy ([\d.]+)%", out).group(1))
    assert accuracy >= 97.0, out
    assert int(re.search(r"(\d+)/10 right", out).group(1)) >= 8, out
    assert (tmp_path / "runs" / "mnist" / "model.safetensors").is_file()
    assert not (tmp_path / "cache" / "mnist").exists(), "nothing should have been downloaded"
    print(f"the example ran offline in {seconds:.0f} s, validation accuracy {accuracy:.2f}%")
