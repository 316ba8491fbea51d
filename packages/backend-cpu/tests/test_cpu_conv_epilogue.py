"""A replayed convolution runs the elementwise launch that follows it (an activation) as its
epilogue, block by block (``CpuRuntime._with_epilogues``): on every way a convolution goes, the
replay gives the eager run's values exactly, and fuses where it should (every way but
Winograd's)."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
import burnish.cpu.runtime as cpu_runtime
import burnish.functional as F
from burnish import Tensor

# (name, input shape, weight shape, keyword arguments): one per path of NativeConv.bind_forward.
CONVS = [
    ("depthwise, a plane a task", (2, 5, 20, 20), (5, 1, 3, 3),
     dict(stride=2, padding=1, groups=5)),
    ("depthwise, 16 channels a task, the last block overlapping", (2, 20, 7, 7), (20, 1, 5, 5),
     dict(padding=2, groups=20)),
    ("few input channels", (2, 3, 30, 30), (16, 3, 3, 3), dict(stride=2, padding=1)),
    ("pointwise", (2, 16, 12, 12), (24, 16, 1, 1), {}),
    ("patch matrix", (3, 8, 10, 10), (12, 8, 3, 3), dict(stride=2)),
    ("one position per sample", (2, 24, 1, 1), (40, 24, 1, 1), {}),
    ("one sample, merged", (1, 16, 7, 7), (64, 16, 3, 3), dict(padding=1)),
    # Winograd's way takes none (its output comes in runs too short for a call each)
    ("winograd, odd width", (2, 16, 11, 11), (16, 16, 3, 3), dict(padding=1)),
    ("1-d", (2, 8, 33), (8, 8, 3), dict(padding=1)),
]

ACTIVATIONS = {
    "hard_swish": F.hard_swish,  # not idempotent: an element taken twice shows
    "relu": F.relu,
    "hard_sigmoid": lambda y: F.hard_sigmoid(y, 0.3, 0.4),  # scalars in the launch's info
    "clamp": lambda y: y.clamp(-0.5, 0.7),
}


@pytest.fixture
def fusions(monkeypatch):
    """The convolutions bound with an epilogue (``_conv_with_epilogue``'s results)."""
    made: list = []
    original = cpu_runtime._conv_with_epilogue

    def spy(*args):
        bound = original(*args)
        if bound is not None:
            made.append(bound)
        return bound

    monkeypatch.setattr(cpu_runtime, "_conv_with_epilogue", spy)
    return made


def _conv(x, w, b, **kwargs):
    return (F.conv1d if x.ndim == 3 else F.conv2d)(x, w, b, **kwargs)


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("name, x_shape, w_shape, kwargs", CONVS, ids=[c[0] for c in CONVS])
def test_a_replayed_convolution_runs_its_activation_as_an_epilogue(cpu, fusions, activation,
                                                                    name, x_shape, w_shape,
                                                                    kwargs):
    act = ACTIVATIONS[activation]
    rng = np.random.default_rng(7)
    w = Tensor.from_data(rng.standard_normal(w_shape).astype(np.float32), device="cpu")
    b = Tensor.from_data(rng.standard_normal(w_shape[0]).astype(np.float32), device="cpu")

    def layer(x, w, b):
        return act(_conv(x, w, b, **kwargs))

    captured = burnish.capture(layer)
    for _ in range(5):  # eager, recording, then replays
        x = Tensor.from_data(rng.standard_normal(x_shape).astype(np.float32), device="cpu")
        np.testing.assert_array_equal(captured(x, w, b).to_numpy(), layer(x, w, b).to_numpy(),
                                      err_msg=name)
    assert captured.stats()[0]["replays"] >= 2
    assert len(fusions) == (0 if name.startswith("winograd") else 1), name


def test_the_convolutions_output_is_still_written_and_float64_fuses_too(cpu, fusions):
    rng = np.random.default_rng(8)
    w = Tensor.from_data(rng.standard_normal((6, 4, 3, 3)), device="cpu", dtype="float64")

    def layer(x, w):
        y = F.conv2d(x, w, padding=1)
        return y, F.hard_swish(y)

    captured = burnish.capture(layer)
    for _ in range(5):
        x = Tensor.from_data(rng.standard_normal((2, 4, 9, 9)), device="cpu", dtype="float64")
        for got, want in zip(captured(x, w), layer(x, w)):
            np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    assert len(fusions) == 1


def test_an_op_of_more_than_the_convolutions_output_is_not_an_epilogue(cpu, fusions):
    rng = np.random.default_rng(9)
    w = Tensor.from_data(rng.standard_normal((6, 4, 1, 1)).astype(np.float32), device="cpu")

    def layer(x, w, s):
        return F.conv2d(x, w) * s  # a broadcast product: two inputs

    captured = burnish.capture(layer)
    s = Tensor.from_data(rng.standard_normal((1, 6, 1, 1)).astype(np.float32), device="cpu")
    for _ in range(5):
        x = Tensor.from_data(rng.standard_normal((2, 4, 5, 5)).astype(np.float32), device="cpu")
        np.testing.assert_array_equal(captured(x, w, s).to_numpy(), layer(x, w, s).to_numpy())
    assert not fusions


def test_a_capture_keeps_the_convolutions_input_apart_from_the_epilogues_output(cpu, fusions):
    # Without ``Runtime.joined``, the second activation's output would take the memory of the
    # second convolution's input (the first activation's output, dead after it): no epilogue.
    rng = np.random.default_rng(10)
    w1 = Tensor.from_data(rng.standard_normal((8, 8, 3, 3)).astype(np.float32), device="cpu")
    w2 = Tensor.from_data(rng.standard_normal((8, 8, 3, 3)).astype(np.float32), device="cpu")

    def layers(x, w1, w2):
        h = F.hard_swish(F.conv2d(x, w1, padding=1, stride=2))
        return F.hard_swish(F.conv2d(h, w2, padding=1))

    captured = burnish.capture(layers)
    for _ in range(5):
        x = Tensor.from_data(rng.standard_normal((2, 8, 12, 12)).astype(np.float32),
                             device="cpu")
        np.testing.assert_array_equal(captured(x, w1, w2).to_numpy(),
                                      layers(x, w1, w2).to_numpy())
    assert len(fusions) == 2
