"""The indexing kernels beyond what the conformance suite reaches: accumulating scatters over long
index lists (the argsorted way) agree with NumPy and with the scanning way bit for bit, and new
shapes reuse the kernels already compiled."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, cat
from burnish.jit import autotune
from burnish.jit.backend import layout_ops


@pytest.fixture(params=["scan", "sorted"])
def way(request, monkeypatch):
    """Accumulating scatters forced to scan every index entry, or to argsort them first."""
    monkeypatch.setattr(layout_ops, "SORT_FROM", 10**9 if request.param == "scan" else 0)
    return request.param


def test_select_add_of_many_repeated_rows_matches_numpy(jit_backend, way):
    device = jit_backend.default_device()
    rng = np.random.default_rng(0)
    x = rng.integers(-50, 50, (7, 3, 5)).astype(np.int32)
    rows = rng.integers(0, 3, 200)
    values = rng.integers(-50, 50, (7, 200, 5)).astype(np.int32)
    out = Tensor.from_numpy(x, device).select_add(1, Tensor.from_numpy(rows, device),
                                                  Tensor.from_numpy(values, device))
    expected = np.moveaxis(x.copy(), 1, 0)
    np.add.at(expected, rows, np.moveaxis(values, 1, 0))
    np.testing.assert_array_equal(out.to_numpy(), np.moveaxis(expected, 0, 1))


def test_scatter_add_of_long_lines_matches_numpy(jit_backend, way):
    device = jit_backend.default_device()
    rng = np.random.default_rng(1)
    x = rng.integers(-50, 50, (4, 6)).astype(np.int32)
    indices = rng.integers(0, 6, (3, 100))
    values = rng.integers(-50, 50, (3, 100)).astype(np.int32)
    # Strided indices: the argsort and the kernel read them through their strides.
    strided = Tensor.from_numpy(np.repeat(indices, 2, axis=1), device)[:, ::2]
    out = Tensor.from_numpy(x, device).scatter_add(1, strided, Tensor.from_numpy(values, device))
    expected = x.copy()
    np.add.at(expected, (np.arange(3)[:, None], indices), values)
    np.testing.assert_array_equal(out.to_numpy(), expected)


def test_float_sums_are_the_same_either_way_and_every_time(jit_backend, monkeypatch):
    device = jit_backend.default_device()
    rng = np.random.default_rng(2)
    rows = Tensor.from_numpy(rng.integers(0, 4, 500), device)
    values = Tensor.from_numpy(rng.standard_normal((500, 8)).astype(np.float32) * 1e4, device)
    x = Tensor.from_numpy(np.zeros((4, 8), np.float32), device)
    results = []
    for sort_from in (10**9, 0, 0):
        monkeypatch.setattr(layout_ops, "SORT_FROM", sort_from)
        results.append(x.select_add(0, rows, values).to_numpy())
    assert results[0].tobytes() == results[1].tobytes() == results[2].tobytes()


def test_new_shapes_compile_nothing(jit_backend, monkeypatch):
    # Tuning may rightly pick another reduction strategy (another kernel) for another shape
    # class, and what it picks depends on the timings and cache earlier tests left: here every
    # reduction takes the default, so only the shapes differ between the runs.
    monkeypatch.setattr(autotune, "choose", lambda device, key, candidates, *rest: candidates[0])
    device = jit_backend.default_device()
    runtime = jit_backend.runtime(device)

    def run(n: int) -> None:
        x = Tensor.from_numpy(np.arange(n * 3, dtype=np.float32).reshape(n, 3), device)
        rows = Tensor.from_numpy(np.arange(n)[::-1].copy(), device)
        x.select(0, rows).gather(1, Tensor.from_numpy(np.zeros((n, 2), np.int64), device))
        x.slice_assign([slice(0, 1)], Tensor.from_numpy(np.ones((1, 3), np.float32), device))
        x.scatter_add(0, Tensor.from_numpy(np.zeros((1, 3), np.int64), device), x[:1])
        cat([x, x], 0).to_numpy()

    run(4)
    compiled = set(runtime._kernels)
    run(9)
    run(17)
    assert set(runtime._kernels) - compiled == set()
