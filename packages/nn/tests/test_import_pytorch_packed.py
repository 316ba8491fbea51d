"""PyTorch's packed weights (attention's in_proj, the gates of LSTM and GRU) split by the adapter
into burnish's modules, which then give PyTorch's outputs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from burnish import Tensor, nn, stack
from burnish.errors import RecordError
from burnish.nn.import_weights import (
    LSTM_GATES,
    PYTORCH,
    Chunk,
    WeightAdapter,
    load_weights,
    recurrent_rules,
    split,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pytorch_packed"
D_MODEL, D_FF, N_HEADS, SEQ = 8, 16, 2, 5
D_INPUT, D_HIDDEN = 3, 4


def tensor(values: np.ndarray) -> Tensor:
    return Tensor.from_data(values, "ndarray")


def encoder(norm_first: bool, activation: str):
    def build():
        return nn.TransformerEncoderConfig(D_MODEL, D_FF, N_HEADS, n_layers=2, dropout=0.0,
                                           norm_first=norm_first,
                                           activation=activation).init("ndarray")

    def run(module, a):
        y = module(tensor(a["x"]), mask_pad=tensor(a["mask_pad"]),
                   mask_attn=nn.causal_mask(SEQ, "ndarray"))
        return {"y": y}

    return build, run


def build_decoder():
    return nn.TransformerDecoderConfig(D_MODEL, D_FF, N_HEADS, n_layers=1, dropout=0.0,
                                       activation="relu").init("ndarray")


def run_decoder(module, a):
    y = module(tensor(a["target"]), tensor(a["memory"]),
               target_mask_attn=nn.causal_mask(SEQ, "ndarray"))
    return {"y": y}


def run_lstm(module, a):
    y, state = module(tensor(a["x"]), nn.LstmState(tensor(a["c0"][0]), tensor(a["h0"][0])))
    return {"y": y, "h": state.hidden.unsqueeze(0), "c": state.cell.unsqueeze(0)}


def run_bilstm(module, a):
    y, state = module(tensor(a["x"]), nn.LstmState(tensor(a["c0"]), tensor(a["h0"])))
    return {"y": y, "h": state.hidden, "c": state.cell}


def run_gru(module, a):
    y, hidden = module(tensor(a["x"]), tensor(a["h0"][0]))
    return {"y": y, "h": hidden.unsqueeze(0)}


class StackedLstm(nn.Module):
    """LSTMs one after another: PyTorch's ``nn.LSTM(num_layers=len(layers))``."""

    layers: list[nn.Lstm]

    def forward(self, x: Tensor) -> tuple[Tensor, nn.LstmState]:
        states = []
        for layer in self.layers:
            x, state = layer(x)
            states.append(state)
        return x, nn.LstmState(stack([s.cell for s in states], 0),
                               stack([s.hidden for s in states], 0))


def run_stacked_lstm(module, a):
    y, state = module(tensor(a["x"]))
    return {"y": y, "h": state.hidden, "c": state.cell}


#: PyTorch names layer k's weights ``weight_ih_l{k}``...: each goes to ``layers.{k}``, whose Lstm
#: reads its layer's weights as ``weight_ih_l0``...
LAYERS_REMAP = [(r"^(\w+)_l(\d+)$", r"layers.\2.\1_l0")]

#: The burnish twin of each model of fixtures/pytorch_packed/make_fixtures.py, and how to run it
#: on the saved inputs (batch-first), giving the outputs PyTorch's were saved under, and the
#: remapping its keys need.
MODELS = {
    "encoder_post_relu": (*encoder(norm_first=False, activation="relu"), []),
    "encoder_pre_gelu_seq_first": (*encoder(norm_first=True, activation="gelu"), []),
    "decoder": (build_decoder, run_decoder, []),
    "lstm": (lambda: nn.LstmConfig(D_INPUT, D_HIDDEN).init("ndarray"), run_lstm, []),
    "bilstm": (lambda: nn.BiLstmConfig(D_INPUT, D_HIDDEN).init("ndarray"), run_bilstm, []),
    "gru": (lambda: nn.GruConfig(D_INPUT, D_HIDDEN).init("ndarray"), run_gru, []),
    "lstm_two_layers": (
        lambda: StackedLstm([nn.LstmConfig(D_INPUT, D_HIDDEN).init("ndarray"),
                             nn.LstmConfig(D_HIDDEN, D_HIDDEN).init("ndarray")]),
        run_stacked_lstm, LAYERS_REMAP),
}


def check_gives_pytorch_outputs(folder: Path, name: str) -> None:
    build, run, remap = MODELS[name]
    result = load_weights(build(), folder / f"{name}.pt", remap=remap)
    assert result.missing == result.unused == result.mismatched == []
    with np.load(folder / f"{name}.npz") as saved:
        arrays = dict(saved)
    outputs = run(result.module, arrays)
    assert outputs.keys() <= arrays.keys()
    for key, value in outputs.items():
        np.testing.assert_allclose(value.to_numpy(), arrays[key], rtol=0, atol=2e-5,
                                   err_msg=f"{name}: {key}")


@pytest.mark.parametrize("name", list(MODELS))
def test_pytorch_files_give_pytorch_outputs(name):
    check_gives_pytorch_outputs(FIXTURES, name)


def test_freshly_saved_pytorch_models_give_pytorch_outputs(tmp_path):
    pytest.importorskip("torch", reason="saving PyTorch models needs torch (pip install torch)")
    spec = importlib.util.spec_from_file_location("make_fixtures",
                                                  FIXTURES / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    make_fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_fixtures)
    assert make_fixtures.MODELS.keys() == MODELS.keys()
    make_fixtures.write(tmp_path, seed=1)
    for name in MODELS:
        check_gives_pytorch_outputs(tmp_path, name)


def test_a_stack_of_lstms_reads_each_layer_by_rules_as_by_remapping():
    build, run, _ = MODELS["lstm_two_layers"]
    adapter = PYTORCH.with_rules({StackedLstm: {
        **recurrent_rules(LSTM_GATES, "_l0", "layers.0."),
        **recurrent_rules(LSTM_GATES, "_l1", "layers.1."),
    }})
    result = load_weights(build(), FIXTURES / "lstm_two_layers.pt", adapter=adapter)
    assert result.missing == result.unused == result.mismatched == []
    with np.load(FIXTURES / "lstm_two_layers.npz") as saved:
        y = run(result.module, dict(saved))["y"]
        np.testing.assert_allclose(y.to_numpy(), saved["y"], rtol=0, atol=2e-5)


# -- without torch: state dicts made by hand --------------------------------------------------

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def random_gates(rng, n_gates, d_hidden=D_HIDDEN):
    """Per gate: input weight [out, in], hidden weight [out, out], and both biases, as PyTorch
    holds them before packing."""
    return [(rng.standard_normal((d_hidden, D_INPUT)), rng.standard_normal((d_hidden, d_hidden)),
             rng.standard_normal(d_hidden), rng.standard_normal(d_hidden))
            for _ in range(n_gates)]


def packed(gates, suffix="_l0"):
    """The gates as PyTorch packs them: stacked along dim 0 in PyTorch's gate order."""
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    return {f"{name}{suffix}": np.concatenate([gate[part] for gate in gates]).astype(np.float32)
            for part, name in enumerate(names)}


def test_lstm_gates_split_in_pytorch_order_i_f_g_o():
    rng = np.random.default_rng(0)
    gates = random_gates(rng, 4)
    result = load_weights(nn.LstmConfig(D_INPUT, D_HIDDEN).init("ndarray"), packed(gates))
    assert result.missing == result.unused == result.mismatched == []
    lstm = result.module
    for (w_i, w_h, b_i, b_h), gate in zip(gates, (lstm.input_gate, lstm.forget_gate,
                                                  lstm.cell_gate, lstm.output_gate)):
        np.testing.assert_allclose(gate.input_transform.weight.val().to_numpy(), w_i.T,
                                   rtol=1e-6)
        np.testing.assert_allclose(gate.hidden_transform.weight.val().to_numpy(), w_h.T,
                                   rtol=1e-6)
        np.testing.assert_allclose(gate.input_transform.bias.val().to_numpy(), b_i, rtol=1e-6)
        np.testing.assert_allclose(gate.hidden_transform.bias.val().to_numpy(), b_h, rtol=1e-6)
    # PyTorch's equations, from its documentation, over the packed weights.
    x = rng.standard_normal((2, SEQ, D_INPUT)).astype(np.float32)
    w = packed(gates)
    h = c = np.zeros((2, D_HIDDEN))
    expected = []
    for t in range(SEQ):
        z = x[:, t] @ w["weight_ih_l0"].T + w["bias_ih_l0"] + h @ w["weight_hh_l0"].T \
            + w["bias_hh_l0"]
        i, f, g, o = np.split(z, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        expected.append(h)
    y, state = lstm(tensor(x))
    np.testing.assert_allclose(y.to_numpy(), np.stack(expected, 1), rtol=0, atol=1e-5)
    np.testing.assert_allclose(state.cell.to_numpy(), c, rtol=0, atol=1e-5)


def test_gru_gates_split_in_pytorch_order_r_z_n_with_reset_inside_the_hidden_product():
    rng = np.random.default_rng(1)
    gates = random_gates(rng, 3)
    result = load_weights(nn.GruConfig(D_INPUT, D_HIDDEN).init("ndarray"), packed(gates))
    assert result.missing == result.unused == result.mismatched == []
    gru = result.module
    for (w_i, _, _, b_h), gate in zip(gates, (gru.reset_gate, gru.update_gate, gru.new_gate)):
        np.testing.assert_allclose(gate.input_transform.weight.val().to_numpy(), w_i.T,
                                   rtol=1e-6)
        np.testing.assert_allclose(gate.hidden_transform.bias.val().to_numpy(), b_h, rtol=1e-6)
    x = rng.standard_normal((2, SEQ, D_INPUT)).astype(np.float32)
    w = packed(gates)
    h = rng.standard_normal((2, D_HIDDEN)).astype(np.float32)
    state = h
    expected = []
    for t in range(SEQ):
        x_r, x_z, x_n = np.split(x[:, t] @ w["weight_ih_l0"].T + w["bias_ih_l0"], 3, axis=1)
        h_r, h_z, h_n = np.split(h @ w["weight_hh_l0"].T + w["bias_hh_l0"], 3, axis=1)
        r, z = sigmoid(x_r + h_r), sigmoid(x_z + h_z)
        n = np.tanh(x_n + r * h_n)
        h = (1 - z) * n + z * h
        expected.append(h)
    y, _ = gru(tensor(x), tensor(state))
    np.testing.assert_allclose(y.to_numpy(), np.stack(expected, 1), rtol=0, atol=1e-5)


def test_bilstm_reads_the_reverse_direction_from_the_reverse_keys():
    rng = np.random.default_rng(2)
    ahead, back = random_gates(rng, 4), random_gates(rng, 4)
    weights = {**packed(ahead), **packed(back, "_l0_reverse")}
    result = load_weights(nn.BiLstmConfig(D_INPUT, D_HIDDEN).init("ndarray"), weights)
    assert result.missing == result.unused == result.mismatched == []
    module = result.module
    for gates, lstm in ((ahead, module.forward_lstm), (back, module.reverse_lstm)):
        np.testing.assert_allclose(lstm.cell_gate.hidden_transform.weight.val().to_numpy(),
                                   gates[2][1].T, rtol=1e-6)
        np.testing.assert_allclose(lstm.output_gate.input_transform.bias.val().to_numpy(),
                                   gates[3][2], rtol=1e-6)


def encoder_state_dict(rng, n_layers=1):
    """A PyTorch TransformerEncoder's state dict (norm_first or not: the keys are the same)."""
    weights = {}
    for layer in range(n_layers):
        shapes = {"self_attn.in_proj_weight": (3 * D_MODEL, D_MODEL),
                  "self_attn.in_proj_bias": (3 * D_MODEL,),
                  "self_attn.out_proj.weight": (D_MODEL, D_MODEL),
                  "self_attn.out_proj.bias": (D_MODEL,),
                  "linear1.weight": (D_FF, D_MODEL), "linear1.bias": (D_FF,),
                  "linear2.weight": (D_MODEL, D_FF), "linear2.bias": (D_MODEL,),
                  "norm1.weight": (D_MODEL,), "norm1.bias": (D_MODEL,),
                  "norm2.weight": (D_MODEL,), "norm2.bias": (D_MODEL,)}
        weights.update({f"layers.{layer}.{key}": rng.standard_normal(shape).astype(np.float32)
                        for key, shape in shapes.items()})
    return weights


def test_attention_in_proj_splits_into_query_key_value():
    weights = encoder_state_dict(np.random.default_rng(3), n_layers=2)
    config = nn.TransformerEncoderConfig(D_MODEL, D_FF, N_HEADS, n_layers=2)
    result = load_weights(config.init("ndarray"), weights)
    assert result.missing == result.unused == result.mismatched == []
    layer = result.module.layers[1]
    in_proj, in_bias = weights["layers.1.self_attn.in_proj_weight"], \
        weights["layers.1.self_attn.in_proj_bias"]
    for index, linear in enumerate((layer.attention.query, layer.attention.key,
                                    layer.attention.value)):
        rows = slice(index * D_MODEL, (index + 1) * D_MODEL)
        np.testing.assert_array_equal(linear.weight.val().to_numpy(), in_proj[rows].T)
        np.testing.assert_array_equal(linear.bias.val().to_numpy(), in_bias[rows])
    np.testing.assert_array_equal(layer.attention.output.weight.val().to_numpy(),
                                  weights["layers.1.self_attn.out_proj.weight"].T)
    np.testing.assert_array_equal(layer.feed_forward.linear_outer.weight.val().to_numpy(),
                                  weights["layers.1.linear2.weight"].T)
    np.testing.assert_array_equal(layer.norm_2.gamma.val().to_numpy(),
                                  weights["layers.1.norm2.weight"])


def test_a_packed_tensor_that_does_not_split_names_both_shapes():
    weights = encoder_state_dict(np.random.default_rng(4))
    weights["layers.0.self_attn.in_proj_weight"] = np.zeros((2 * D_MODEL, D_MODEL), np.float32)
    config = nn.TransformerEncoderConfig(D_MODEL, D_FF, N_HEADS, n_layers=1)
    with pytest.raises(RecordError, match=r"layers\.0\.attention\.query\.weight \(module "
                                          r"\[8, 8\], source \[16, 8\] as layers\.0\.self_attn"
                                          r"\.in_proj_weight: not 3 equal pieces along dim 0\)"):
        load_weights(config.init("ndarray"), weights)
    # An LSTM with 3 hidden features packs 12 rows, which split in 3 as a GRU's with 4 do:
    # its input weights fit, and only the hidden weights' shapes tell it apart.
    lstm = packed(random_gates(np.random.default_rng(5), 4, d_hidden=3))
    result = load_weights(nn.GruConfig(D_INPUT, D_HIDDEN).init("ndarray"), lstm,
                          allow_partial=True)
    assert result.mismatched == [
        f"{gate}.hidden_transform.weight (module [4, 4], source [3, 4] as piece {index} of 3 "
        f"along dim 0 of weight_hh_l0)"
        for index, gate in enumerate(("reset_gate", "update_gate", "new_gate"), 1)]


def test_a_missing_packed_tensor_names_the_piece_each_parameter_wanted():
    weights = encoder_state_dict(np.random.default_rng(6))
    del weights["layers.0.self_attn.in_proj_bias"]
    result = load_weights(nn.TransformerEncoderConfig(D_MODEL, D_FF, N_HEADS, 1).init("ndarray"),
                          weights, allow_partial=True)
    assert result.missing == [
        f"layers.0.attention.{name}.bias (as piece {index} of 3 along dim 0 of "
        f"layers.0.self_attn.in_proj_bias)"
        for index, name in enumerate(("query", "key", "value"), 1)]


class Pair(nn.Module):
    """Two linear maps that a source packs side by side along dim 1: ``[out, 2 * in]``."""

    left: nn.Linear
    right: nn.Linear


class Model(nn.Module):
    pair: Pair
    head: nn.Linear


def make_model() -> Model:
    return Model(Pair(nn.LinearConfig(2, 3).init("ndarray"),
                      nn.LinearConfig(2, 3).init("ndarray")),
                 nn.LinearConfig(3, 1).init("ndarray"))


def test_rules_of_ones_own_split_along_any_dim_and_override_the_parts_rules():
    model = make_model()
    packed_weight = np.arange(12, dtype=np.float32).reshape(3, 4)
    weights = {"both.w": packed_weight, "both.b_left": np.zeros(3, np.float32),
               "both.b_right": np.ones(3, np.float32), "out.weight": np.ones((1, 3), np.float32),
               "out.bias": np.zeros(1, np.float32)}
    adapter = PYTORCH.with_rules({
        Pair: {**split("w", ["left.weight", "right.weight"], lambda v: v.T, dim=1),
               "left.bias": ("b_left", None), "right.bias": ("b_right", None)},
        Model: {"pair": "both", "head": "out"},
    })
    result = load_weights(model, weights, adapter=adapter)
    assert result.missing == result.unused == result.mismatched == []
    np.testing.assert_array_equal(result.module.pair.left.weight.val().to_numpy(),
                                  packed_weight[:, :2].T)
    np.testing.assert_array_equal(result.module.pair.right.weight.val().to_numpy(),
                                  packed_weight[:, 2:].T)
    np.testing.assert_array_equal(result.module.pair.right.bias.val().to_numpy(), [1, 1, 1])
    # The head keeps Linear's own rule (transposed) under its new name.
    assert result.module.head.weight.shape == [3, 1]


def test_a_rule_for_a_sub_module_must_be_its_name():
    adapter = WeightAdapter({Model: {"pair": ("both", None)}})
    model = make_model()
    with pytest.raises(TypeError, match="the rule for 'pair' of Model names a module"):
        load_weights(model, {}, adapter=adapter)
    with pytest.raises(ValueError, match="outside the 3 pieces"):
        Chunk("w", 3, 3)
