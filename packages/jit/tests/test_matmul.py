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


@pytest.mark.parametrize("layout", ["plain", "lhs_transposed", "rhs_transposed", "both"])
@pytest.mark.parametrize("m, k, n", [(70, 1000, 10), (3, 300, 1), (1, 513, 90)])
def test_the_split_kernel_takes_thin_products_with_a_long_inner_dim(jit_backend, layout,
                                                                    m, k, n):
    # Too thin to tile, K long: several invocations share each dot product. The element
    # count is not a multiple of a workgroup's outputs: the last workgroup stores fewer.
    a_shape, b_shape = (m, k), (k, n)
    layout_of = matmul_kernels.Layout(_FakeOperand(a_shape), _FakeOperand(b_shape), ())
    assert layout_of.split and layout_of.key()[0] == "matmul_split"
    device = jit_backend.default_device()
    rng = np.random.default_rng(3)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    x = (Tensor.from_numpy(np.ascontiguousarray(a.T), device).T
         if layout in ("lhs_transposed", "both") else Tensor.from_numpy(a, device))
    y = (Tensor.from_numpy(np.ascontiguousarray(b.T), device).T
         if layout in ("rhs_transposed", "both") else Tensor.from_numpy(b, device))
    np.testing.assert_allclose((x @ y).to_numpy().astype(np.float64),
                               a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("dtype", [float16, int32, int64], ids=str)
def test_the_split_kernel_with_batches_and_other_dtypes(jit_backend, dtype):
    device = jit_backend.default_device()
    if dtype not in jit_backend.dtypes(device):
        pytest.skip(f"{dtype} is not available on {device}")
    rng = np.random.default_rng(4)
    if dtype.is_int:
        a = rng.integers(-50, 50, (2, 1, 5, 400)).astype(dtype.numpy)
        b = rng.integers(-50, 50, (3, 400, 4)).astype(dtype.numpy)
    else:
        a = rng.standard_normal((2, 1, 5, 400)).astype(dtype.numpy)
        b = rng.standard_normal((3, 400, 4)).astype(dtype.numpy)
    out = (Tensor.from_numpy(a, device) @ Tensor.from_numpy(b, device)).to_numpy()
    expected = a.astype(np.float64) @ b.astype(np.float64)
    if dtype.is_int:
        np.testing.assert_array_equal(out, expected.astype(dtype.numpy))
    else:
        np.testing.assert_allclose(out.astype(np.float64), expected, rtol=2e-2, atol=0.5)


RUNS = [matmul_kernels.LARGE_DEFAULT.name + matmul_kernels.RUNS_SUFFIX,
        matmul_kernels.TILINGS[0].name + matmul_kernels.RUNS_SUFFIX]


@pytest.fixture
def in_runs(request, monkeypatch):
    """Force the tiling ``request.param``, which splits the inner dim, after checking that
    the product offers it (a short ``MIN_RUN`` lets small products split)."""
    monkeypatch.setattr(matmul_kernels, "MIN_RUN", 64)

    def choose(device, key, candidates, run, sync):
        if not key.startswith("matmul/"):
            return candidates[0]  # the reduction adding the runs up
        assert request.param in candidates, candidates
        return request.param
    monkeypatch.setattr(autotune, "choose", choose)
    return request.param


@pytest.mark.parametrize("in_runs", RUNS, indirect=True)
@pytest.mark.parametrize("layout", ["plain", "lhs_transposed", "rhs_transposed", "both"])
def test_few_tiles_sum_their_inner_dim_in_runs(jit_backend, in_runs, layout):
    # 1000 = runs of 80 (or 64) and a short last one; the row and column counts cut tiles.
    m, k, n = 40, 1000, 150
    tiling = matmul_kernels._BY_NAME[in_runs.removesuffix(matmul_kernels.RUNS_SUFFIX)]
    tiles = -(-m // tiling.tm) * -(-n // tiling.tn)
    runs, length = matmul_kernels._runs(tiles, k, tiling.tk)
    assert runs > 2 and k % length
    device = jit_backend.default_device()
    rng = np.random.default_rng(5)
    a = rng.integers(-20, 20, (m, k)).astype(np.int32)
    b = rng.integers(-20, 20, (k, n)).astype(np.int32)
    x = (Tensor.from_numpy(np.ascontiguousarray(a.T), device).T
         if layout in ("lhs_transposed", "both") else Tensor.from_numpy(a, device))
    y = (Tensor.from_numpy(np.ascontiguousarray(b.T), device).T
         if layout in ("rhs_transposed", "both") else Tensor.from_numpy(b, device))
    np.testing.assert_array_equal((x @ y).to_numpy(), a.astype(np.int64) @ b)


@pytest.mark.parametrize("in_runs", RUNS[:1], indirect=True)
def test_runs_of_broadcast_batches(jit_backend, in_runs):
    device = jit_backend.default_device()
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 1, 40, 700)).astype(np.float32)
    b = rng.standard_normal((3, 700, 30)).astype(np.float32)
    y = Tensor.from_numpy(b[:1], device).expand((3, 700, 30))
    out = (Tensor.from_numpy(a, device) @ y).to_numpy()
    expected = a.astype(np.float64) @ np.broadcast_to(b[:1], (3, 700, 30))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4 * np.sqrt(700))


@pytest.mark.parametrize("in_runs", RUNS[:1], indirect=True)
def test_half_float_runs_round_once(jit_backend, in_runs, monkeypatch):
    """Runs of a half-float product are summed in float32 and rounded once: a row summing to
    +2049 over its first run of 512 and -2047 over its second (2049 is no float16) gives
    exactly 2, where runs rounded to float16 first (2048 and -2048) would give 0."""
    device = jit_backend.default_device()
    if float16 not in jit_backend.dtypes(device):
        pytest.skip(f"float16 is not available on {device}")
    monkeypatch.setattr(matmul_kernels, "MIN_RUN", 512)
    row = np.concatenate([np.full(512, 4.0), np.full(512, -4.0)])
    row[:2], row[512:514] = 4.5, -3.5
    assert row[:512].sum() == 2049 and row[512:].sum() == -2047
    a = np.broadcast_to(row.astype(np.float16), (32, 1024)).copy()
    b = np.ones((1024, 32), np.float16)
    out = (Tensor.from_numpy(a, device) @ Tensor.from_numpy(b, device)).to_numpy()
    np.testing.assert_array_equal(out, np.full((32, 32), 2.0, np.float16))


class _FakeOperand:
    """Just what ``Layout`` reads of an operand: a plain float32 layout of ``shape``."""

    def __init__(self, shape):
        self.shape, self.strides, self.offset = shape, (shape[1], 1), 0
        self.dtype = float32
