"""Convolutions beyond what the conformance suite reaches: every arrangement of stride, padding,
dilation and groups over 1, 2 and 3 spatial dims, transposed too, from strided inputs, agrees
with NumPy whether the batch's patch matrix is gathered whole or in chunks of a few samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from burnish import Tensor, functional
from burnish.jit.kernels import conv as conv_kernels

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
