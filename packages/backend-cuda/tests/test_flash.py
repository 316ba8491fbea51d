"""Tensor-core attention (burnish.cuda.flash) against burnish.jit's attention kernels on the same
GPU: values and gradients in bfloat16 and float16, causal, masks (broadcast, rows with no key
left), views, head dims from 16 to 128 and sequences that end inside a tile. Skips without a
GPU; the conformance suite checks both against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish import functional as F
from burnish.errors import UnsupportedError


@pytest.fixture(scope="module")
def device():
    try:
        backend = bn.backend("autodiff+cuda")
        backend.devices()
    except UnsupportedError as error:
        pytest.skip(f"needs an NVIDIA GPU with CuPy ({error})")
    return backend.default_device()


def _run(device, arrays, mask, causal, dtype, layout, monkeypatch, flash):
    monkeypatch.setenv("BURNISH_CUDA_FLASH", "1" if flash else "0")
    q, k, v, grad = arrays
    tensors = []
    for x in (q, k, v):
        if layout == "bshd":  # [batch, heads, seq, dim] views of [batch, seq, heads, dim]
            t = Tensor.from_data(np.ascontiguousarray(x.transpose(0, 2, 1, 3)), device)
            t = t.cast(dtype).permute(0, 2, 1, 3)
        else:
            t = Tensor.from_data(x, device).cast(dtype)
        tensors.append(t.require_grad())
    out = F.scaled_dot_product_attention(
        *tensors, None if mask is None else Tensor.from_data(mask, device), causal=causal)
    grads = (out * Tensor.from_data(grad, device).cast(dtype)).sum().backward()
    return [out.cast("float32").to_numpy()] + [
        t.grad(grads).cast("float32").to_numpy() for t in tensors]


CASES = {  # batch, heads, seq_q, seq_k, dim, value_dim, mask shape, causal, layout
    "causal": (2, 3, 100, 77, 64, 64, None, True, "plain"),
    "causal_views": (2, 4, 130, 130, 64, 64, None, True, "bshd"),
    "wide_heads": (1, 2, 70, 200, 128, 128, None, False, "plain"),
    "mixed_dims": (1, 2, 90, 90, 32, 128, None, True, "plain"),
    "narrow": (2, 2, 17, 33, 16, 16, None, False, "plain"),
    "padding": (2, 2, 100, 150, 64, 64, (2, 1, 1, 150), False, "plain"),
    "mask_causal": (1, 2, 130, 130, 32, 32, (1, 1, 130, 130), True, "plain"),
    "full_mask": (1, 2, 70, 90, 128, 64, (1, 2, 70, 90), False, "bshd"),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", list(CASES))
def test_tensor_cores_match_the_jit_kernels(device, case, dtype, monkeypatch):
    from burnish.cuda import flash

    batch, heads, seq_q, seq_k, dim, value_dim, mask_shape, causal, layout = CASES[case]
    rng = np.random.default_rng(abs(hash(case)) % 2**32)
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in (
        (batch, heads, seq_q, dim), (batch, heads, seq_k, dim), (batch, heads, seq_k, value_dim),
        (batch, heads, seq_q, value_dim))]
    mask = None
    if mask_shape is not None:
        mask = rng.random(mask_shape) < 0.3
        mask[0] = True if mask_shape[2] == 1 else mask[0]  # padding: the first batch has no key
        mask.reshape(-1, mask_shape[-1])[-1, :] = True  # a row with no key left
    calls = []
    for name in ("attention", "attention_backward"):
        real = getattr(flash, name)
        monkeypatch.setattr(flash, name, lambda *a, real=real, name=name: (
            calls.append(name), real(*a))[1])
    tensor_cores = _run(device, arrays, mask, causal, dtype, layout, monkeypatch, flash=True)
    assert calls == ["attention", "attention_backward"], f"tensor-core kernels ran: {calls}"
    jit = _run(device, arrays, mask, causal, dtype, layout, monkeypatch, flash=False)
    tolerance = 2e-2 if dtype == "bfloat16" else 3e-3
    for name, a, b in zip(("out", "dq", "dk", "dv"), tensor_cores, jit):
        error = np.abs(a - b).max() / max(np.abs(b).max(), 1e-6)
        assert error < tolerance, f"{name}: relative error {error:.2e} (tolerance {tolerance})"
