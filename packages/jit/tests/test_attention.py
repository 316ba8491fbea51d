"""Attention kernels (``kernels.attention``) against the protocol's default on sizes beyond the
conformance suite's: several key tiles and query workgroups, causal with seq_q != seq_k, masks
(broadcast, a row with no key left), strided inputs and the widest head dim; one launch forward,
two backward; wider heads take the default."""

from __future__ import annotations

import math

import numpy as np
import pytest

from burnish.backend.attention_ops import AttentionOps
from burnish.dtype import bool_, float32
from burnish.jit.kernels import attention as flash
from burnish.tensor_data import TensorData

#: name -> (batch, heads, seq_q, seq_k, head_dim, value_dim, causal, mask shape or None)
CASES = {
    "seq300_dim64": (1, 2, 300, 300, 64, 64, False, None),
    "causal_cross_padding": (2, 1, 300, 257, 64, 32, True, (2, 1, 1, 257)),
    "dim128_mask": (1, 2, 70, 90, 128, 128, False, (1, 2, 70, 90)),
}


def _put(backend, a, dtype=float32):
    return backend.from_data(TensorData(a, dtype), backend.default_device())


def _get(backend, x):
    return backend.into_data(x, x.dtype).to_numpy().astype(np.float64)


def _inputs(backend, case):
    batch, heads, seq_q, seq_k, dim, value_dim, causal, mask_shape = CASES[case]
    rng = np.random.default_rng(len(case))
    q = rng.uniform(-2, 2, (batch, seq_q, heads, dim)).astype(np.float32)
    # q through a view, as nn.MultiHeadAttention passes its heads: [batch, seq, heads, dim]
    # with the middle dims swapped.
    q = backend.permute(_put(backend, q), (0, 2, 1, 3))
    k = _put(backend, rng.uniform(-2, 2, (batch, heads, seq_k, dim)).astype(np.float32))
    v = _put(backend, rng.uniform(-1, 1, (batch, heads, seq_k, value_dim)).astype(np.float32))
    mask = None
    if mask_shape is not None:
        values = rng.random(mask_shape) < 0.2
        values[(0,) * (len(mask_shape) - 1)] = True  # a row (or, broadcast, a key) left out
        mask = _put(backend, values, bool_)
    grad = _put(backend, rng.uniform(-1, 1, (batch, heads, seq_q, value_dim)).astype(
        np.float32))
    return q, k, v, mask, grad, 1.0 / math.sqrt(dim), causal


@pytest.mark.parametrize("case", list(CASES))
def test_kernels_match_the_default(jit_backend, case):
    q, k, v, mask, grad, scale, causal = _inputs(jit_backend, case)
    runtime = jit_backend.runtime(jit_backend.default_device())
    before = runtime.launches
    out, lse = jit_backend.attention(q, k, v, mask, scale, causal, float32)
    assert runtime.launches - before == 1
    expected_out, expected_lse = AttentionOps.attention(jit_backend, q, k, v, mask, scale,
                                                        causal, float32)
    np.testing.assert_allclose(_get(jit_backend, out), _get(jit_backend, expected_out),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_get(jit_backend, lse), _get(jit_backend, expected_lse),
                               rtol=1e-5)
    before = runtime.launches
    grads = jit_backend.attention_backward(q, k, v, mask, out, lse, grad, scale, causal,
                                           float32)
    assert runtime.launches - before == 2
    expected = AttentionOps.attention_backward(jit_backend, q, k, v, mask, expected_out,
                                               expected_lse, grad, scale, causal, float32)
    for got, want, name in zip(grads, expected, ("dq", "dk", "dv")):
        want = _get(jit_backend, want)
        atol = 1e-5 * max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(_get(jit_backend, got), want, rtol=1e-4, atol=atol,
                                   err_msg=name)


def test_wider_heads_take_the_default(jit_backend):
    rng = np.random.default_rng(0)
    dim = flash.MAX_HEAD_DIM + 8
    q = _put(jit_backend, rng.uniform(-1, 1, (1, 1, 3, dim)).astype(np.float32))
    runtime = jit_backend.runtime(jit_backend.default_device())
    before = runtime.launches
    out, _ = jit_backend.attention(q, q, q, None, 0.1, True, float32)
    assert runtime.launches - before > 1
    expected, _ = AttentionOps.attention(jit_backend, q, q, q, None, 0.1, True, float32)
    np.testing.assert_allclose(_get(jit_backend, out), _get(jit_backend, expected), rtol=1e-5,
                               atol=1e-6)


def test_tiles_fit_webgpu_workgroup_memory():
    for dim, value_dim in ((8, 8), (64, 64), (128, 128), (128, 32)):
        keys = flash._tile(float32, dim + value_dim)
        rows = flash._tile(float32, dim + value_dim + 2)
        assert keys * (dim + value_dim) * 4 <= flash.WORKGROUP_BYTES
        assert rows * (dim + value_dim + 2) * 4 <= flash.WORKGROUP_BYTES
        assert keys % flash.UNROLL == 0 and rows % flash.UNROLL == 0 and rows <= flash.ROWS


def test_a_captured_training_step_replays_both_kernels(jit_backend):
    """``burnish.capture`` records the forward and backward kernels like any other: replays of
    a step that differentiates attention give the eager results bitwise."""
    import burnish as bn
    import burnish.functional as F
    from burnish import Tensor

    device = bn.backend(f"autodiff+{jit_backend.name}").default_device()

    def step(q, k, v, mask):
        q, k, v = q.require_grad(), k.require_grad(), v.require_grad()
        out = F.scaled_dot_product_attention(q, k, v, mask, causal=True)
        grads = (out * out).sum().backward()
        return out.detach(), q.grad(grads), k.grad(grads), v.grad(grads)

    captured = bn.capture(step, strict=True)
    rng = np.random.default_rng(7)
    for _ in range(4):
        q, k, v = (Tensor.from_data(rng.uniform(-1, 1, (1, 2, 9, 8)).astype(np.float32),
                                    device=device) for _ in range(3))
        mask = Tensor.from_data(rng.random((1, 1, 1, 9)) < 0.3, device=device)
        for got, want in zip(captured(q, k, v, mask), step(q, k, v, mask)):
            np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    assert sum(s["replays"] for s in captured.stats()) >= 1, captured.stats()


def test_results_of_split_heads_go_back_to_the_model_dim_without_a_copy(jit_backend):
    # q, k and v as nn.MultiHeadAttention passes them (a [batch, seq, d_model] projection's
    # heads, swapped): the output and the gradients are laid out the same way, so that
    # swapping back and merging the heads is a view, not a copy.
    batch, seq, heads, dim = 2, 40, 4, 16
    rng = np.random.default_rng(9)
    q, k, v = (jit_backend.permute(_put(jit_backend, rng.uniform(-1, 1, (
        batch, seq, heads, dim)).astype(np.float32)), (0, 2, 1, 3)) for _ in range(3))
    grad = _put(jit_backend, rng.uniform(-1, 1, (batch, heads, seq, dim)).astype(np.float32))
    out, lse = jit_backend.attention(q, k, v, None, 0.25, True, float32)
    grads = jit_backend.attention_backward(q, k, v, None, out, lse, grad, 0.25, True, float32)
    expected = AttentionOps.attention(jit_backend, q, k, v, None, 0.25, True, float32)[0]
    expected_grads = AttentionOps.attention_backward(jit_backend, q, k, v, None, expected,
                                                     lse, grad, 0.25, True, float32)
    for got, want in zip((out, *grads), (expected, *expected_grads)):
        assert got.strides == q.strides, "laid out as [batch, seq, heads, dim]"
        merged = jit_backend.reshape(jit_backend.permute(got, (0, 2, 1, 3)),
                                     (batch, seq, heads * dim))
        assert merged.buffer is got.buffer, "merging the heads back must be a view"
        np.testing.assert_allclose(_get(jit_backend, got), _get(jit_backend, want), rtol=1e-4,
                                   atol=1e-5)
