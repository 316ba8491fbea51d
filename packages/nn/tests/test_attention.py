"""Attention, transformers and position encodings against float64 NumPy references."""

from __future__ import annotations

from math import erf

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor, nn
from burnish.errors import ShapeError

RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def close(tensor, expected, tol=1e-5):
    np.testing.assert_allclose(tensor.to_numpy(), expected, rtol=tol, atol=tol)


def weights(linear):
    return linear.weight.val().to_numpy().astype(np.float64), \
        linear.bias.val().to_numpy().astype(np.float64)


def linear_ref(linear, x):
    w, b = weights(linear)
    return x @ w + b


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def mha_ref(mha, query, key, value, mask=None):
    """Float64 multi-head attention with ``mha``'s weights; ``mask`` broadcasts to
    [batch, heads, seq_q, seq_k] and is true where attention is forbidden."""
    heads = mha.n_heads

    def split(x):
        b, s, d = x.shape
        return x.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)

    q, k, v = (split(linear_ref(layer, x).astype(np.float64))
               for layer, x in ((mha.query, query), (mha.key, key), (mha.value, value)))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, -1e300, scores)
    attention = softmax(scores)
    b, _, s, _ = q.shape
    context = (attention @ v).transpose(0, 2, 1, 3).reshape(b, s, -1)
    return linear_ref(mha.output, context), attention


def layer_norm_ref(norm, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + norm.epsilon) * norm.gamma.val().to_numpy() \
        + norm.beta.val().to_numpy()


def gelu_ref(x):
    return x * (1 + np.vectorize(erf)(x / np.sqrt(2))) / 2


def feed_forward_ref(ff, x):
    h = linear_ref(ff.linear_inner, x)
    h = gelu_ref(h) if isinstance(ff.activation, nn.Gelu) else np.maximum(h, 0)
    return linear_ref(ff.linear_outer, h)


def test_self_attention_matches_numpy():
    mha = nn.MultiHeadAttentionConfig(8, 2).init()
    x = data(3, 5, 8)
    out = mha(Tensor.from_data(x))
    expected, attention = mha_ref(mha, x, x, x)
    assert out.context.dims() == [3, 5, 8] and out.weights.dims() == [3, 2, 5, 5]
    close(out.context, expected, 1e-4)
    close(out.weights, attention, 1e-5)


def test_cross_attention_with_padding_and_batched_masks():
    mha = nn.MultiHeadAttentionConfig(8, 4, bias=True).init()
    query, memory = data(2, 3, 8), data(2, 6, 8)
    pad = np.zeros((2, 6), bool)
    pad[0, 4:] = True
    attn = RNG.random((2, 3, 6)) < 0.3
    attn[:, :, 0] = False
    out = mha(Tensor.from_data(query), Tensor.from_data(memory), mask_pad=Tensor.from_data(pad),
              mask_attn=Tensor.from_data(attn))
    mask = pad[:, None, None, :] | attn[:, None, :, :]
    expected, attention = mha_ref(mha, query, memory, memory, mask)
    close(out.context, expected, 1e-4)
    close(out.weights, attention, 1e-5)
    assert np.all(out.weights.to_numpy()[0, :, :, 4:] == 0)


def test_causal_mask_hides_the_future():
    mha = nn.MultiHeadAttentionConfig(8, 2).init()
    x = data(2, 6, 8)
    mask = nn.causal_mask(6)
    assert mask.tolist()[1] == [False, False, True, True, True, True]
    before = mha(Tensor.from_data(x), mask_attn=mask).context.to_numpy()
    perturbed = x.copy()
    perturbed[:, 4:] += data(2, 2, 8) * 10
    after = mha(Tensor.from_data(perturbed), mask_attn=mask).context.to_numpy()
    np.testing.assert_allclose(after[:, :4], before[:, :4], rtol=1e-6, atol=1e-6)
    assert not np.allclose(after[:, 4:], before[:, 4:])


@pytest.mark.parametrize("need_weights", [True, False])
def test_causal_flag_is_the_causal_mask(need_weights):
    mha = nn.MultiHeadAttentionConfig(8, 2).init()
    x, memory = Tensor.from_data(data(2, 5, 8)), Tensor.from_data(data(2, 7, 8))
    pad = Tensor.from_data(np.array([[False] * 6 + [True], [False] * 7]))
    for seq_k, key in ((5, None), (7, memory)):  # self-attention, and seq_q != seq_k
        flag = mha(x, key, causal=True, need_weights=need_weights,
                   mask_pad=pad if key is not None else None)
        mask = nn.causal_mask(7).to_numpy()[:5, :seq_k]
        tensor = mha(x, key, mask_attn=Tensor.from_data(mask), need_weights=need_weights,
                     mask_pad=pad if key is not None else None)
        np.testing.assert_allclose(flag.context.to_numpy(), tensor.context.to_numpy(),
                                   rtol=1e-6, atol=1e-6)
    encoder = nn.TransformerEncoderConfig(8, 16, 2, 2, dropout=0.0).init()
    np.testing.assert_allclose(encoder(x, causal=True).to_numpy(),
                               encoder(x, mask_attn=nn.causal_mask(5)).to_numpy(),
                               rtol=1e-6, atol=1e-6)


def test_fully_masked_rows_stay_finite():
    mha = nn.MultiHeadAttentionConfig(4, 1).init()
    x = Tensor.from_data(data(1, 3, 4))
    out = mha(x, mask_pad=Tensor.from_data(np.ones((1, 3), bool)))
    assert np.all(np.isfinite(out.context.to_numpy()))
    close(out.weights, np.full((1, 1, 3, 3), 1 / 3))
    with pytest.raises(ShapeError, match="mask_pad"):
        mha(x, mask_pad=Tensor.from_data(np.ones((1, 4), bool)))
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiHeadAttentionConfig(6, 4).init()


def test_without_weights_uses_the_fused_op_with_the_same_result(ad):
    """``need_weights=False``: no weights, the same context (masks and a row with no key left
    included), and the same gradients."""
    mha = nn.MultiHeadAttentionConfig(8, 2, dropout=0.0).init(ad)
    query, memory = data(2, 3, 8), data(2, 5, 8)
    pad = np.zeros((2, 5), bool)
    pad[1, 3:] = True
    attn = np.zeros((3, 5), bool)
    attn[0] = True
    args = [Tensor.from_data(x, ad) for x in (query, memory)]
    masks = {"mask_pad": Tensor.from_data(pad, ad), "mask_attn": Tensor.from_data(attn, ad)}
    full = mha(*args, **masks)
    fused = mha(*args, **masks, need_weights=False)
    assert fused.weights is None
    close(fused.context, full.context.to_numpy(), 1e-5)
    grads_full = (full.context * full.context).sum().backward()
    grads_fused = (fused.context * fused.context).sum().backward()
    for param in mha.params():
        close(param.val().grad(grads_fused), param.val().grad(grads_full).to_numpy(), 1e-4)


def test_without_weights_dropout_while_training_takes_the_materialised_path(ad):
    mha = nn.MultiHeadAttentionConfig(8, 2, dropout=0.5).init(ad)
    x = Tensor.from_data(data(2, 4, 8), ad)
    bn.seed(3)
    dropped = mha(x, need_weights=False).context
    bn.seed(3)
    expected = mha(x).context  # the same draws, on the weights the default path returns
    close(dropped, expected.to_numpy(), 1e-5)
    evaluated = mha.valid()(x.inner(), need_weights=False).context
    assert not np.allclose(evaluated.to_numpy(), dropped.to_numpy())


def encoder_layer_ref(layer, x, mask=None):
    def attend(h):
        return mha_ref(layer.attention, h, h, h, mask)[0]

    if layer.norm_first:
        x = x + attend(layer_norm_ref(layer.norm_1, x))
        return x + feed_forward_ref(layer.feed_forward, layer_norm_ref(layer.norm_2, x))
    x = layer_norm_ref(layer.norm_1, x + attend(x))
    return layer_norm_ref(layer.norm_2, x + feed_forward_ref(layer.feed_forward, x))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_encoder_matches_numpy(norm_first, activation):
    config = nn.TransformerEncoderConfig(8, 16, 2, 2, norm_first=norm_first,
                                         activation=activation)
    encoder = config.init()
    x = data(2, 4, 8).astype(np.float64)
    pad = np.array([[False] * 4, [False, False, False, True]])
    out = encoder(Tensor.from_data(x.astype(np.float32)), mask_pad=Tensor.from_data(pad))
    expected = x
    for layer in encoder.layers:
        expected = encoder_layer_ref(layer, expected, pad[:, None, None, :])
    close(out, expected, 1e-4)
    assert nn.TransformerEncoderConfig.from_json(config.to_json()) == config


def test_decoder_is_causal_and_uses_memory():
    decoder = nn.TransformerDecoderConfig(8, 16, 2, 2, norm_first=True).init()
    assert len(decoder.layers) == 2
    target, memory = data(2, 5, 8), data(2, 3, 8)
    mask = nn.causal_mask(5)

    def run(t, m):
        return decoder(Tensor.from_data(t), Tensor.from_data(m), target_mask_attn=mask).to_numpy()

    before = run(target, memory)
    assert before.shape == (2, 5, 8)
    later = target.copy()
    later[:, 3:] = data(2, 2, 8)
    np.testing.assert_allclose(run(later, memory)[:, :3], before[:, :3], rtol=1e-5, atol=1e-5)
    assert not np.allclose(run(target, data(2, 3, 8)), before)


def test_positional_encoding():
    encoding = nn.PositionalEncodingConfig(6, max_sequence_length=10).init()
    x = data(2, 4, 6)
    positions = np.arange(4)[:, None]
    rates = 10_000.0 ** (-np.arange(0, 6, 2) / 6)
    table = np.stack([np.sin(positions * rates), np.cos(positions * rates)], -1).reshape(4, 6)
    close(encoding(Tensor.from_data(x)), x + table)
    close(encoding(Tensor.from_data(x[:, :1]), start=3), x[:, :1] + table[3])
    assert encoding.num_params() == 0
    with pytest.raises(ShapeError, match="max_sequence_length"):
        encoding(Tensor.zeros([1, 11, 6]))


def rotary_ref(x, positions, theta=10_000.0):
    d = x.shape[-1]
    angles = positions[:, None] * theta ** (-np.arange(0, d, 2) / d)
    pairs = x.reshape(*x.shape[:-1], d // 2, 2)
    even = pairs[..., 0] * np.cos(angles) - pairs[..., 1] * np.sin(angles)
    odd = pairs[..., 0] * np.sin(angles) + pairs[..., 1] * np.cos(angles)
    return np.stack([even, odd], -1).reshape(x.shape)


def test_rotary_encoding_rotates_pairs_and_keeps_relative_scores():
    rope = nn.RotaryEncodingConfig(8, max_sequence_length=32).init()
    x = data(2, 3, 5, 8)
    close(rope(Tensor.from_data(x)), rotary_ref(x, np.arange(5)))
    close(rope(Tensor.from_data(x), start=7), rotary_ref(x, np.arange(7, 12)))
    # The score of a query and a key depends on their distance only.
    q, k = data(1, 8), data(1, 8)

    def score(i, j):
        rq = rope(Tensor.from_data(q[None]), start=i).to_numpy()
        rk = rope(Tensor.from_data(k[None]), start=j).to_numpy()
        return float((rq * rk).sum())

    assert score(3, 1) == pytest.approx(score(12, 10), rel=1e-4)
    with pytest.raises(ValueError, match="even"):
        nn.RotaryEncodingConfig(5).init()


def test_gradients_flow_through_transformers(ad):
    encoder = nn.TransformerEncoderConfig(8, 16, 2, 1).init(ad)
    decoder = nn.TransformerDecoderConfig(8, 16, 2, 1, norm_first=True,
                                          activation="relu").init(ad)
    rope = nn.RotaryEncodingConfig(8).init(ad)
    position = nn.PositionalEncodingConfig(8).init(ad)
    source = position(Tensor.from_data(data(2, 4, 8), ad))
    memory = encoder(source, mask_pad=Tensor.from_data(np.array([[0, 0, 0, 1]] * 2, bool), ad))
    out = decoder(rope(Tensor.from_data(data(2, 3, 8), ad)), memory,
                  target_mask_attn=nn.causal_mask(3, ad))
    grads = (out * out).mean().backward()
    for model in (encoder, decoder):
        for name, param in model.named_params():
            grad = param.val().grad(grads)
            assert grad is not None and np.all(np.isfinite(grad.to_numpy())), name
    assert decoder.valid()(Tensor.zeros([2, 3, 8]), memory.inner()).dims() == [2, 3, 8]


def test_transformer_round_trips_through_a_record(tmp_path):
    config = nn.TransformerDecoderConfig(8, 16, 2, 2)
    decoder = config.init()
    decoder.save(tmp_path / "decoder.safetensors")
    loaded = config.init().load(tmp_path / "decoder.safetensors")
    target, memory = Tensor.from_data(data(1, 3, 8)), Tensor.from_data(data(1, 2, 8))
    close(loaded(target, memory), decoder(target, memory).to_numpy(), 0)
    assert nn.PositionalEncodingConfig(8).init().into_record() == {}
