"""Reductions under fusion: a reduction of a pending tensor is recorded, and its kernel
evaluates the elementwise ops that make its input as it reads each element (a prologue), so the
input is never stored unless something else references it."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish.fusion import flush, launches, programs
from burnish.jit import lazy
from burnish.jit.kernels import reduce as reduce_kernels


def sample(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def tensors(device, *arrays) -> list[bn.Tensor]:
    return [bn.Tensor.from_data(a, device=device) for a in arrays]


@pytest.mark.parametrize("shape, dim", [((300,), None), ((40, 70), 1), ((40, 70), 0),
                                        ((3, 5000), 1), ((6, 7, 8), 1)])
def test_a_reduction_and_the_ops_before_it_are_one_launch(device, shape, dim):
    a, b = sample(shape, 1), sample(shape, 2)
    x, y = tensors(device, a, b)
    flush(device)
    before = launches(device)
    ran = {id(p): p.launches for p in programs(device)}
    product = x * y
    total = product.sum() if dim is None else product.sum(dim)
    assert lazy.pending(total.primitive)
    del product  # nothing else references it: it stays in registers
    got = total.to_data().to_numpy()
    assert launches(device) == before + 1
    (program,) = [p for p in programs(device) if p.launches != ran.get(id(p), 0)]
    assert program.ops == ("mul", f"sum/{dim}") and program.outputs == ("float32",)
    want = (a.astype(np.float64) * b).sum(axis=dim, keepdims=dim is not None)
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["mean", "prod", "max", "min", "argmax", "argmin"])
def test_every_single_result_reduction_takes_a_prologue(device, op):
    values = sample((9, 33), 3)
    (x,) = tensors(device, values)
    before = launches(device)
    got = getattr((x * 0.5).tanh(), op)(1).to_data().to_numpy()
    assert launches(device) == before + 1
    want = getattr(np, op)(np.tanh(values.astype(np.float64) * 0.5), axis=1)
    if op.startswith("arg"):
        np.testing.assert_array_equal(got.reshape(-1), want)
    else:
        np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-5, atol=1e-6)


def test_any_and_all_of_comparisons_and_int_sums(device):
    values = sample((5, 40), 4)
    (x,) = tensors(device, values)
    np.testing.assert_array_equal((x > 1.5).any(1).to_data().to_numpy().reshape(-1),
                                  (values > 1.5).any(1))
    np.testing.assert_array_equal((x > -3.0).all(1).to_data().to_numpy().reshape(-1),
                                  (values > -3.0).all(1))
    ints = (x * 10.0).int()
    np.testing.assert_array_equal((ints * 3).sum(1).to_data().to_numpy().reshape(-1),
                                  (np.trunc(values * 10).astype(np.int64) * 3).sum(1))


def test_a_referenced_input_is_stored_and_read(device):
    values = sample((16, 24), 5)
    (x,) = tensors(device, values)
    before = launches(device)
    h = (x * 2.0).exp()  # referenced: its kernel stores it, the reduction reads it
    s = h.sum(1)
    np.testing.assert_allclose(s.to_data().to_numpy().reshape(-1),
                               np.exp(values * 2.0).sum(1), rtol=1e-4)
    assert launches(device) == before + 2
    assert not lazy.pending(h.primitive)
    np.testing.assert_allclose(h.to_data().to_numpy(), np.exp(values * 2.0), rtol=1e-5)
    assert launches(device) == before + 2


def test_ops_after_a_reduction_read_it_from_memory(device):
    values = sample((12, 30), 6)
    (x,) = tensors(device, values)
    for _ in range(2):  # planned, then replayed
        # A result of the reduced shape broadcast back, then a reduction of what follows.
        centred = (x * 1.0) - (x * 1.0).mean(1, keepdim=True)
        scaled = centred.sum() * 3.0
        want = values.astype(np.float64) - values.mean(1, keepdims=True)
        np.testing.assert_allclose(centred.to_data().to_numpy(), want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(scaled.to_data().to_numpy(), want.sum() * 3, atol=1e-3)


def test_a_reduction_too_long_for_one_kernel_stores_its_input_first(device, monkeypatch):
    monkeypatch.setattr(reduce_kernels, "FUSED_MAX_RUN", 256)
    values = sample((2, 3000), 7)
    (x,) = tensors(device, values)
    before = launches(device)
    got = (x * x).sum(1).to_data().to_numpy().reshape(-1)
    assert launches(device) - before >= 2  # the product stored, then the reduction
    np.testing.assert_allclose(got, (values.astype(np.float64) ** 2).sum(1), rtol=1e-4)


def test_a_loss_under_autodiff(device):
    auto = bn.backend(f"autodiff+{device.backend.name}")
    values, target = sample((8, 5), 8), sample((8, 5), 9)
    x = bn.Tensor.from_data(values, device=auto.default_device()).require_grad()
    t = bn.Tensor.from_data(target, device=auto.default_device())
    loss = ((x - t) * (x - t)).mean()
    grads = loss.backward()
    np.testing.assert_allclose(loss.to_data().to_numpy(), ((values - target) ** 2).mean(),
                               rtol=1e-5)
    np.testing.assert_allclose(x.grad(grads).to_data().to_numpy(),
                               2 * (values - target) / values.size, rtol=1e-4, atol=1e-6)
