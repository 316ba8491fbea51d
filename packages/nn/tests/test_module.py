"""The module system: the Burn example, discovery, copies, devices, freezing and configs."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from burnish import Tensor, nn


class PositionWiseFeedForward(nn.Module):
    linear_inner: nn.Linear
    linear_outer: nn.Linear
    dropout: nn.Dropout
    gelu: nn.Gelu

    def forward(self, input: Tensor) -> Tensor:
        x = self.linear_inner(input)
        x = self.gelu(x)
        x = self.dropout(x)
        return self.linear_outer(x)


class PositionWiseFeedForwardConfig(nn.Config):
    d_model: int
    d_ff: int
    dropout: float = 0.1

    def init(self, device=None) -> PositionWiseFeedForward:
        return PositionWiseFeedForward(
            linear_inner=nn.LinearConfig(self.d_model, self.d_ff).init(device),
            linear_outer=nn.LinearConfig(self.d_ff, self.d_model).init(device),
            dropout=nn.Dropout(self.dropout),
            gelu=nn.Gelu(),
        )


class Stack(nn.Module):
    blocks: list
    heads: dict
    pair: tuple
    scale: float = 2.0
    name: str = "stack"


def make_stack(device=None) -> Stack:
    lin = nn.LinearConfig(2, 2)
    return Stack([lin.init(device), nn.Relu(), lin.init(device)],
                 {"a": lin.init(device), "b": [lin.init(device)]},
                 (nn.Param(Tensor.zeros([3], device)), 7))


def test_the_burn_example_runs_and_computes_what_numpy_does():
    model = PositionWiseFeedForwardConfig(d_model=4, d_ff=16).init()
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    y = model(Tensor.from_data(x))
    w1, b1 = (p.val().to_numpy() for p in model.linear_inner.params())
    w2, b2 = (p.val().to_numpy() for p in model.linear_outer.params())
    from math import erf

    h = x @ w1 + b1
    h = h * (1 + np.vectorize(erf)(h / np.sqrt(2))) / 2
    np.testing.assert_allclose(y.to_numpy(), h @ w2 + b2, rtol=1e-5, atol=1e-5)
    assert model.num_params() == 4 * 16 + 16 + 16 * 4 + 4


def test_discovery_finds_nested_lists_dicts_tuples_and_skips_constants():
    names = [name for name, _ in make_stack().named_params()]
    assert names == ["blocks.0.weight", "blocks.0.bias", "blocks.2.weight", "blocks.2.bias",
                     "heads.a.weight", "heads.a.bias", "heads.b.0.weight", "heads.b.0.bias",
                     "pair.0"]
    assert make_stack().num_params() == 4 * 6 + 3


def test_map_returns_a_new_module_and_keeps_constants_and_ids():
    module = make_stack()
    doubled = module.map(lambda _, p: p.map(lambda t: t * 2 + 1))
    assert doubled.scale == 2.0 and doubled.pair[1] == 7 and isinstance(doubled.pair, tuple)
    assert [p.id for p in doubled.params()] == [p.id for p in module.params()]
    assert doubled.pair[0].val().tolist() == [1.0, 1.0, 1.0]
    assert module.pair[0].val().tolist() == [0.0, 0.0, 0.0]
    seen = []
    module.visit(lambda name, p: seen.append(name))
    assert len(seen) == 9


def test_clone_is_independent():
    module = make_stack()
    copy = module.clone()
    copy.blocks.append(nn.Relu())
    assert len(module.blocks) == 3


def test_valid_and_to_device_move_between_autodiff_and_its_inner_backend(ad):
    model = PositionWiseFeedForwardConfig(4, 8).init(ad)
    assert model.linear_inner.weight.val().is_require_grad()
    valid = model.valid()
    assert valid.linear_inner.weight.val().backend.name == "ndarray"
    assert valid.linear_inner.weight.id == model.linear_inner.weight.id
    back = valid.to_device(ad)
    assert back.linear_inner.weight.val().is_require_grad()
    x = Tensor.ones([2, 4])
    np.testing.assert_allclose(valid(x).to_numpy(), model.valid()(x).to_numpy())


def test_gradients_reach_every_param_and_freezing_stops_them(ad):
    model = PositionWiseFeedForwardConfig(4, 8, dropout=0.0).init(ad)
    grads = model(Tensor.ones([2, 4], ad)).sum().backward()
    assert all(p.val().grad(grads) is not None for p in model.params())
    frozen = model.freeze("linear_inner")
    grads = frozen(Tensor.ones([2, 4], ad)).sum().backward()
    got = {name: p.val().grad(grads) is not None for name, p in frozen.named_params()}
    assert got == {"linear_inner.weight": False, "linear_inner.bias": False,
                   "linear_outer.weight": True, "linear_outer.bias": True}
    assert not any(p.require_grad for p in model.no_grad().params())
    assert all(p.require_grad for p in frozen.unfreeze().params())
    with pytest.raises(KeyError, match="nothing"):
        model.freeze("nothing")


def test_modules_run_in_other_threads():
    model = PositionWiseFeedForwardConfig(4, 8).init()
    results = []
    thread = threading.Thread(target=lambda: results.append(model(Tensor.ones([1, 4]))))
    thread.start()
    thread.join()
    assert results[0].dims() == [1, 4]


def test_config_round_trips_through_json(tmp_path):
    config = nn.Conv2dConfig(3, 8, (3, 3), padding="same", initializer=nn.XavierNormal(2.0))
    path = config.save(tmp_path / "conv.json")
    assert nn.Conv2dConfig.load(path) == config
    assert nn.Conv2dConfig.from_dict({"channels_in": 1, "channels_out": 2,
                                      "kernel_size": [3, 3]}).kernel_size == (3, 3)
    with pytest.raises(TypeError, match="no field"):
        nn.LinearConfig.from_dict({"d_input": 1, "d_output": 2, "nope": 3})
    assert config.with_(groups=1).channels_out == 8
