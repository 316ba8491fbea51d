"""pytest plugin: a loopback server for test sessions on the remote backend.

When a session's ``--backend`` (the conformance suite's option) names ``remote`` as its base
(``remote``, ``autodiff+remote``) and ``BURNISH_REMOTE_URL`` is not set, a server is started in
a child process on 127.0.0.1, on a free port, with a random token, running the backend named by
``BURNISH_REMOTE_SERVE`` (default ``ndarray``), and stopped when the session ends. Any other
session is left alone.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

_SERVER = pytest.StashKey[subprocess.Popen[str]]()


def pytest_configure(config: pytest.Config) -> None:
    try:
        name = config.getoption("--backend")
    except ValueError:  # the conformance plugin is not loaded: no --backend option
        return
    if not isinstance(name, str) or name.split("+")[-1] != "remote":
        return
    if os.environ.get("BURNISH_REMOTE_URL"):
        return
    token = secrets.token_urlsafe(24)
    serves = os.environ.get("BURNISH_REMOTE_SERVE", "ndarray")
    process = subprocess.Popen(
        [sys.executable, "-m", "burnish.remote", "serve", "--backend", serves, "--host",
         "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "BURNISH_REMOTE_TOKEN": token})
    line = process.stdout.readline() if process.stdout is not None else ""
    if " on ws://" not in line:
        process.kill()
        raise pytest.UsageError(f"burnish remote: the loopback server running {serves!r} did "
                                f"not start (it said {line.strip()!r})")
    config.stash[_SERVER] = process
    os.environ["BURNISH_REMOTE_URL"] = line.rsplit(" on ", 1)[1].strip()
    os.environ["BURNISH_REMOTE_TOKEN"] = token


def pytest_unconfigure(config: pytest.Config) -> None:
    process = config.stash.get(_SERVER, None)
    if process is not None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
