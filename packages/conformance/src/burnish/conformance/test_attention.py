"""Scaled dot-product attention: values against NumPy with masks (broadcast, a query with no key
left), causal (seq_q != seq_k), strided inputs and every float dtype; gradients on autodiff
stacks; errors."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import DTypeError, ShapeError, Tensor, bfloat16, float16, float32, float64
from burnish import functional as F
from burnish.backend.attention_ops import masked_score
from burnish.conformance import reference
from burnish.conformance.compare import accumulated_atol, assert_close
from burnish.conformance.gradcheck import check_gradients, rounded
from burnish.conformance.samples import FLOATS, ids, laid_out, sample

#: name -> (batch, heads, seq_q, seq_k, head_dim, value_dim, mask shape or None, causal, layout)
CASES = {
    "plain_permuted": (1, 2, 5, 5, 8, 8, None, False, "permuted"),
    "mask_cross": (2, 2, 3, 6, 4, 5, (2, 1, 3, 6), False, "contiguous"),
    "causal_cross": (1, 2, 4, 7, 8, 4, None, True, "contiguous"),
    "causal_padding": (2, 1, 6, 6, 4, 4, (6,), True, "strided"),
    # head dims of 16 and 32, keys over two tiles of 64: what tensor-core kernels take
    "causal_wide": (2, 2, 40, 70, 16, 32, None, True, "contiguous"),
}


def _mask(shape: tuple[int, ...] | None, key: object) -> np.ndarray | None:
    """A random mask of ``shape``, with its first row forbidden everywhere (no key left)."""
    if shape is None:
        return None
    mask = np.random.default_rng(abs(hash(str(key))) % 2**32).random(shape) < 0.3
    if len(shape) == 4:
        mask[0, 0, 0, :] = True
    return mask


def _reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
               causal: bool, fill: float) -> np.ndarray:
    """The attention in float64, forbidden scores filled with ``fill`` as burnish does."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, fill, scores)
    if causal:
        seq_q, seq_k = scores.shape[-2:]
        scores = np.where(np.arange(seq_k)[None, :] > np.arange(seq_q)[:, None], fill, scores)
    return reference.softmax(scores, -1) @ v


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.parametrize("case", list(CASES))
def test_attention_values(device, case, dtype):
    batch, heads, seq_q, seq_k, dim, value_dim, mask_shape, causal, layout = CASES[case]
    q = sample((batch, heads, seq_q, dim), dtype, -1.5, 1.5, key=(case, "q"))
    k = sample((batch, heads, seq_k, dim), dtype, -1.5, 1.5, key=(case, "k"))
    v = sample((batch, heads, seq_k, value_dim), dtype, -1.0, 1.0, key=(case, "v"))
    mask = _mask(mask_shape, case)
    out = F.scaled_dot_product_attention(
        laid_out(q, device, dtype, layout), laid_out(k, device, dtype, layout),
        laid_out(v, device, dtype, layout),
        None if mask is None else Tensor.from_data(mask, device), causal=causal)
    fill = masked_score(dtype)
    expected = _reference(*(rounded(x, dtype) for x in (q, k, v)), mask, causal, fill)
    # The weights' relative error follows the scores' absolute error: sum |q| |k| / sqrt(dim).
    spread = np.max(np.abs(rounded(q, dtype)).sum(-1)) * 1.5 / np.sqrt(dim)
    assert_close(out, expected, dtype, atol=accumulated_atol(dtype, 1.0 + 2.0 * spread))


def test_attention_scale_and_mask_as_module_does(device):
    """An explicit scale, and a row with every key forbidden: uniform weights, not NaN."""
    q = sample((1, 1, 3, 4), float32, key="q")
    k = sample((1, 1, 5, 4), float32, key="k")
    v = sample((1, 1, 5, 2), float32, key="v")
    mask = np.zeros((3, 5), bool)
    mask[1] = True
    mask[2, 1:] = True
    out = F.scaled_dot_product_attention(
        *(Tensor.from_data(x, device) for x in (q, k, v)), Tensor.from_data(mask, device),
        scale=0.25)
    scores = q.astype(np.float64) @ k[0, 0].T.astype(np.float64) * 0.25
    weights = reference.softmax(np.where(mask, masked_score(float32), scores), -1)
    np.testing.assert_allclose(weights[0, 0, 1], 0.2)
    assert_close(out, weights @ v.astype(np.float64), float32, atol=1e-5)


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("case", ["mask_cross", "causal_cross", "causal_padding"])
def test_attention_gradients(device, case):
    batch, heads, seq_q, seq_k, dim, value_dim, mask_shape, causal, _ = CASES[case]
    q = sample((batch, heads, seq_q, dim), float64, -1.0, 1.0, key=(case, "q"))
    k = sample((batch, heads, seq_k, dim), float64, -1.0, 1.0, key=(case, "k"))
    v = sample((batch, heads, seq_k, value_dim), float64, -1.0, 1.0, key=(case, "v"))
    mask = _mask(mask_shape, case)
    if mask is None:
        check_gradients(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=causal),
                        q, k, v, device=device, key=case)
    else:
        check_gradients(
            lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, causal=causal),
            q, k, v, mask, device=device, key=case)


#: Half-float gradients, head dims that tensor-core kernels take (multiples of 16), keys over
#: two tiles of 64: causal, with a padding mask that hides every key of the first batch (rows
#: with no key left).
HALF_CASES = {
    "causal_padding_wide": (2, 2, 33, 70, 32, 16, (2, 1, 1, 70), True),
}


def _reference_gradients(q, k, v, mask, causal, fill, grad):
    """``(dq, dk, dv)`` in float64, and for each an upper bound of the absolute values its
    terms add up to (for the tolerance)."""
    scale = 1.0 / np.sqrt(q.shape[-1])
    seq_q, seq_k = q.shape[2], k.shape[2]
    forbidden = np.zeros((seq_q, seq_k), bool)
    if causal:
        forbidden = np.arange(seq_k)[None, :] > np.arange(seq_q)[:, None]
    if mask is not None:
        forbidden = forbidden | mask
    scores = np.where(forbidden, fill, q @ np.swapaxes(k, -1, -2) * scale)
    weights = reference.softmax(scores, -1)
    swap = lambda x: np.swapaxes(x, -1, -2)  # noqa: E731
    dv = swap(weights) @ grad
    dweights = grad @ swap(v)
    delta = (dweights * weights).sum(-1, keepdims=True)
    dscores = np.where(forbidden, 0.0, weights * (dweights - delta)) * scale
    bound_ds = weights * (np.abs(grad) @ swap(np.abs(v)) + np.abs(delta)) * scale
    return ((dscores @ k, bound_ds @ np.abs(k)), (swap(dscores) @ q, swap(bound_ds) @ np.abs(q)),
            (dv, swap(weights) @ np.abs(grad)))


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("dtype", [bfloat16, float16], ids=ids([bfloat16, float16]))
@pytest.mark.parametrize("case", list(HALF_CASES))
def test_attention_gradients_half(device, case, dtype):
    batch, heads, seq_q, seq_k, dim, value_dim, mask_shape, causal = HALF_CASES[case]
    q = sample((batch, heads, seq_q, dim), dtype, -1.5, 1.5, key=(case, "q"))
    k = sample((batch, heads, seq_k, dim), dtype, -1.5, 1.5, key=(case, "k"))
    v = sample((batch, heads, seq_k, value_dim), dtype, -1.0, 1.0, key=(case, "v"))
    grad = sample((batch, heads, seq_q, value_dim), dtype, -1.0, 1.0, key=(case, "g"))
    mask = _mask(mask_shape, case)
    if mask is not None:
        mask[0] = True  # every key of the first batch hidden: its rows have no key left
    tensors = [Tensor.from_data(x, device, dtype).require_grad() for x in (q, k, v)]
    out = F.scaled_dot_product_attention(
        *tensors, None if mask is None else Tensor.from_data(mask, device), causal=causal)
    grads = (out * Tensor.from_data(grad, device, dtype)).sum().backward()
    expected = _reference_gradients(*(rounded(x, dtype) for x in (q, k, v)),
                                    mask, causal, masked_score(dtype), rounded(grad, dtype))
    spread = np.max(np.abs(rounded(q, dtype)).sum(-1)) * 1.5 / np.sqrt(dim)
    for name, tensor, (reference_grad, bound) in zip("qkv", tensors, expected):
        actual = tensor.grad(grads)
        assert actual is not None, f"no gradient for {name}"
        assert_close(actual, reference_grad, dtype,
                     atol=accumulated_atol(dtype, (1.0 + 2.0 * spread) * bound))


def test_attention_errors(device):
    q = Tensor.zeros([1, 2, 3, 4], device=device)
    with pytest.raises(ShapeError, match=r"k must be \[1, 2, seq_k, 4\]"):
        F.scaled_dot_product_attention(q, Tensor.zeros([1, 2, 3, 5], device=device), q)
    with pytest.raises(ShapeError, match="v must be"):
        F.scaled_dot_product_attention(q, q, Tensor.zeros([1, 2, 4, 4], device=device))
    with pytest.raises(ShapeError, match="must be \\[batch, heads, seq, dim\\]"):
        F.scaled_dot_product_attention(q.reshape([2, 3, 4]), q, q)
    with pytest.raises(ShapeError, match="does not broadcast to the scores"):
        F.scaled_dot_product_attention(q, q, q, Tensor.zeros([4, 3], device=device).bool())
    with pytest.raises(DTypeError, match="mask must be bool"):
        F.scaled_dot_product_attention(q, q, q, Tensor.zeros([3, 3], device=device))
