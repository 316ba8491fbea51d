"""Each layer's shapes and values against NumPy, and gradients flowing through them."""

from __future__ import annotations

from math import erf

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor, nn

RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def close(tensor, expected, tol=1e-5):
    np.testing.assert_allclose(tensor.to_numpy(), expected, rtol=tol, atol=tol)


def test_linear_and_bilinear():
    linear = nn.LinearConfig(3, 5).init()
    x = data(2, 3)
    w, b = linear.weight.val().to_numpy(), linear.bias.val().to_numpy()
    assert np.abs(w).max() <= 1 / np.sqrt(3)
    close(linear(Tensor.from_data(x)), x @ w + b)
    assert nn.LinearConfig(3, 5, bias=False).init().num_params() == 15
    bilinear = nn.BilinearConfig(3, 4, 2).init()
    x1, x2 = data(5, 3), data(5, 4)
    w, b = bilinear.weight.val().to_numpy(), bilinear.bias.val().to_numpy()
    close(bilinear(Tensor.from_data(x1), Tensor.from_data(x2)),
          np.einsum("ni,kij,nj->nk", x1, w, x2) + b, 1e-4)


def conv_reference(x, w, b, stride, padding):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, _, h, wd = x.shape
    out, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, out, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return y + b[None, :, None, None]


def test_conv2d_against_numpy_and_same_padding():
    conv = nn.Conv2dConfig(2, 3, (3, 3), stride=2, padding=1).init()
    x = data(2, 2, 7, 7)
    expected = conv_reference(x, conv.weight.val().to_numpy(), conv.bias.val().to_numpy(), 2, 1)
    close(conv(Tensor.from_data(x)), expected, 1e-4)
    same = nn.Conv2dConfig(2, 4, 3, padding="same").init()
    assert same(Tensor.from_data(x)).dims() == [2, 4, 7, 7]
    grouped = nn.Conv1dConfig(4, 6, 3, groups=2, dilation=2).init()
    assert grouped.weight.shape == (6, 2, 3)
    assert grouped(Tensor.zeros([1, 4, 10])).dims() == [1, 6, 6]
    assert nn.Conv3dConfig(1, 2, 2).init()(Tensor.zeros([1, 1, 3, 3, 3])).dims() == [1, 2, 2, 2, 2]
    with pytest.raises(ValueError, match="same"):
        nn.Conv2dConfig(2, 4, 2, padding="same").init()


@pytest.mark.parametrize("mode, numpy_mode", [("reflect", "reflect"), ("replicate", "edge"),
                                              ("circular", "wrap")])
def test_conv_padding_modes_pad_then_convolve(mode, numpy_mode):
    conv = nn.Conv2dConfig(2, 3, 3, padding=2, padding_mode=mode).init()
    x = data(2, 2, 5, 6)
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)), mode=numpy_mode)
    expected = conv_reference(padded, conv.weight.val().to_numpy(), conv.bias.val().to_numpy(),
                              1, 0)
    close(conv(Tensor.from_data(x)), expected, 1e-4)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2dConfig(2, 3, 3, padding_mode="mirror").init()


def test_conv_transpose_inverts_the_shape_of_a_strided_conv():
    up = nn.ConvTranspose2dConfig(3, 2, 3, stride=2, padding=1, padding_out=1).init()
    assert up.weight.shape == (3, 2, 3, 3)
    assert up(Tensor.zeros([1, 3, 4, 4])).dims() == [1, 2, 8, 8]
    assert nn.ConvTranspose1dConfig(2, 2, 3).init()(Tensor.zeros([1, 2, 5])).dims() == [1, 2, 7]


def test_pools():
    x = data(1, 2, 4, 4)
    close(nn.MaxPool2d(2)(Tensor.from_data(x)), x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)))
    close(nn.AvgPool2d(2)(Tensor.from_data(x)), x.reshape(1, 2, 2, 2, 2, 2).mean(axis=(3, 5)))
    close(nn.AdaptiveAvgPool2d(1)(Tensor.from_data(x)), x.mean(axis=(2, 3), keepdims=True))
    assert nn.MaxPool1d(2)(Tensor.zeros([1, 1, 6])).dims() == [1, 1, 3]
    assert nn.AvgPool1d(3, 1)(Tensor.zeros([1, 1, 6])).dims() == [1, 1, 4]
    assert nn.AdaptiveAvgPool1d(2)(Tensor.zeros([1, 1, 6])).dims() == [1, 1, 2]
    assert nn.AdaptiveAvgPool3d(1)(Tensor.zeros([1, 1, 2, 2, 2])).dims() == [1, 1, 1, 1, 1]


def test_dropout_trains_on_autodiff_only_and_is_seeded(ad):
    dropout = nn.Dropout(0.5)
    x = Tensor.ones([1000])
    assert dropout(x) is x
    bn.seed(3)
    first = dropout(Tensor.ones([1000], ad)).to_numpy()
    bn.seed(3)
    second = dropout(Tensor.ones([1000], ad)).to_numpy()
    np.testing.assert_array_equal(first, second)
    assert set(np.unique(first)) == {0.0, 2.0}
    assert 400 < (first == 0).sum() < 600
    with pytest.raises(ValueError):
        nn.Dropout(1.0)


def test_embedding():
    embedding = nn.EmbeddingConfig(10, 4).init()
    ids = Tensor.from_data([[1, 2], [9, 1]])
    out = embedding(ids)
    assert out.dims() == [2, 2, 4]
    close(out, embedding.weight.val().to_numpy()[[[1, 2], [9, 1]]])


def test_layer_rms_and_group_norm():
    x = data(2, 3, 6)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    close(nn.LayerNormConfig(6).init()(Tensor.from_data(x)), (x - mean) / np.sqrt(var + 1e-5),
          1e-4)
    rms = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)
    close(nn.RmsNormConfig(6).init()(Tensor.from_data(x)), rms, 1e-4)
    g = x.reshape(2, 1, 18)
    expected = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    close(nn.GroupNormConfig(1, 3).init()(Tensor.from_data(x)), expected.reshape(x.shape), 1e-4)


def test_batch_norm_trains_running_stats_and_uses_them_in_valid(ad):
    norm = nn.BatchNormConfig(3, momentum=0.5).init(ad)
    x = data(4, 3, 5)
    y = norm(Tensor.from_data(x, ad))
    mean, var = x.mean((0, 2), keepdims=True), x.var((0, 2), keepdims=True)
    close(y, (x - mean) / np.sqrt(var + 1e-5), 1e-4)
    close(norm.running_mean.val(), 0.5 * x.mean((0, 2)), 1e-5)
    close(norm.running_var.val(), 0.5 + 0.5 * x.var((0, 2), ddof=1), 1e-5)
    valid = norm.valid()
    rm, rv = (valid.running_mean.val().to_numpy()[None, :, None],
              valid.running_var.val().to_numpy()[None, :, None])
    close(valid(Tensor.from_data(x)), (x - rm) / np.sqrt(rv + 1e-5), 1e-4)
    assert norm.num_params() == 12 and len([p for p in norm.params() if p.require_grad]) == 2


ACTIVATIONS = [
    (nn.Relu(), lambda x: np.maximum(x, 0)),
    (nn.Gelu(), lambda x: x * (1 + np.vectorize(erf)(x / np.sqrt(2))) / 2),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.LogSigmoid(), lambda x: -np.logaddexp(0, -x)),
    (nn.Tanh(), np.tanh),
    (nn.Silu(), lambda x: x / (1 + np.exp(-x))),
    (nn.LeakyRelu(0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    (nn.Elu(0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    (nn.Celu(2.0), lambda x: np.maximum(x, 0) + np.minimum(0, 2 * np.expm1(x / 2))),
    (nn.Selu(), lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772
                                                         * np.expm1(x))),
    (nn.Softplus(), lambda x: np.logaddexp(0, x)),
    (nn.Mish(), lambda x: x * np.tanh(np.logaddexp(0, x))),
    (nn.Softsign(), lambda x: x / (1 + np.abs(x))),
    (nn.HardSigmoid(), lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    (nn.HardSwish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (nn.Hardtanh(), lambda x: np.clip(x, -1, 1)),
    (nn.Relu6(), lambda x: np.clip(x, 0, 6)),
    (nn.Glu(), lambda x: x[..., :3] / (1 + np.exp(-x[..., 3:]))),
]


@pytest.mark.parametrize("module, reference", ACTIVATIONS,
                         ids=[type(m).__name__ for m, _ in ACTIVATIONS])
def test_activation(module, reference):
    x = data(4, 6) * 4
    x[0, 0] = 30.0  # past softplus's threshold
    close(module(Tensor.from_data(x)), reference(x.astype(np.float64)), 1e-4)


def test_prelu_and_swiglu():
    prelu = nn.PReluConfig(3).init()
    x = data(2, 3, 4)
    close(prelu(Tensor.from_data(x)), np.where(x > 0, x, 0.25 * x))
    swiglu = nn.SwiGluConfig(4, 5).init()
    assert swiglu(Tensor.from_data(x)).dims() == [2, 3, 5]
    assert [n for n, _ in swiglu.named_params()] == ["linear_inner.weight", "linear_outer.weight"]


def test_gradients_flow_through_every_layer_kind(ad):
    model = [nn.Conv2dConfig(1, 2, 3, padding=1).init(ad), nn.BatchNormConfig(2).init(ad),
             nn.Relu(), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1)]
    x = Tensor.from_data(data(2, 1, 4, 4), ad)
    for layer in model:
        x = layer(x)
    head = nn.LinearConfig(2, 3).init(ad)
    norm = nn.LayerNormConfig(3).init(ad)
    loss = nn.CrossEntropyLoss()(norm(head(x.flatten(1))), Tensor.from_data([0, 2], ad))
    grads = loss.backward()
    for layer in [*model, head, norm]:
        for name, param in layer.named_params():
            grad = param.val().grad(grads)
            assert (grad is not None) == param.require_grad, (type(layer).__name__, name)
