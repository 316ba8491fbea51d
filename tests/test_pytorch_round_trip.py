"""PyTorch's own files (tests/fixtures/pytorch, zip and legacy) loaded into the same CNN in
burnish give PyTorch's output; no torch needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from burnish import Tensor, nn
from burnish.errors import RecordError
from burnish.nn.import_weights import load_weights, read_pytorch

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pytorch"


class Cnn(nn.Module):
    """make_fixtures.py's model, with names instead of Sequential's indices."""

    conv1: nn.Conv2d
    relu: nn.Relu
    pool: nn.MaxPool2d
    conv2: nn.Conv2d
    linear: nn.Linear

    def forward(self, x: Tensor) -> Tensor:
        x = self.pool(self.relu(self.conv1(x)))
        x = self.relu(self.conv2(x))
        return self.linear(x.reshape([x.shape[0], -1]))


def make_cnn() -> Cnn:
    return Cnn(
        conv1=nn.Conv2dConfig(1, 4, 3, padding=1).init("ndarray"),
        relu=nn.Relu(),
        pool=nn.MaxPool2d(2),
        conv2=nn.Conv2dConfig(4, 8, 3).init("ndarray"),
        linear=nn.LinearConfig(8 * 4 * 4, 10).init("ndarray"),
    )


REMAP = [(r"^0\.", "conv1."), (r"^3\.", "conv2."), (r"^6\.", "linear.")]


@pytest.mark.parametrize("name", ["cnn.pt", "cnn_legacy.pt"])
def test_pytorch_cnn_gives_pytorch_output(name):
    result = load_weights(make_cnn(), FIXTURES / name, remap=REMAP)
    assert sorted(result.loaded) == sorted(
        f"{layer}.{p}" for layer in ("conv1", "conv2", "linear") for p in ("weight", "bias"))
    assert result.missing == result.unused == result.mismatched == []
    x = Tensor.from_data(np.load(FIXTURES / "input.npy"), "ndarray")
    expected = np.load(FIXTURES / "output.npy")
    np.testing.assert_allclose(result.module(x).to_numpy(), expected, rtol=0, atol=1e-5)


def test_without_remapping_every_parameter_is_reported():
    result = load_weights(make_cnn(), FIXTURES / "cnn.pt", allow_partial=True)
    assert result.loaded == []
    assert len(result.missing) == 6
    assert result.unused == ["0.weight", "0.bias", "3.weight", "3.bias", "6.weight", "6.bias"]


def test_fixtures_are_small():
    assert sum(path.stat().st_size for path in FIXTURES.iterdir()) < 200_000


@pytest.mark.parametrize("name", ["checkpoint.pt", "checkpoint_legacy.pt"])
def test_checkpoint_views_strides_and_dtypes(name):
    tensors = read_pytorch(FIXTURES / name, top_level_key="model")
    assert list(tensors) == ["transposed", "slice", "whole", "half", "flags", "counts",
                             "layers.0", "layers.1"]
    np.testing.assert_array_equal(tensors["transposed"].to_numpy(),
                                  np.arange(6, dtype=np.float32).reshape(2, 3).T)
    np.testing.assert_array_equal(tensors["slice"].to_numpy(), [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(tensors["whole"].to_numpy(), np.arange(10))
    assert tensors["half"].dtype.name == "bfloat16"
    assert tensors["half"].to_numpy().astype(np.float32).tolist() == [1.5, -2.0]
    assert tensors["flags"].to_numpy().tolist() == [True, False, True]
    assert tensors["counts"].dtype.name == "int64"
    assert tensors["layers.0"].dtype.name == "float64"
    assert tensors["layers.1"].shape == [0]


def test_a_whole_checkpoint_skips_what_is_not_a_tensor():
    tensors = read_pytorch(FIXTURES / "checkpoint.pt")
    assert "epoch" not in tensors and "tag" not in tensors
    assert "model.slice" in tensors
    with pytest.raises(RecordError, match="no entry 'state_dict'"):
        read_pytorch(FIXTURES / "checkpoint.pt", top_level_key="state_dict")
