"""Softmax, log_softmax and their gradients as row kernels: one launch each up to the bound on a
row, the protocol's composition beyond it, and lazy inputs of ``burnish.fusion`` computed first."""

from __future__ import annotations

import numpy as np
import pytest

from burnish.backend.activation_ops import ActivationOps
from burnish.dtype import float32
from burnish.jit.kernels.reduce import MAX_ITERATIONS
from burnish.jit.kernels.softmax import MAX_LENGTH
from burnish.tensor_data import TensorData

OPS = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward"]


def _put(backend, a):
    return backend.from_data(TensorData(a, float32), backend.default_device())


def _get(backend, x):
    return backend.into_data(x, x.dtype).to_numpy().astype(np.float64)


def _call(backend, op, a, dim, permuted=False):
    """``op`` of ``a`` (and, for the gradients, of an upstream gradient) along ``dim``, and the
    kernels it launched."""
    rng = np.random.default_rng(a.size)
    if permuted:  # the values of ``a`` read through a transposed view
        inputs = [backend.permute(_put(backend, np.ascontiguousarray(a.T)), (1, 0))]
    else:
        inputs = [_put(backend, a)]
    if op.endswith("backward"):
        inputs.append(_put(backend, rng.uniform(-1, 1, a.shape).astype(np.float32)))
    runtime = backend.runtime(backend.default_device())
    before = runtime.launches
    out = getattr(backend, op)(*inputs, dim, float32)
    return out, runtime.launches - before, inputs


def _default(backend, op, inputs, dim):
    """The protocol's composition of ``op`` (the reference the kernels must agree with)."""
    return getattr(ActivationOps, op)(backend, *inputs, dim, float32)


@pytest.mark.parametrize("permuted", [False, True])
@pytest.mark.parametrize(("shape", "dim"), [((64, 10), 1), ((64, 10), 0), ((1, MAX_LENGTH), 1)],
                         ids=str)
@pytest.mark.parametrize("op", OPS)
def test_one_launch_up_to_the_bound(jit_backend, op, shape, dim, permuted):
    a = np.random.default_rng(3).uniform(-6, 6, shape).astype(np.float32)
    if op.endswith("backward") and op.startswith("log"):
        a = np.log(np.random.default_rng(4).dirichlet(np.ones(shape[dim]), shape[1 - dim]))
        a = np.ascontiguousarray(a if dim == 1 else a.T).astype(np.float32)
    out, launches, inputs = _call(jit_backend, op, a, dim, permuted)
    assert launches == 1
    assert out.shape == shape and out.is_contiguous()
    expected = _get(jit_backend, _default(jit_backend, op, inputs, dim))
    # Gradients cancel terms as large as the row's values (|a| up to 6, sums of ten): the
    # error is float32's rounding of those terms, whatever order each side sums in.
    atol = 1e-6 * max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(_get(jit_backend, out), expected, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("op", OPS)
def test_composition_past_the_bound(jit_backend, op):
    a = np.random.default_rng(5).uniform(-6, 6, (2, MAX_LENGTH + 1)).astype(np.float32)
    out, launches, inputs = _call(jit_backend, op, a, 1)
    assert launches > 1
    expected = _get(jit_backend, _default(jit_backend, op, inputs, 1))
    np.testing.assert_allclose(_get(jit_backend, out), expected, rtol=1e-5, atol=1e-6)


def test_the_bound_keeps_walks_within_the_loop_limit():
    # Three walks of a row (the forward ops' passes) in one invocation: lavapipe ends longer
    # loops silently, so this must hold wherever MAX_LENGTH is tuned.
    assert 3 * MAX_LENGTH <= MAX_ITERATIONS


def test_pending_inputs_under_fusion(jit_backend):
    import burnish

    fused = burnish.backend(f"fusion+{jit_backend.name}")
    inner = fused.inner
    device = fused.default_device()
    a = np.random.default_rng(6).uniform(-3, 3, (8, 5)).astype(np.float32)
    x = fused.from_data(TensorData(a, float32), device)
    doubled = fused.mul_scalar(x, 2.0, float32)  # recorded, not computed yet
    out = fused.log_softmax(doubled, 1, float32)
    grad = fused.log_softmax_backward(out, fused.add_scalar(x, 1.0, float32), 1, float32)
    shifted = 2.0 * a - np.max(2.0 * a, axis=1, keepdims=True)
    expected = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    np.testing.assert_allclose(_get(inner, out), expected, rtol=1e-5, atol=1e-6)
    upstream = a + 1.0
    expected_grad = upstream - np.exp(expected) * np.sum(upstream, axis=1, keepdims=True)
    np.testing.assert_allclose(_get(inner, grad), expected_grad, rtol=1e-5, atol=1e-5)
