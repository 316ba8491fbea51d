"""The suite's ``--replay``: each op's result comes from a replay of its record, a replay that
does not compute is seen, ops that cannot be captured run eagerly and are counted, and backends
that cannot be checked so are refused (a usage error of the suite)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import burnish
from burnish import Tensor, float32
from burnish.conformance.capture_check import CaptureCheck
from burnish.conformance.foreign import ForeignBackend
from burnish.errors import UnsupportedError


def started(name: str):
    """Backend ``name`` and its device; for rocm, where it cannot start, a skip naming the
    driver it needs (a failure where ``BURNISH_REQUIRE_BACKENDS`` names rocm, as in CI)."""
    if name != "rocm":
        backend = burnish.backend(name)
        return backend, backend.default_device()
    try:
        backend = burnish.backend("rocm")
        return backend, backend.default_device()
    except Exception as error:
        wanted = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
        message = (f"rocm cannot run here ({type(error).__name__}: {error}); it needs an OpenCL "
                   f"driver (pip install 'burnish-backend-rocm[pocl]' for PoCL on the CPU)")
        if "rocm" in wanted or "all" in wanted:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


class ReplayingNothing:
    """A capturer whose records replay no command: what a record missing its launches does."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def record(self, *args):
        record = self.real.record(*args)
        record.prepare()
        record.replayer = lambda copies: None
        return record


class CopyingNoInputs(ReplayingNothing):
    """A capturer whose records launch everything but copy no argument into their inputs."""

    def record(self, *args):
        record = self.real.record(*args)
        record.prepare()
        replayer = record.replayer
        record.replayer = lambda copies: replayer([])
        return record


VALUES = np.linspace(-2.0, 2.0, 12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("name", ["ndarray", "rocm", "fusion+rocm"])
def test_ops_return_their_replay(name):
    inner, device = started(name)
    check = CaptureCheck(inner, device)
    x = Tensor.from_numpy(VALUES, check.wrap_device(device))
    out = (x.exp() + x).to_numpy()
    np.testing.assert_allclose(out, np.exp(VALUES) + VALUES, rtol=1e-5)
    assert check.replayed["exp"] == 1 and check.replayed["add"] == 1, check.replayed
    # On fusion+rocm a lone product's kernel changes after its first calls (fusion stops
    # recording an op it keeps finding alone): recorded again, as burnish.capture does.
    product = (x @ x.transpose(0, 1)).to_numpy()
    np.testing.assert_allclose(product, VALUES @ VALUES.T, rtol=1e-5, atol=1e-5)
    assert check.replayed["matmul"] == 1, check.eager
    assert check.eager == {}
    uncalled = check.summary()[-1]
    assert uncalled.startswith("ops no test called: abs, adam_step, "), uncalled
    assert " exp," not in uncalled and " add," not in uncalled and "read" not in uncalled


def test_a_replay_that_computes_nothing_is_seen(monkeypatch):
    # The recording itself wrote the right values into the buffers the record keeps: a replay
    # that launched nothing would return them, and the suite would pass a broken record.
    inner, device = started("rocm")
    real = inner.capturer
    monkeypatch.setattr(inner, "capturer", lambda device: ReplayingNothing(real(device)))
    check = CaptureCheck(inner, device)
    x = Tensor.from_numpy(VALUES, check.wrap_device(device))
    out = x.exp().to_numpy()
    assert check.replayed["exp"] == 1
    assert not np.isclose(out, np.exp(VALUES)).any(), out


def test_a_replay_that_copies_no_argument_in_is_seen(monkeypatch):
    # A captured step's next call brings new tensors, which a replay copies into the record's
    # input buffers; the check replays on copies of the arguments, so a record whose copies
    # are wrong (a view's span, an alias) shows.
    inner, device = started("rocm")
    real = inner.capturer
    monkeypatch.setattr(inner, "capturer", lambda device: CopyingNoInputs(real(device)))
    check = CaptureCheck(inner, device)
    x = Tensor.from_numpy(VALUES, check.wrap_device(device))
    out = x.permute([1, 0])[1:].exp().to_numpy()
    assert check.replayed["exp"] == 1
    assert not np.isclose(out, np.exp(VALUES.T[1:])).any(), out
    np.testing.assert_array_equal(x.to_numpy(), VALUES)  # the argument itself is untouched


def test_an_op_that_cannot_be_captured_runs_eagerly_and_is_counted(monkeypatch):
    inner, device = started("rocm")
    check = CaptureCheck(inner, device)
    plain = type(inner).exp

    def exp_reading_the_host(x):  # an op that looks at a value on the host
        out = plain(inner, x)
        inner.read([out], [float32])
        return out

    monkeypatch.setattr(inner, "exp", exp_reading_the_host, raising=False)
    x = Tensor.from_data(np.arange(4, dtype=np.float32), device=check.wrap_device(device))
    np.testing.assert_allclose(x.exp().to_numpy(), np.exp(np.arange(4, dtype=np.float32)),
                               rtol=1e-6)
    x.exp()
    assert check.replayed["exp"] == 0
    (reason,) = check.eager["exp"]
    assert check.eager["exp"][reason] == 2
    assert "reads tensor values on the host" in reason, reason
    assert "<line>" in reason and ".py:" not in reason, reason
    summary = check.summary()
    assert summary[0].endswith("2 ran eagerly because they cannot be captured (1 ops)"), summary
    assert "  exp: 2 eager, 0 replayed" in summary, summary


def test_random_draws_replay_and_follow_the_seed():
    """The generator's state lives on the device: draws are recorded and replayed, and a seed
    gives the same numbers again."""
    inner, device = started("rocm")
    check = CaptureCheck(inner, device)
    burnish.seed(3)
    first = Tensor.random((64,), device=check.wrap_device(device), dtype=float32).to_numpy()
    second = Tensor.random((64,), device=check.wrap_device(device), dtype=float32).to_numpy()
    burnish.seed(3)
    again = Tensor.random((64,), device=check.wrap_device(device), dtype=float32).to_numpy()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, second)
    assert ((first >= 0) & (first < 1)).all()
    assert check.replayed["random"] == 3 and "random" not in check.eager


@pytest.mark.parametrize(("backend", "why"), [
    (ForeignBackend(), "backend 'foreign' has no capturer on host:0"),
    (burnish.backend("autodiff+ndarray"),
     "autodiff: its graph is built by Python on every op and is not replayed op by op"),
], ids=["foreign", "autodiff+ndarray"])
def test_backends_that_cannot_be_replayed_are_refused(backend, why):
    with pytest.raises(UnsupportedError, match=why):
        CaptureCheck(backend, backend.default_device())


def test_the_option_on_autodiff_is_a_usage_error(tmp_path):
    env = {**os.environ, "COLUMNS": "1000"}
    env.pop("PYTEST_ADDOPTS", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "burnish.conformance.test_math",
         "--backend", "autodiff+ndarray", "--replay", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "burnish conformance: --replay checks each op of a backend recorded and replayed, " \
        "and backend 'autodiff+ndarray' has autodiff" in result.stderr, result.stderr
