"""burnish.nn.quant: the Quantizer over a model (weights only; weights and activations with
min-max and percentile calibration), quantized layers' forward, and their records (what they
hold, their size against float32's, and loading them back)."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import RecordError, Tensor, nn
from burnish import functional as F
from burnish.nn.quant import QuantizedConv, QuantizedLinear, Quantizer, load, save
from burnish.quantization import PerBlock, PerChannel, QuantScheme, linear


class Mlp(nn.Module):
    layers: list

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


class SmallCnn(nn.Module):
    conv: nn.Conv2d
    head: nn.Linear

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.conv(x))
        return self.head(x.reshape([x.shape[0], -1]))


def mlp(*sizes: int) -> Mlp:
    return Mlp([nn.LinearConfig(a, b).init("ndarray") for a, b in zip(sizes, sizes[1:])])


def cnn() -> SmallCnn:
    return SmallCnn(nn.Conv2dConfig(3, 8, 3, padding=1, padding_mode="reflect").init("ndarray"),
                    nn.LinearConfig(8 * 6 * 6, 5).init("ndarray"))


def inputs(*shape: int, seed: int = 0) -> Tensor:
    return Tensor.from_data(np.random.default_rng(seed).standard_normal(shape)
                            .astype(np.float32), "ndarray")


def relative(a: Tensor, b: Tensor) -> float:
    x, y = a.to_numpy().astype(np.float64), b.to_numpy().astype(np.float64)
    return float(np.linalg.norm(x - y) / np.linalg.norm(y))


def test_weights_only_replaces_linear_and_conv_layers():
    model = cnn()
    quantized = Quantizer().quantize(model)
    assert isinstance(quantized.conv, QuantizedConv)
    assert isinstance(quantized.head, QuantizedLinear)
    assert quantized.conv.weight.scheme.granularity == PerChannel(0)  # output channels
    assert quantized.head.weight.scheme.granularity == PerChannel(1)  # [d_input, d_output]
    assert quantized.head.input_scheme is None
    assert isinstance(model.conv, nn.Conv2d)  # the float model is left alone
    x = inputs(4, 3, 6, 6)
    assert relative(quantized(x), model(x)) < 0.01
    int4 = Quantizer(QuantScheme("int4", PerBlock(8))).quantize(model)
    assert int4.head.weight.scheme.granularity == PerBlock(8, 0)  # blocks along d_input
    assert relative(int4(x), model(x)) < 0.15


def test_quantized_linear_forward_is_the_quantized_product():
    model = mlp(16, 8)
    quantized = Quantizer(activations=QuantScheme("uint8", mode="affine")).quantize(
        model, calibration=[inputs(32, 16, seed=s) for s in range(3)])
    layer = quantized.layers[0]
    x = inputs(5, 16, seed=9)
    q = x.quantize(layer.input_scheme, scales=layer.input_scales,
                   zero_points=layer.input_zero_points)
    expected = linear(q, layer.weight, layer.bias.val())
    np.testing.assert_array_equal(layer(x).to_numpy(), expected.to_numpy())


def test_minmax_calibration_covers_every_value_seen():
    model = mlp(16, 8, 4)
    batches = [inputs(32, 16, seed=s) for s in range(4)]
    quantized = Quantizer(activations=QuantScheme()).quantize(model, calibration=batches)
    largest = max(float(np.abs(b.to_numpy()).max()) for b in batches)
    scale = float(quantized.layers[0].input_scales.item())
    assert scale == pytest.approx(largest / 127, rel=1e-6)
    x = batches[0]
    assert relative(quantized(x), model(x)) < 0.02


def test_percentile_calibration_ignores_an_outlier():
    model = mlp(16, 8)
    values = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)
    values[0, 0] = 1000.0
    batch = Tensor.from_data(values, "ndarray")
    minmax = Quantizer(activations=QuantScheme()).quantize(model, calibration=[batch])
    percentile = Quantizer(activations=QuantScheme(), calibration="percentile",
                           percentile=99.0).quantize(model, calibration=[batch])
    assert float(minmax.layers[0].input_scales.item()) == pytest.approx(1000 / 127)
    assert float(percentile.layers[0].input_scales.item()) < 5 / 127
    clean = Tensor.from_data(values[1:], "ndarray")
    assert relative(percentile(clean), model(clean)) < relative(minmax(clean), model(clean))


def test_quantizer_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="needs calibration batches"):
        Quantizer(activations=QuantScheme()).quantize(mlp(4, 2))
    with pytest.raises(ValueError, match="no calibration batch reached layers.1"):
        Quantizer(activations=QuantScheme()).quantize(
            mlp(4, 3, 2), [inputs(2, 4)], forward=lambda model, x: model.layers[0](x))
    with pytest.raises(ValueError, match="per tensor"):
        Quantizer(activations=QuantScheme(granularity=PerChannel(1)))
    with pytest.raises(ValueError, match="'minmax' or 'percentile'"):
        Quantizer(calibration="histogram")


@pytest.mark.parametrize("quantizer", [
    Quantizer(),
    Quantizer(QuantScheme("int4", PerChannel(), "affine", bn.float16),
              QuantScheme("uint8", mode="affine")),
    Quantizer(QuantScheme("int8", PerBlock(4), scale_dtype=bn.float16), QuantScheme()),
], ids=["int8", "int4-affine-f16", "int8-blocks-f16"])
def test_records_load_back_exactly(tmp_path, quantizer):
    model = cnn()
    x = inputs(3, 3, 6, 6)
    quantized = quantizer.quantize(model, calibration=[x] if quantizer.activations else None)
    path = save(quantized, tmp_path / "model.safetensors")
    # Into a fresh float model of the same architecture: its layers become quantized ones.
    loaded = load(cnn(), path)
    assert isinstance(loaded.conv, QuantizedConv) and isinstance(loaded.head, QuantizedLinear)
    assert loaded.conv.weight.scheme == quantized.conv.weight.scheme
    assert loaded.conv.weight.scales.dtype is quantized.conv.weight.scheme.scale_dtype
    assert loaded.head.input_scheme == quantized.head.input_scheme
    assert loaded.conv.padding_mode == "reflect"
    np.testing.assert_array_equal(loaded(x).to_numpy(), quantized(x).to_numpy())


@pytest.mark.parametrize("scheme, limit", [
    (QuantScheme(granularity=PerChannel()), 0.27),
    (QuantScheme("int4", PerChannel()), 0.15),
    (QuantScheme("int4", PerBlock(32), scale_dtype=bn.float16), 0.15),
], ids=["int8", "int4", "int4-blocks-f16"])
def test_quantized_records_are_a_fraction_of_float32(tmp_path, scheme, limit):
    model = mlp(1024, 512, 256)
    float_size = model.save(tmp_path / "float.safetensors").stat().st_size
    quantized = Quantizer(scheme).quantize(model)
    size = save(quantized, tmp_path / "quantized.safetensors").stat().st_size
    assert size / float_size <= limit, f"{size / float_size:.3f} of float32's bytes"


def test_load_names_what_does_not_fit(tmp_path):
    plain = mlp(4, 2).save(tmp_path / "plain.safetensors")
    with pytest.raises(RecordError, match="no 'quantization' metadata"):
        load(mlp(4, 2), plain)
    path = save(Quantizer().quantize(mlp(4, 3, 2)), tmp_path / "q.safetensors")
    with pytest.raises(RecordError, match="layers.1"):
        load(mlp(4, 3), path)


def test_capture_replays_a_quantized_model():
    model = mlp(16, 32, 4)
    quantized = Quantizer(QuantScheme("int4", PerChannel()),
                          QuantScheme("uint8", mode="affine")).quantize(
        model, calibration=[inputs(8, 16, seed=s) for s in range(2)])

    @bn.capture
    def infer(m, x):
        return m(x)

    for seed in range(6):
        x = inputs(8, 16, seed=10 + seed)
        np.testing.assert_array_equal(infer(quantized, x).to_numpy(), quantized(x).to_numpy())
    (stats,) = infer.stats()
    assert stats["captured"] and stats["replays"] == 3, stats


def test_a_quantized_model_moves_with_to_device_and_valid():
    ad = bn.backend("autodiff+ndarray").default_device()
    model = cnn()
    x = inputs(2, 3, 6, 6)
    quantized = Quantizer(activations=QuantScheme("uint8", mode="affine")).quantize(model, [x])
    moved = quantized.to_device(ad)
    assert moved.conv.weight.device == ad and moved.head.input_scales.device == ad
    assert quantized.conv.weight.device != ad  # the original stays
    np.testing.assert_array_equal(moved(x.to_device(ad)).to_numpy(), quantized(x).to_numpy())
    back = moved.valid()
    assert back.head.weight.device == x.device and back.head.bias.device == x.device
    np.testing.assert_array_equal(back(x).to_numpy(), quantized(x).to_numpy())


def test_layers_without_bias_move_too():
    ad = bn.backend("autodiff+ndarray").default_device()
    model = SmallCnn(nn.Conv2dConfig(3, 4, 3, bias=False).init("ndarray"),
                     nn.LinearConfig(4 * 4 * 4, 2, bias=False).init("ndarray"))
    moved = Quantizer().quantize(model).to_device(ad)
    assert moved.conv.weight.device == ad and moved.head.weight.device == ad
    x = inputs(2, 3, 6, 6)
    np.testing.assert_allclose(moved(x.to_device(ad)).to_numpy(), Quantizer().quantize(model)(x)
                               .to_numpy(), rtol=1e-6)


def test_module_save_and_load_keep_the_quantized_parts(tmp_path):
    """A quantized model's own ``save``/``load`` (no scheme metadata: the module has the
    layers) hold the integers, scales, zero points and calibrated input parameters; they were
    once left out, and the loaded model kept its placeholder weights."""
    x = inputs(3, 3, 6, 6)
    quantizer = Quantizer(QuantScheme("int8", PerChannel(), "affine"),
                          QuantScheme("uint8", mode="affine"))
    quantized = quantizer.quantize(cnn(), calibration=[x])
    path = quantized.save(tmp_path / "model.safetensors")
    keys = set(bn.record.flatten(bn.record.load(path).tensors))
    assert {"conv.weight.values", "conv.weight.scales", "conv.weight.zero_points",
            "head.input_scales", "head.input_zero_points", "head.bias"} <= keys
    other = quantizer.quantize(cnn(), calibration=[inputs(3, 3, 6, 6, seed=1)])
    assert not np.array_equal(other(x).to_numpy(), quantized(x).to_numpy())
    loaded = other.load(path)
    np.testing.assert_array_equal(loaded(x).to_numpy(), quantized(x).to_numpy())
    with pytest.raises(RecordError, match="conv.weight.values"):
        cnn().load(path)  # a float model: the integers are unexpected
