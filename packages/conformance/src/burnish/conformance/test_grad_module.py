"""Gradients of the module ops: convolutions, pools, interpolation, embedding, unfold (autodiff
backends). Max pools send each window's gradient to the index they return (the first max)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import burnish.functional as F
from burnish import Tensor, float64
from burnish.conformance.gradcheck import assert_gradient, check_gradients, gradient, rounded
from burnish.conformance.samples import rng, sample

# Gradients are float64 where the device has it, else float32 (WebGPU), checked against
# finite differences in float64 (see burnish.conformance.gradcheck).
pytestmark = pytest.mark.requires_autodiff


def distinct(shape, key=0):
    """Values at least 0.1 apart: no tie of a max pool within reach of the differences."""
    n = int(np.prod(shape))
    return (rng("distinct", tuple(shape), key).permutation(n) * 0.1 - n * 0.05).reshape(shape)


# -- convolutions -------------------------------------------------------------------------------

CONV = [
    # (input shape, weight shape, stride, padding, dilation, groups)
    ((2, 2, 7), (3, 2, 3), 1, 0, 1, 1),
    ((1, 4, 9), (4, 2, 2), 2, 1, 2, 2),
    ((2, 2, 5, 6), (3, 2, 3, 2), 1, 1, 1, 1),
    ((1, 4, 7, 7), (4, 2, 3, 3), 2, 1, 2, 2),
    ((1, 3, 6, 5), (3, 1, 2, 3), (2, 1), (0, 1), (1, 2), 3),
    ((1, 2, 4, 4, 3), (2, 2, 2, 2, 2), 1, (1, 0, 1), 1, 1),
    # 1x1 on 1x1 inputs, grouped (the batch as one product's rows)
    ((3, 6, 1, 1), (4, 3, 1, 1), 1, 0, 1, 2),
    # depthwise with channels for a vector's worth at a time (8 float64), the last partial
    ((2, 9, 6, 7), (9, 1, 3, 3), 2, 1, 1, 9),
]


@pytest.mark.parametrize("case", CONV, ids=lambda c: f"{c[0]}*{c[1]}")
def test_conv(case, device):
    shape, weight, stride, padding, dilation, groups = case
    x, w = sample(shape, float64, key=1), sample(weight, float64, key=2)
    bias = sample((weight[0],), float64, key=3)
    check_gradients(lambda a, b, c: F.conv(a, b, c, stride, padding, dilation, groups),
                    x, w, bias, device=device, key=case)


CONV_TRANSPOSE = [
    # (input shape, weight shape, stride, padding, output_padding, dilation, groups)
    ((2, 2, 5), (2, 3, 3), 1, 0, 0, 1, 1),
    ((1, 4, 4), (4, 1, 3), 2, 1, 1, 1, 2),
    ((1, 2, 3, 4), (2, 2, 3, 2), 2, 1, (1, 0), 1, 1),
    ((1, 4, 3, 3), (4, 2, 2, 2), 1, 0, 0, 2, 2),
    ((1, 2, 2, 3, 2), (2, 1, 2, 2, 2), (1, 2, 1), 0, 0, 1, 1),
]


@pytest.mark.parametrize("case", CONV_TRANSPOSE, ids=lambda c: f"{c[0]}*{c[1]}")
def test_conv_transpose(case, device):
    shape, weight, stride, padding, output_padding, dilation, groups = case
    x, w = sample(shape, float64, key=1), sample(weight, float64, key=2)
    bias = sample((weight[1] * groups,), float64, key=3)
    check_gradients(lambda a, b, c: F.conv_transpose(a, b, c, stride, padding, output_padding,
                                                     dilation, groups),
                    x, w, bias, device=device, key=case)


def test_strided_grouped_dilated_conv_by_hand(device, grad_dtype):
    # out[b, o, i, j] = sum over the group's channels c and taps (p, q) of
    # x_padded[b, c, i * stride + p * dilation, j * stride + q * dilation] * w[o, c, p, q].
    stride, padding, dilation, groups = 2, 1, 2, 2
    x = rounded(sample((2, 4, 7, 6), float64, key=1), grad_dtype)
    w = rounded(sample((4, 2, 3, 2), float64, key=2), grad_dtype)
    xt = Tensor.from_data(x, device, grad_dtype).require_grad()
    wt = Tensor.from_data(w, device, grad_dtype).require_grad()
    out = F.conv2d(xt, wt, None, stride, padding, dilation, groups)
    upstream = rounded(sample(tuple(out.shape), float64, key=3), grad_dtype)
    grads = (out * Tensor.from_data(upstream, device, grad_dtype)).sum().backward()
    padded = np.pad(x, [(0, 0), (0, 0), (padding, padding), (padding, padding)])
    x_grad, w_grad = np.zeros_like(padded), np.zeros_like(w)
    batch, out_channels, height, width = upstream.shape
    per_group = w.shape[1]
    for b, o, i, j in itertools.product(range(batch), range(out_channels), range(height),
                                        range(width)):
        group = o // (out_channels // groups)
        for c, p, q in itertools.product(range(per_group), range(w.shape[2]),
                                         range(w.shape[3])):
            row, col = i * stride + p * dilation, j * stride + q * dilation
            channel = group * per_group + c
            w_grad[o, c, p, q] += upstream[b, o, i, j] * padded[b, channel, row, col]
            x_grad[b, channel, row, col] += upstream[b, o, i, j] * w[o, c, p, q]
    x_grad = x_grad[:, :, padding:-padding, padding:-padding]
    assert_gradient(xt, grads, x_grad, rtol=1e-12, atol=1e-12)
    assert_gradient(wt, grads, w_grad, rtol=1e-12, atol=1e-12)


def test_conv_bias_gradient_by_hand(device, grad_dtype):
    x = Tensor.from_data(sample((3, 2, 5, 4), float64), device, grad_dtype)
    w = Tensor.from_data(sample((4, 2, 2, 2), float64, key=1), device, grad_dtype)
    bias = Tensor.from_data(np.zeros(4), device, grad_dtype).require_grad()
    grads = F.conv2d(x, w, bias).backward()
    np.testing.assert_array_equal(gradient(bias, grads), np.full(4, 3 * 4 * 3))


# -- pools --------------------------------------------------------------------------------------

AVG_POOL = [
    # (input shape, kernel, stride, padding, count_include_pad, ceil_mode)
    ((2, 2, 7), 3, 2, 1, True, False),
    ((1, 2, 7), 2, 2, 0, True, True),
    ((1, 2, 6, 7), 3, 2, 1, False, False),
    ((1, 1, 5, 7), (2, 3), (2, 2), (1, 1), True, True),
    ((1, 1, 5, 6), (3, 2), (2, 3), (1, 0), False, True),
    ((1, 2, 5, 4), 2, None, 0, True, False),
]


@pytest.mark.parametrize("case", AVG_POOL, ids=lambda c: f"{c[0]}-k{c[1]}")
def test_avg_pool(case, device):
    shape, kernel, stride, padding, include_pad, ceil_mode = case
    check_gradients(lambda a: F.avg_pool(a, kernel, stride, padding, include_pad, ceil_mode),
                    sample(shape, float64), device=device, key=case)


MAX_POOL = [
    # (input shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 2, 9), 3, 2, 1, 1, False),
    ((1, 2, 8), 2, 3, 0, 2, True),
    ((1, 2, 6, 7), 3, 2, 1, 1, False),
    ((1, 1, 7, 7), (2, 3), (2, 1), (1, 1), (2, 1), True),
    ((1, 1, 4, 5), 2, 1, 0, 1, False),
]


@pytest.mark.parametrize("case", MAX_POOL, ids=lambda c: f"{c[0]}-k{c[1]}")
def test_max_pool(case, device):
    shape, kernel, stride, padding, dilation, ceil_mode = case
    x = distinct(shape)
    check_gradients(lambda a: F.max_pool(a, kernel, stride, padding, dilation, ceil_mode), x,
                    device=device, key=case)
    check_gradients(lambda a: F.max_pool_with_indices(a, kernel, stride, padding, dilation,
                                                      ceil_mode)[0], x, device=device, key=case)


def test_max_pool_ties_go_to_the_returned_index(device, grad_dtype):
    x = Tensor.from_data(np.ones((1, 1, 3, 3)), device, grad_dtype).require_grad()
    values, indices = F.max_pool2d_with_indices(x, 2, 1)
    grads = values.backward()
    expected = np.zeros(9)
    np.add.at(expected, indices.to_numpy().reshape(-1), 1.0)
    np.testing.assert_array_equal(gradient(x, grads), expected.reshape(1, 1, 3, 3))
    # Every window is all ones: its first element (top left) is the max the index names.
    np.testing.assert_array_equal(expected, [1, 1, 0, 1, 1, 0, 0, 0, 0])


@pytest.mark.parametrize("size", [(2,), (3, 2), (1, 3), (2, 2, 3)], ids=str)
def test_adaptive_avg_pool(size, device):
    shape = (2, 2) + (5, 7, 4)[:len(size)]
    check_gradients(lambda a: F.adaptive_avg_pool(a, size), sample(shape, float64),
                    device=device, key=size)


@pytest.mark.parametrize("size", [(3,), (2, 3), (4, 2)], ids=str)
def test_adaptive_max_pool(size, device):
    shape = (1, 2) + (7, 5)[:len(size)]
    x = distinct(shape)
    check_gradients(lambda a: F.adaptive_max_pool(a, size), x, device=device, key=size)
    check_gradients(lambda a: F.adaptive_max_pool_with_indices(a, size)[0], x, device=device,
                    key=size)


# -- interpolation --------------------------------------------------------------------------------

RESIZE = [((1, 2, 4, 5), (7, 3)), ((1, 1, 6, 4), (3, 8)), ((2, 1, 3, 3), (3, 3)),
          ((1, 1, 5, 2), (1, 4))]


MODES = [("nearest", False), ("bilinear", False), ("bilinear", True), ("bicubic", False),
         ("bicubic", True)]


@pytest.mark.parametrize("mode,align_corners", MODES,
                         ids=[f"{m}{'-aligned' if a else ''}" for m, a in MODES])
@pytest.mark.parametrize("case", RESIZE, ids=lambda c: f"{c[0][2:]}to{c[1]}")
def test_interpolate(case, mode, align_corners, device):
    shape, size = case
    check_gradients(lambda a: F.interpolate(a, size, mode=mode, align_corners=align_corners),
                    sample(shape, float64), device=device, key=(case, mode, align_corners))


def test_interpolate_by_hand(device, grad_dtype):
    x = Tensor.from_data(sample((1, 1, 2, 2), float64), device, grad_dtype).require_grad()
    # Nearest 2 -> 4: every input element is copied to a 2 x 2 block.
    grads = F.interpolate(x, (4, 4), mode="nearest").backward()
    np.testing.assert_array_equal(gradient(x, grads), np.full((1, 1, 2, 2), 4.0))
    # Bilinear 2 -> 3 with aligned corners: rows are x0, (x0 + x1) / 2, x1, so each input
    # counts 1.5 times per dim.
    grads = F.interpolate(x, (3, 3), mode="bilinear", align_corners=True).backward()
    assert_gradient(x, grads, np.full((1, 1, 2, 2), 2.25))
    # Bilinear 2 -> 4, half pixel: sources -0.25 (clamped to 0), 0.25, 0.75, 1.25 (border).
    row = np.array([[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]])
    weights = rounded(sample((4, 4), float64, key=2), grad_dtype)
    upstream = Tensor.from_data(weights.reshape(1, 1, 4, 4), device, grad_dtype)
    grads = (F.interpolate(x, (4, 4), mode="bilinear") * upstream).backward()
    assert_gradient(x, grads, (row.T @ weights @ row).reshape(1, 1, 2, 2), rtol=1e-6)


# -- embedding and unfold -------------------------------------------------------------------------


def test_embedding(device):
    indices = np.array([[0, 3, 3], [1, 0, 4]])
    check_gradients(lambda w, i: F.embedding(w, i), sample((5, 3), float64), indices,
                    device=device)


@pytest.mark.parametrize("case", [((1, 2, 4, 5), 2, 1, 0, 1), ((2, 1, 5, 5), 3, 2, 1, 1),
                                  ((1, 2, 6, 5), (2, 3), (2, 1), (1, 0), (2, 1))],
                         ids=["plain", "strided", "dilated"])
def test_unfold(case, device):
    shape, kernel, stride, padding, dilation = case
    check_gradients(lambda a: F.unfold(a, kernel, stride, padding, dilation),
                    sample(shape, float64), device=device, key=case)
