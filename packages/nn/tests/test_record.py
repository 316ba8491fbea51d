"""Modules saved and loaded in every record format, full and half precision, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import RecordError, Tensor, nn, record


def model():
    return nn.LinearConfig(3, 2).init(), nn.BatchNormConfig(2).init()


class Net(nn.Module):
    layers: list
    norm: nn.BatchNorm


def make_net() -> Net:
    return Net([nn.LinearConfig(3, 4).init(), nn.Relu(), nn.LinearConfig(4, 2).init()],
               nn.BatchNormConfig(2).init())


@pytest.mark.parametrize("fmt", sorted(record.formats()))
@pytest.mark.parametrize("precision", ["full", "half"])
def test_round_trip_in_every_format(tmp_path, fmt, precision):
    net = make_net()
    path = net.save(tmp_path / f"net.{record.formats()[fmt].extension.lstrip('.')}",
                    format=fmt, precision=precision)
    loaded = make_net().load(path, format=fmt)
    tolerance = 0 if precision == "full" else 1e-3
    for (name, a), (_, b) in zip(net.named_params(), loaded.named_params()):
        assert b.dtype == a.dtype, name
        np.testing.assert_allclose(b.val().to_numpy(), a.val().to_numpy(), atol=tolerance)
    # Ids come back with the values, so saved optimizer state finds its parameters.
    assert [p.id for p in loaded.params()] == [p.id for p in net.params()]


def test_into_record_is_nested_like_the_attributes():
    tree = make_net().into_record()
    assert list(tree) == ["layers", "norm"]
    assert tree["layers"][1] == {} and set(tree["layers"][0]) == {"weight", "bias"}
    assert set(tree["norm"]) == {"gamma", "beta", "running_mean", "running_var"}


def test_load_record_lists_missing_unexpected_and_misshaped_keys():
    linear = nn.LinearConfig(3, 2).init()
    bad = {"weight": Tensor.zeros([2, 3]), "extra": Tensor.zeros([1])}
    with pytest.raises(RecordError) as error:
        linear.load_record(bad)
    message = str(error.value)
    assert "missing: bias" in message and "unexpected: extra" in message
    assert "mis-shaped: weight (module [3, 2], record [2, 3])" in message


def test_load_record_casts_to_the_module_dtype():
    linear = nn.LinearConfig(3, 2).init()
    half = {"weight": np.ones((3, 2), np.float16), "bias": np.zeros(2, np.float16)}
    loaded = linear.load_record(half)
    assert loaded.weight.dtype == linear.weight.dtype
    assert loaded.weight.val().tolist() == [[1.0, 1.0]] * 3
