"""Softmax and log-softmax rows in C (``burnish.cpu.rows``) against NumPy and against the row
kernels they stand in for."""

from __future__ import annotations

import numpy as np
import pytest

import burnish.functional as F
from burnish import Tensor
from burnish.cpu.activation_ops import CpuActivationOps
from burnish.cpu.rows import NativeRows


@pytest.fixture
def calls(monkeypatch) -> list[str]:
    monkeypatch.setattr(CpuActivationOps, "rows_from", 1)  # every size through the C path
    seen: list[str] = []
    original = NativeRows.run

    def counted(self, op, inputs, out):
        seen.append(op)
        return original(self, op, inputs, out)

    monkeypatch.setattr(NativeRows, "run", counted)
    return seen


def _reference(x: np.ndarray, log: bool) -> np.ndarray:
    shifted = x - x.max(-1, keepdims=True)
    total = np.exp(shifted).sum(-1, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", [(1, 1), (7, 65), (3, 4, 33)])
def test_rows_against_numpy(calls, dtype, log, shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    cotangent = rng.standard_normal(shape).astype(dtype)
    t = Tensor.from_numpy(x, device="autodiff+cpu").require_grad()
    y = F.log_softmax(t, -1) if log else F.softmax(t, -1)
    grads = (y * Tensor.from_numpy(cotangent, device="autodiff+cpu")).sum().backward()
    x64, g64 = x.astype(np.float64), cotangent.astype(np.float64)
    want = _reference(x64, log)
    if log:
        dx = g64 - np.exp(want) * g64.sum(-1, keepdims=True)
    else:
        dx = want * (g64 - (g64 * want).sum(-1, keepdims=True))
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(y.to_numpy(), want, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(t.grad(grads).to_numpy(), dx, rtol=rtol, atol=rtol)
    op = "log_softmax" if log else "softmax"
    assert calls == [op, f"{op}_backward"]


def test_rows_match_the_row_kernels(calls, monkeypatch):
    x = np.random.default_rng(1).standard_normal((16, 65)).astype(np.float32) * 3
    x[3, 5] = np.nan
    x[4, :] = -np.inf
    x[5, 7] = np.inf
    native = F.log_softmax(Tensor.from_numpy(x, device="cpu"), 1).to_numpy()
    monkeypatch.setattr(CpuActivationOps, "rows_from", 1 << 62)
    kernel = F.log_softmax(Tensor.from_numpy(x, device="cpu"), 1).to_numpy()
    assert calls == ["log_softmax"]
    np.testing.assert_allclose(native, kernel, rtol=1e-6, atol=1e-6)
    assert np.isnan(native[3]).all() and np.isnan(native[4]).all()


def test_other_dims_and_layouts_take_the_kernels(calls):
    x = Tensor.from_numpy(np.ones((8, 9), np.float32), device="cpu")
    F.softmax(x, 0)
    F.softmax(x.transpose(0, 1), 1)
    assert calls == []
