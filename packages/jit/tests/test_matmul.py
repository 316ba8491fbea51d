"""The tiled matmul beyond what the conformance suite reaches: every tile shape autotune may
choose, on operands read through transposed and broadcast layouts, with edges that cut tiles,
for floats, half floats and wrapping ints."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float16, float32, int8, int32, int64
from burnish.jit import autotune
from burnish.jit.kernels import matmul as matmul_kernels

# M, K, N: none a multiple of any tile size, and more than one tile along every dim.
M, K, N = 131, 37, 70
NAMES = [t.name for t in matmul_kernels.TILINGS]


@pytest.fixture
def tiling(request, monkeypatch):
    """Force the tile shape ``request.param`` (autotune then times nothing)."""
    monkeypatch.setattr(autotune, "choose", lambda device, key, candidates, run, sync:
                        request.param)
    return request.param


def _operands(dtype, rng):
    if dtype.is_int:
        return (rng.integers(-100, 100, (M, K)).astype(dtype.numpy),
                rng.integers(-100, 100, (K, N)).astype(dtype.numpy))
    return (rng.standard_normal((M, K)).astype(dtype.numpy),
            rng.standard_normal((K, N)).astype(dtype.numpy))


def _expected(a, b, dtype):
    if dtype.is_int:
        return (a.astype(np.int64) @ b.astype(np.int64)).astype(dtype.numpy)
    return a.astype(np.float64) @ b.astype(np.float64)


def _check(out: Tensor, expected: np.ndarray, dtype) -> None:
    got = out.to_numpy()
    if dtype.is_int:
        np.testing.assert_array_equal(got, expected)
    else:
        tolerance = 2e-2 if dtype == float16 else 1e-4
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tolerance,
                                   atol=tolerance * np.sqrt(K))


@pytest.mark.parametrize("tiling", NAMES, indirect=True)
@pytest.mark.parametrize("layout", ["plain", "lhs_transposed", "rhs_transposed", "both"])
def test_every_tile_shape_reads_every_layout(jit_backend, tiling, layout):
    device = jit_backend.default_device()
    a, b = _operands(float32, np.random.default_rng(0))
    x = (Tensor.from_numpy(np.ascontiguousarray(a.T), device).T
         if layout in ("lhs_transposed", "both") else Tensor.from_numpy(a, device))
    y = (Tensor.from_numpy(np.ascontiguousarray(b.T), device).T
         if layout in ("rhs_transposed", "both") else Tensor.from_numpy(b, device))
    _check(x @ y, _expected(a, b, float32), float32)


@pytest.mark.parametrize("tiling", NAMES, indirect=True)
def test_every_tile_shape_broadcasts_batches(jit_backend, tiling):
    device = jit_backend.default_device()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 1, M, K)).astype(np.float32)
    b = rng.standard_normal((3, K, N)).astype(np.float32)
    # The rhs's batch is an expanded view: stride 0, no copy.
    y = Tensor.from_numpy(b[:1], device).expand((3, K, N))
    out = Tensor.from_numpy(a, device) @ y
    _check(out, a.astype(np.float64) @ np.broadcast_to(b[:1], (3, K, N)), float32)


@pytest.mark.parametrize("dtype", [float16, int8, int32, int64], ids=str)
def test_tiled_products_of_other_dtypes(jit_backend, dtype):
    device = jit_backend.default_device()
    if dtype not in jit_backend.dtypes(device):
        pytest.skip(f"{dtype} is not available on {device}")
    a, b = _operands(dtype, np.random.default_rng(2))
    out = Tensor.from_numpy(a, device) @ Tensor.from_numpy(b, device)
    _check(out, _expected(a, b, dtype), dtype)
