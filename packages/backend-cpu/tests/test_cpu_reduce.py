"""Float sums and means through ``burnish.cpu.reduce``: every dim of plain tensors against
NumPy, and layouts that are not plain left to burnish.jit's kernels."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor
from burnish.cpu.reduce import NativeReduce
from burnish.cpu.reduce_ops import CpuReduceOps


@pytest.fixture
def calls(monkeypatch) -> list[tuple[int, int, int]]:
    monkeypatch.setattr(CpuReduceOps, "native_from", 1)  # every size through the C path
    seen: list[tuple[int, int, int]] = []
    original = NativeReduce.sum

    def counted(self, x, out, outer, n, inner, mean):
        seen.append((outer, n, inner))
        return original(self, x, out, outer, n, inner, mean)

    monkeypatch.setattr(NativeReduce, "sum", counted)
    return seen


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(7,), (5, 300), (300, 5), (3, 4, 600), (2, 0, 3), (4096, 16)])
def test_sums_and_means_of_every_dim_match_numpy(calls, dtype, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    t = Tensor.from_numpy(x, device="cpu")
    tol = 1e-5 if dtype == "float32" else 1e-12
    for dim in range(len(shape)):
        np.testing.assert_allclose(t.sum(dim, keepdim=True).to_numpy(),
                                   x.sum(dim, keepdims=True), rtol=tol, atol=tol)
        if shape[dim]:
            np.testing.assert_allclose(t.mean(dim, keepdim=True).to_numpy(),
                                       x.mean(dim, keepdims=True), rtol=tol, atol=tol)
    np.testing.assert_allclose(t.sum().to_numpy(), x.sum(), rtol=tol, atol=tol)
    if x.size:
        assert (1, x.size, 1) in calls
        assert len(calls) >= len(shape)


def test_nan_propagates(calls):
    x = np.ones((4, 3), np.float32)
    x[2, 1] = np.nan
    t = Tensor.from_numpy(x, device="cpu")
    np.testing.assert_array_equal(t.sum(0, keepdim=True).to_numpy(), [[4, np.nan, 4]])
    np.testing.assert_array_equal(t.mean(1, keepdim=True).to_numpy(), [[1], [1], [np.nan], [1]])
    assert calls == [(1, 4, 3), (4, 3, 1)]


def test_layouts_that_are_not_plain_take_the_kernels(calls):
    x = np.random.default_rng(1).standard_normal((6, 8)).astype(np.float32)
    t = Tensor.from_numpy(x, device="cpu").permute([1, 0])
    np.testing.assert_allclose(t.sum(1, keepdim=True).to_numpy(),
                               x.T.sum(1, keepdims=True), rtol=1e-5)
    assert calls == []


def test_small_tensors_take_the_kernels(calls, monkeypatch):
    monkeypatch.setattr(CpuReduceOps, "native_from", 4096)
    x = np.random.default_rng(2).standard_normal((64, 10)).astype(np.float32)
    np.testing.assert_allclose(Tensor.from_numpy(x, device="cpu").sum(0, keepdim=True)
                               .to_numpy(), x.sum(0, keepdims=True), rtol=1e-5)
    assert calls == []
    Tensor.from_numpy(np.ones((64, 64), np.float32), device="cpu").sum(0, keepdim=True)
    assert calls == [(1, 64, 64)]
