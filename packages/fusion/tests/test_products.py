"""Products and optimizer updates under fusion: the elementwise ops after a matrix product run
in the product's kernel, and an optimizer step's updates share launches."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import functional as F
from burnish.fusion import flush, launches, programs
from burnish.jit import lazy
from burnish.jit.kernels.optim import updates_per_launch


def sample(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def tensors(device, *arrays) -> list[bn.Tensor]:
    return [bn.Tensor.from_data(a, device=device) for a in arrays]


@pytest.mark.parametrize("m, k, n", [(64, 96, 80), (5, 7, 3), (33, 70, 130)])
def test_a_product_and_the_ops_after_it_are_one_launch(device, m, k, n):
    values, weight, bias = sample((m, k)), sample((k, n), 1), sample((n,), 2)
    x, w, b = tensors(device, values, weight, bias)
    before = launches(device)
    y = F.relu(x @ w + b)  # the tiled kernel for the first shape, the plain one for the others
    assert lazy.pending(y.primitive)
    got = y.to_data().to_numpy()
    assert launches(device) == before + 1
    assert programs(device)[-1].ops == ("matmul", "add", "clamp_True_False")
    expected = np.maximum(values.astype(np.float64) @ weight + bias, 0)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_a_pending_operand_is_computed_first(device):
    values, weight = sample((16, 24), 3), sample((24, 8), 4)
    x, w = tensors(device, values, weight)
    before = launches(device)
    h = (x * 0.5).tanh()
    y = (h @ w) * 2.0
    got = y.to_data().to_numpy()
    assert launches(device) == before + 2  # h's kernel, then the product's
    np.testing.assert_allclose(got, np.tanh(values * 0.5) @ weight * 2, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(h.to_data().to_numpy(), np.tanh(values * 0.5), rtol=1e-5)
    assert launches(device) == before + 2  # h was stored for the product: read, not rerun


def test_batched_products_with_transposed_operands_and_a_kept_product(device):
    a, c = sample((3, 20, 30), 5), sample((20, 30), 6)
    x, w = tensors(device, a, c)
    p = x @ w.transpose(0, 1)  # kept: stored by the same kernel
    y = (p - 1.0).abs()
    expected = a.astype(np.float64) @ c.T
    np.testing.assert_allclose(y.to_data().to_numpy(), np.abs(expected - 1), rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(p.to_data().to_numpy(), expected, rtol=1e-4, atol=1e-4)


def test_a_product_fusion_declines_runs_as_without_fusion(device, monkeypatch):
    runtime = device.backend.inner.runtime(device.native)
    monkeypatch.setattr(type(runtime), "fuses_product", lambda self, dtype, macs: False)
    values, weight = sample((8, 12), 7), sample((12, 4), 8)
    x, w = tensors(device, values, weight)
    p = x @ w
    assert not lazy.pending(p.primitive)  # computed at once, as the inner backend does
    np.testing.assert_allclose((p + 1.0).to_data().to_numpy(), values @ weight + 1, rtol=1e-4,
                               atol=1e-5)


def test_a_lone_product_runs_the_generated_kernel(device, monkeypatch):
    """A recorded product flushed alone, and one predicted to be (run at once), both take
    burnish.jit's kernel: the runtime's vendor library is never asked."""
    runtime = device.backend.inner.runtime(device.native)
    asked = []
    monkeypatch.setattr(type(runtime), "library_matmul",
                        lambda self, a, b, out, batch: asked.append(a.shape) or False)
    values, weight = sample((24, 40), 11), sample((40, 16), 12)
    x, w = tensors(device, values, weight)
    expected = values.astype(np.float64) @ weight
    flush(device)
    for _ in range(3):  # flushed alone, then predicted alone
        p = x @ w
        np.testing.assert_allclose(p.to_data().to_numpy(), expected, rtol=1e-4, atol=1e-4)
    assert not lazy.pending(p.primitive) and asked == []
    plain_x, plain_w = tensors(device.native, values, weight)
    assert (plain_x @ plain_w).shape == (24, 16)
    assert asked == [(24, 40)]  # the inner backend on its own still offers it to the library


def test_a_lone_product_of_few_tiles_takes_the_tuned_path(device, monkeypatch):
    """A product flushed alone whose tiles are too few to fill the device (a weight gradient:
    a long inner dim) runs through the product's own tuned path, which may split its inner
    dim into runs; the fused kernel's one tiling never does."""
    from burnish.jit import autotune
    from burnish.jit.kernels import matmul as matmul_kernels

    monkeypatch.setattr(matmul_kernels, "MIN_RUN", 64)
    chosen = []

    def choose(device_name, key, candidates, run, sync):
        if not key.startswith("matmul/"):
            return candidates[0]
        chosen.append(candidates[-1])
        return candidates[-1]  # the last one offered splits into runs
    monkeypatch.setattr(autotune, "choose", choose)
    runtime = device.backend.inner.runtime(device.native)
    values, weight = sample((1000, 40), 13), sample((1000, 72), 14)
    x, w = tensors(device, values, weight)
    grad = (x * 2.0).transpose(0, 1) @ w  # pending operand: the product is recorded
    got = grad.to_data().to_numpy()
    np.testing.assert_allclose(got, 2 * values.T.astype(np.float64) @ weight, rtol=1e-4,
                               atol=1e-3)
    assert chosen and chosen[0].endswith(matmul_kernels.RUNS_SUFFIX)
    assert any(key[0] == "matmul_runs" for key in runtime._kernels)


SHAPES = [(7, 5), (5,), (64, 33), (33,), (3,), (1,)]
SCALARS = {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-3, "step_size": 0.25}


def test_an_optimizer_steps_updates_share_launches(device):
    operands = [[sample(shape, seed + 10 * j) for j in range(4)]
                for seed, shape in enumerate(SHAPES)]
    for moments in operands:
        moments[3] = np.abs(moments[3])
    per_launch = updates_per_launch(device.backend.inner.runtime(device.native))
    expected = [F.adam_step(*tensors(device.native, *values), **SCALARS)
                for values in operands]  # the inner backend, one kernel per update
    inputs = [tensors(device, *values) for values in operands]
    flush(device)
    before = launches(device)
    results = [F.adam_step(*four, **SCALARS) for four in inputs]
    if per_launch >= 2:  # deferred until something reads them
        assert launches(device) == before
        assert all(lazy.pending(r.primitive) for r in results)
    results[0].to_data()  # reading one computes them all
    assert not any(lazy.pending(r.primitive) for r in results)
    wanted = -(-len(SHAPES) // per_launch) if per_launch >= 2 else len(SHAPES)
    assert launches(device) - before == wanted
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got.to_data().to_numpy(), want.to_data().to_numpy())


def test_a_product_group_too_large_for_one_launch_still_computes(device):
    values, weight = sample((6, 5), 9), sample((5, 4), 10)
    biases = [sample((4,), 11 + j) for j in range(70)]  # more buffers than a launch binds
    x, w, *bs = tensors(device, values, weight, *biases)
    y = x @ w
    expected = values.astype(np.float64) @ weight
    for b, bias in zip(bs, biases):
        y, expected = y + b, expected + bias
    np.testing.assert_allclose(y.to_data().to_numpy(), expected, rtol=1e-4, atol=1e-4)


def test_broadcast_batch_dims_and_an_int_product(device):
    a, c, d = sample((2, 1, 3, 4), 90), sample((5, 4, 6), 91), sample((5, 3, 6), 92)
    x, w, z = tensors(device, a, c, d)
    y = (x @ w) * z  # the epilogue reads z at the (2, 5, 3, 6) result's coordinates
    expected = (a.astype(np.float64) @ c) * d
    np.testing.assert_allclose(y.to_data().to_numpy(), expected, rtol=1e-4, atol=1e-4)
    ints = np.arange(12, dtype=np.int32).reshape(3, 4)
    i, j = tensors(device, ints, ints.T.copy())
    got = ((i @ j) - 7).to_data().to_numpy()
    np.testing.assert_array_equal(got, ints @ ints.T - 7)
