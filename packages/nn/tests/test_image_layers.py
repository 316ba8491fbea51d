"""PixelShuffle, PixelUnshuffle, Unfold, Interpolate and InstanceNorm against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, nn
from burnish.errors import ShapeError

RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def close(tensor, expected, tol=1e-5):
    np.testing.assert_allclose(tensor.to_numpy(), expected, rtol=tol, atol=tol)


def test_pixel_shuffle_and_unshuffle():
    x = data(2, 8, 3, 4)
    r = 2
    expected = np.zeros((2, 2, 6, 8), np.float32)
    for c in range(2):
        for i in range(r):
            for j in range(r):
                expected[:, c, i::r, j::r] = x[:, c * r * r + i * r + j]
    shuffled = nn.PixelShuffle(2)(Tensor.from_data(x))
    close(shuffled, expected)
    close(nn.PixelUnshuffle(2)(shuffled), x)
    with pytest.raises(ShapeError, match="divisible"):
        nn.PixelShuffle(3)(Tensor.from_data(x))
    with pytest.raises(ShapeError, match="divisible"):
        nn.PixelUnshuffle(2)(Tensor.zeros([1, 1, 3, 4]))


def test_unfold_gives_columns_a_conv_multiplies():
    x = data(2, 3, 5, 6)
    unfold = nn.Unfold(3, stride=2, padding=1)
    columns = unfold(Tensor.from_data(x))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    blocks = [padded[:, :, i:i + 3, j:j + 3].reshape(2, -1)
              for i in range(0, 5, 2) for j in range(0, 6, 2)]
    close(columns, np.stack(blocks, -1))
    weight = data(4, 3, 3, 3)
    conv = nn.Conv2dConfig(3, 4, 3, stride=2, padding=1, bias=False).init()
    conv = conv.load_record({"weight": weight})
    close(conv(Tensor.from_data(x)).flatten(2),
          np.einsum("ok,nkb->nob", weight.reshape(4, -1), np.stack(blocks, -1)), 1e-4)


def test_interpolate():
    x = data(1, 2, 3, 4)
    close(nn.Interpolate(scale_factor=2)(Tensor.from_data(x)), x.repeat(2, 2).repeat(2, 3))
    out = nn.Interpolate(size=(5, 7), mode="bilinear", align_corners=True)(Tensor.from_data(x))
    rows, cols = np.linspace(0, 2, 5), np.linspace(0, 3, 7)
    r0, c0 = np.floor(rows).astype(int).clip(0, 1), np.floor(cols).astype(int).clip(0, 2)
    dr, dc = (rows - r0)[:, None], (cols - c0)[None, :]

    def at(r, c):
        return x[:, :, r][:, :, :, c]

    expected = (at(r0, c0) * (1 - dr) * (1 - dc) + at(r0 + 1, c0) * dr * (1 - dc)
                + at(r0, c0 + 1) * (1 - dr) * dc + at(r0 + 1, c0 + 1) * dr * dc)
    close(out, expected)
    with pytest.raises(ValueError, match="exactly one"):
        nn.Interpolate()(Tensor.from_data(x))


def test_instance_norm():
    norm = nn.InstanceNormConfig(3).init()
    gamma, beta = data(3), data(3)
    norm = norm.load_record({"gamma": gamma, "beta": beta})
    x = data(2, 3, 4, 5)
    mean = x.mean((2, 3), keepdims=True)
    var = x.var((2, 3), keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-5) * gamma[:, None, None] + beta[:, None, None]
    close(norm(Tensor.from_data(x)), expected, 1e-4)
    plain = nn.InstanceNormConfig(3, affine=False).init()
    assert plain.num_params() == 0
    close(plain(Tensor.from_data(x[:, :, :, 0])),
          (x[..., 0] - x[..., 0].mean(2, keepdims=True))
          / np.sqrt(x[..., 0].var(2, keepdims=True) + 1e-5), 1e-4)


def test_gradients_flow_through_image_layers(ad):
    norm = nn.InstanceNormConfig(4).init(ad)
    conv = nn.Conv2dConfig(1, 4, 3, padding=1).init(ad)
    x = Tensor.from_data(data(2, 4, 4, 4), ad)
    y = nn.PixelShuffle(2)(norm(x))
    y = conv(nn.Interpolate(scale_factor=0.5, mode="bilinear")(y))
    y = nn.Unfold(2)(nn.PixelUnshuffle(2)(y))
    grads = (y * y).mean().backward()
    for model in (norm, conv):
        for name, param in model.named_params():
            grad = param.val().grad(grads)
            assert grad is not None and np.all(np.isfinite(grad.to_numpy())), name
