"""Convolutions beyond what the conformance suite reaches: every arrangement of stride, padding,
dilation and groups over 1, 2 and 3 spatial dims, transposed too, from strided inputs, agrees
with NumPy whether the batch's patch matrix is gathered whole or in chunks of a few samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from burnish import Tensor, functional
from burnish.jit.kernels import conv as conv_kernels
from burnish.jit.kernels import matmul as matmul_kernels
from burnish.jit.kernels.matmul import TILINGS

# x shape, weight shape, stride, padding, dilation, groups, output padding (transposed only),
# whether x is handed over with its last two dims swapped (a strided view).
CASES = {
    "1d": ((3, 4, 11), (6, 2, 3), (2,), (1,), (2,), 2, None, False),
    "2d": ((3, 4, 9, 8), (5, 4, 3, 2), (2, 1), (1, 0), (1, 2), 1, None, True),
    "3d": ((2, 3, 5, 4, 6), (4, 3, 2, 3, 2), (1, 2, 1), (1, 0, 1), (2, 1, 1), 1, None, False),
    "transposed 1d": ((3, 4, 5), (4, 3, 3), (3,), (1,), (2,), 1, (1,), False),
    "transposed 2d": ((3, 4, 4, 5), (4, 3, 3, 2), (2, 3), (1, 0), (3, 1), 2, (1, 0), True),
    "transposed 3d": ((2, 2, 3, 4, 3), (2, 3, 2, 2, 3), (2, 1, 2), (0, 1, 1), (1, 1, 2), 1,
                      (1, 0, 0), False),
}


def reference(x, w, bias, stride, padding, dilation, groups, output_padding):
    """The convolution (``output_padding`` None) or transposed convolution, tap by tap."""
    batch, channels, *size = x.shape
    kernel = w.shape[2:]
    per_group = channels // groups
    if output_padding is None:
        out_channels = w.shape[0]
        out_size = [(n + 2 * p - d * (k - 1) - 1) // s + 1
                    for n, k, s, p, d in zip(size, kernel, stride, padding, dilation)]
        padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
        out = np.zeros((batch, out_channels, *out_size))
        out_per_group = out_channels // groups
        for tap in np.ndindex(*kernel):
            window = tuple(slice(t * d, t * d + s * (o - 1) + 1, s)
                           for t, d, s, o in zip(tap, dilation, stride, out_size))
            patch = padded[(slice(None), slice(None)) + window]
            for g in range(groups):
                outs, ins = slice(g * out_per_group, (g + 1) * out_per_group), \
                    slice(g * per_group, (g + 1) * per_group)
                out[:, outs] += np.einsum("oc,bc...->bo...", w[(outs, slice(None)) + tap],
                                          patch[:, ins])
    else:
        out_per_group = w.shape[1]
        out_size = [(n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, k, s, p, d, op in
                    zip(size, kernel, stride, padding, dilation, output_padding)]
        # Scatter every input element to every tap, then crop the padding off.
        full = np.zeros((batch, groups * out_per_group,
                         *[p + o + p for p, o in zip(padding, out_size)]))
        for tap in np.ndindex(*kernel):
            window = tuple(slice(t * d, t * d + s * (n - 1) + 1, s)
                           for t, d, s, n in zip(tap, dilation, stride, size))
            for g in range(groups):
                outs, ins = slice(g * out_per_group, (g + 1) * out_per_group), \
                    slice(g * per_group, (g + 1) * per_group)
                full[(slice(None), outs) + window] += np.einsum(
                    "co,bc...->bo...", w[(ins, slice(None)) + tap], x[:, ins])
        out = full[(slice(None), slice(None)) +
                   tuple(slice(p, p + o) for p, o in zip(padding, out_size))]
    return out + bias.reshape((1, -1) + (1,) * len(size))


@pytest.mark.parametrize("chunk", ["whole", "two samples", "one sample"])
@pytest.mark.parametrize("case", list(CASES))
def test_conv_matches_numpy(jit_backend, case, chunk, monkeypatch):
    x_shape, w_shape, stride, padding, dilation, groups, output_padding, swapped = CASES[case]
    device = jit_backend.default_device()
    rng = np.random.default_rng(0)
    # Small integers: every sum is exact in float32, whatever order the GEMM adds in.
    x = rng.integers(-3, 4, x_shape).astype(np.float32)
    w = rng.integers(-3, 4, w_shape).astype(np.float32)
    transposed = output_padding is not None
    bias = rng.integers(-3, 4, w_shape[1] * groups if transposed else w_shape[0])
    bias = bias.astype(np.float32)
    expected = reference(x, w, bias, stride, padding, dilation, groups, output_padding)

    # The patch matrix holds channels * taps * positions elements a sample.
    sample = x_shape[1] * math.prod(w_shape[2:]) * math.prod(expected.shape[2:])
    if chunk != "whole":
        monkeypatch.setattr(conv_kernels, "COLUMN_LIMIT", sample * (2 if "two" in chunk else 1))
    if swapped:
        xt = Tensor.from_numpy(np.ascontiguousarray(x.swapaxes(-1, -2)), device)
        xt = xt.swap_dims(-1, -2)
    else:
        xt = Tensor.from_numpy(x, device)
    wt, bt = Tensor.from_numpy(w, device), Tensor.from_numpy(bias, device)
    if transposed:
        out = functional.conv_transpose(xt, wt, bt, stride, padding, output_padding, dilation,
                                        groups)
    else:
        out = functional.conv(xt, wt, bt, stride, padding, dilation, groups)
    np.testing.assert_allclose(out.to_numpy(), expected, rtol=0, atol=0)


# Products large enough for the implicit kernels, forward, input gradient and weight gradient
# alike (the explicit form must agree).
IMPLICIT_CASES = {
    "1d": ((4, 32, 64), (32, 16, 3), (2,), (1,), (2,), 2, None, False),
    "2d": ((2, 16, 9, 10), (24, 16, 3, 3), (1, 2), (1, 1), (1, 1), 1, None, True),
    "2d groups dilation": ((2, 64, 12, 12), (64, 16, 3, 3), (2, 1), (2, 0), (2, 1), 4, None,
                           False),
    "3d": ((2, 16, 6, 5, 6), (20, 16, 2, 3, 2), (1, 2, 1), (1, 0, 1), (2, 1, 1), 1, None,
           False),
    "transposed 2d": ((2, 16, 5, 6), (16, 20, 3, 2), (2, 3), (1, 0), (2, 1), 1, (1, 0), True),
    "transposed 1d groups": ((3, 32, 40), (32, 16, 3), (3,), (1,), (2,), 2, (1,), False),
}


def _integers(rng, shape):
    return rng.integers(-3, 4, shape).astype(np.float32)


@pytest.mark.parametrize("case", list(IMPLICIT_CASES))
def test_implicit_conv_matches_numpy(jit_backend, case, monkeypatch):
    """The implicit kernels (no patch matrix) give NumPy's values, forward and, through
    autodiff, for the input and weight gradients, as the explicit form does."""
    _check_implicit(jit_backend, case, monkeypatch)


@pytest.mark.parametrize("case", ["2d", "transposed 2d"])
@pytest.mark.parametrize("tiling", [t.name for t in TILINGS[1:]])
def test_implicit_conv_every_tiling(jit_backend, tiling, case, monkeypatch):
    """Each tile shape (its depth sets how far the loaders' running positions step, and
    whether a step wraps past a whole kernel window) gives the same values."""
    monkeypatch.setattr(matmul_kernels, "_candidates", lambda *shape: [tiling])
    _check_implicit(jit_backend, case, monkeypatch)


def _check_implicit(jit_backend, case, monkeypatch):
    import burnish

    x_shape, w_shape, stride, padding, dilation, groups, output_padding, swapped = \
        IMPLICIT_CASES[case]
    transposed = output_padding is not None
    rng = np.random.default_rng(1)
    x, w = _integers(rng, x_shape), _integers(rng, w_shape)
    bias = _integers(rng, w_shape[1] * groups if transposed else w_shape[0])
    expected = reference(x, w, bias, stride, padding, dilation, groups, output_padding)
    grad_out = _integers(rng, expected.shape)
    device = burnish.backend(f"autodiff+{jit_backend.name}").default_device()

    def run():
        if swapped:
            xt = Tensor.from_numpy(np.ascontiguousarray(x.swapaxes(-1, -2)), device)
            xt = xt.swap_dims(-1, -2).require_grad()
        else:
            xt = Tensor.from_numpy(x, device).require_grad()
        wt = Tensor.from_numpy(w, device).require_grad()
        bt = Tensor.from_numpy(bias, device)
        if transposed:
            out = functional.conv_transpose(xt, wt, bt, stride, padding, output_padding,
                                            dilation, groups)
        else:
            out = functional.conv(xt, wt, bt, stride, padding, dilation, groups)
        grads = (out * Tensor.from_numpy(grad_out, device)).sum().backward()
        return out.to_numpy(), xt.grad(grads).to_numpy(), wt.grad(grads).to_numpy()

    monkeypatch.setenv("BURNISH_AUTOTUNE", "0")  # one tiling each: compiling is the cost here
    launched = []
    original = conv_kernels._implicit_fits
    monkeypatch.setattr(conv_kernels, "_implicit_fits",
                        lambda *a: launched.append(a) or original(*a))
    out, x_grad, w_grad = run()
    assert launched and all(original(*a) for a in launched), "the implicit kernels did not run"
    np.testing.assert_allclose(out, expected, rtol=0, atol=0)
    monkeypatch.setattr(conv_kernels, "IMPLICIT", False)
    explicit = run()
    np.testing.assert_allclose(out, explicit[0], rtol=0, atol=0)
    np.testing.assert_allclose(x_grad, explicit[1], rtol=0, atol=0)
    np.testing.assert_allclose(w_grad, explicit[2], rtol=0, atol=0)


def test_implicit_weight_grad_splits_long_inner_dims(jit_backend, monkeypatch):
    """A weight gradient over many positions is summed in runs by several workgroups, then
    added up: the runs' edges (a run ending mid-sample, the last run short) lose nothing."""
    device = jit_backend.default_device()
    rng = np.random.default_rng(2)
    x, g = _integers(rng, (3, 16, 13, 11)), _integers(rng, (3, 32, 13, 11))
    monkeypatch.setattr(matmul_kernels, "MIN_RUN", 64)
    monkeypatch.setenv("BURNISH_AUTOTUNE", "0")
    xt, gt = Tensor.from_numpy(x, device), Tensor.from_numpy(g, device)
    got = jit_backend.conv_weight_grad(xt.primitive, gt.primitive, (3, 3), (1, 1), (1, 1),
                                       (1, 1), 1)
    padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])
    reference_grad = np.zeros((32, 16, 3, 3), np.float32)
    for i in range(3):
        for j in range(3):
            reference_grad[:, :, i, j] = np.einsum("bohw,bchw->oc", g,
                                                   padded[:, :, i:i + 13, j:j + 11])
    np.testing.assert_allclose(Tensor.from_primitive(got, device, "float32").to_numpy(),
                               reference_grad, rtol=0, atol=0)


def test_half_weight_grad_rounds_once(jit_backend, monkeypatch):
    """Half-float runs are summed in float32 and rounded once: runs of +2049 and -2047 (2049
    is no float16) add up to exactly 4 per weight, where runs rounded to float16 first would
    give 2."""
    device = jit_backend.default_device()
    up, down = np.full(64, 32.0), np.full(64, -32.0)
    up[0], down[0] = 33.0, -31.0
    per_channel = np.concatenate([up, down] * 2)
    assert per_channel.reshape(4, 64).sum(axis=1).tolist() == [2049, -2047, 2049, -2047]
    g = np.broadcast_to(per_channel.reshape(16, 16), (1, 16, 16, 16)).astype(np.float16)
    x = np.ones((1, 16, 16, 16), np.float16)
    monkeypatch.setattr(matmul_kernels, "MIN_RUN", 64)
    monkeypatch.setenv("BURNISH_AUTOTUNE", "0")
    try:
        xt, gt = Tensor.from_numpy(x, device), Tensor.from_numpy(g, device)
    except Exception as error:  # the device has no float16
        pytest.skip(f"{jit_backend.name} holds no float16 here: {error}")
    got = jit_backend.conv_weight_grad(xt.primitive, gt.primitive, (1, 1), (1, 1), (0, 0),
                                       (1, 1), 1)
    out = Tensor.from_primitive(got, device, "float16").to_numpy()
    np.testing.assert_array_equal(out, np.full((16, 16, 1, 1), 4.0, np.float16))
