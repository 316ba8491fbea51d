"""Lstm, BiLstm and Gru against NumPy step loops written from PyTorch's equations."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor, nn, stack
from burnish import functional as F
from burnish.errors import BackendNotInstalledError, ShapeError

RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def close(tensor, expected, tol=1e-5):
    np.testing.assert_allclose(tensor.to_numpy(), expected, rtol=tol, atol=tol)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def affine(linear, v):
    y = v @ linear.weight.val().to_numpy().astype(np.float64)
    return y if linear.bias is None else y + linear.bias.val().to_numpy()


def gate_ref(gate, x, h):
    return affine(gate.input_transform, x) + affine(gate.hidden_transform, h)


def lstm_ref(lstm, x, cell=None, hidden=None, reverse=False):
    batch, seq, _ = x.shape
    cell = np.zeros((batch, lstm.d_hidden)) if cell is None else cell
    hidden = np.zeros((batch, lstm.d_hidden)) if hidden is None else hidden
    outputs = np.zeros((batch, seq, lstm.d_hidden))
    for t in (reversed(range(seq)) if reverse else range(seq)):
        i = sigmoid(gate_ref(lstm.input_gate, x[:, t], hidden))
        f = sigmoid(gate_ref(lstm.forget_gate, x[:, t], hidden))
        g = np.tanh(gate_ref(lstm.cell_gate, x[:, t], hidden))
        o = sigmoid(gate_ref(lstm.output_gate, x[:, t], hidden))
        cell = f * cell + i * g
        hidden = o * np.tanh(cell)
        outputs[:, t] = hidden
    return outputs, cell, hidden


def gru_ref(gru, x, hidden=None):
    batch, seq, _ = x.shape
    hidden = np.zeros((batch, gru.d_hidden)) if hidden is None else hidden
    outputs = np.zeros((batch, seq, gru.d_hidden))
    for t in range(seq):
        r = sigmoid(gate_ref(gru.reset_gate, x[:, t], hidden))
        z = sigmoid(gate_ref(gru.update_gate, x[:, t], hidden))
        new = gru.new_gate
        n = np.tanh(affine(new.input_transform, x[:, t])
                    + r * affine(new.hidden_transform, hidden))
        hidden = (1 - z) * n + z * hidden
        outputs[:, t] = hidden
    return outputs, hidden


def test_lstm_matches_numpy_with_and_without_initial_state():
    lstm = nn.LstmConfig(3, 5).init()
    bound = 1 / np.sqrt(5)
    assert all(np.abs(p.val().to_numpy()).max() <= bound for p in lstm.params())
    assert lstm.num_params() == 4 * (3 * 5 + 5 + 5 * 5 + 5)
    x = data(2, 4, 3).astype(np.float64)
    out, state = lstm(Tensor.from_data(x.astype(np.float32)))
    expected, cell, hidden = lstm_ref(lstm, x)
    assert out.dims() == [2, 4, 5]
    close(out, expected)
    close(state.cell, cell)
    close(state.hidden, hidden)
    c0, h0 = data(2, 5), data(2, 5)
    out, state = lstm(Tensor.from_data(x.astype(np.float32)),
                      nn.LstmState(Tensor.from_data(c0), Tensor.from_data(h0)))
    expected, cell, hidden = lstm_ref(lstm, x, c0, h0)
    close(out, expected)
    close(state.cell, cell)
    with pytest.raises(ShapeError, match="initial state"):
        lstm(Tensor.from_data(x), nn.LstmState(Tensor.zeros([2, 4]), Tensor.zeros([2, 4])))
    with pytest.raises(ShapeError, match="batch, seq"):
        lstm(Tensor.zeros([2, 4, 4]))


def test_bilstm_concatenates_both_directions():
    bilstm = nn.BiLstmConfig(3, 4, bias=False).init()
    assert bilstm.num_params() == 2 * 4 * (3 * 4 + 4 * 4)
    x = data(2, 5, 3)
    c0, h0 = data(2, 2, 4), data(2, 2, 4)
    out, state = bilstm(Tensor.from_data(x), nn.LstmState(Tensor.from_data(c0),
                                                           Tensor.from_data(h0)))
    ahead, ahead_cell, ahead_hidden = lstm_ref(bilstm.forward_lstm, x, c0[0], h0[0])
    back, back_cell, back_hidden = lstm_ref(bilstm.reverse_lstm, x, c0[1], h0[1], reverse=True)
    assert out.dims() == [2, 5, 8] and state.hidden.dims() == [2, 2, 4]
    close(out, np.concatenate([ahead, back], -1))
    close(state.cell, np.stack([ahead_cell, back_cell]))
    close(state.hidden, np.stack([ahead_hidden, back_hidden]))
    # The backward direction's output at step 0 has seen the whole sequence.
    close(out[:, 0, 4:], back_hidden)


def test_gru_matches_numpy():
    gru = nn.GruConfig(3, 4).init()
    x = data(2, 6, 3)
    out, hidden = gru(Tensor.from_data(x))
    expected, final = gru_ref(gru, x.astype(np.float64))
    close(out, expected)
    close(hidden, final)
    h0 = data(2, 4)
    out, hidden = gru(Tensor.from_data(x), Tensor.from_data(h0))
    expected, final = gru_ref(gru, x.astype(np.float64), h0)
    close(out, expected)
    assert nn.GruConfig.from_json(nn.GruConfig(3, 4).to_json()) == nn.GruConfig(3, 4)


def test_gradients_flow_through_recurrent_layers(ad):
    lstm, bilstm, gru = (nn.LstmConfig(3, 4).init(ad), nn.BiLstmConfig(4, 2).init(ad),
                         nn.GruConfig(4, 3).init(ad))
    x = Tensor.from_data(data(2, 5, 3), ad)
    out, _ = lstm(x)
    out, _ = bilstm(out)
    out, hidden = gru(out)
    grads = ((out * out).mean() + hidden.sum()).backward()
    for model in (lstm, bilstm, gru):
        for name, param in model.named_params():
            grad = param.val().grad(grads)
            assert grad is not None and np.all(np.isfinite(grad.to_numpy())), name


def test_bilstm_round_trips_through_a_record(tmp_path):
    bilstm = nn.BiLstmConfig(3, 4).init()
    bilstm.save(tmp_path / "bilstm.safetensors")
    loaded = nn.BiLstmConfig(3, 4).init().load(tmp_path / "bilstm.safetensors")
    assert "reverse_lstm.output_gate.hidden_transform.weight" in dict(loaded.named_params())
    x = Tensor.from_data(data(2, 3, 3))
    close(loaded(x)[0], bilstm(x)[0].to_numpy(), 0)


# -- the packed path against the per-gate formula ------------------------------------------------
#
# The layers project the input of every gate and step in one product and run each step as one
# product and one cell op (``F.lstm_cell``, ``F.gru_cell``). Below is the formula they had
# before, one product per gate and step and the gates' elementwise ops, written with burnish's
# ops: the two must agree, forward and in every gradient.


def per_gate_lstm(lstm, x, state=None, reverse=False):
    batch, seq, _ = x.dims()
    if state is None:
        cell = hidden = Tensor.zeros([batch, lstm.d_hidden], x.device, x.dtype)
    else:
        cell, hidden = state
    gates = (lstm.input_gate, lstm.forget_gate, lstm.cell_gate, lstm.output_gate)
    inputs = [gate.input_transform(x) for gate in gates]
    outputs = [None] * seq
    for t in (reversed(range(seq)) if reverse else range(seq)):
        i, f, g, o = (projected[:, t] + gate.hidden_transform(hidden)
                      for projected, gate in zip(inputs, gates))
        cell = F.sigmoid(f) * cell + F.sigmoid(i) * g.tanh()
        hidden = F.sigmoid(o) * cell.tanh()
        outputs[t] = hidden
    return stack(outputs, 1), nn.LstmState(cell, hidden)


def per_gate_gru(gru, x, hidden=None):
    batch, seq, _ = x.dims()
    if hidden is None:
        hidden = Tensor.zeros([batch, gru.d_hidden], x.device, x.dtype)
    reset_in, update_in, new_in = (gate.input_transform(x)
                                   for gate in (gru.reset_gate, gru.update_gate, gru.new_gate))
    outputs = []
    for t in range(seq):
        r = F.sigmoid(reset_in[:, t] + gru.reset_gate.hidden_transform(hidden))
        z = F.sigmoid(update_in[:, t] + gru.update_gate.hidden_transform(hidden))
        n = (new_in[:, t] + r * gru.new_gate.hidden_transform(hidden)).tanh()
        hidden = (1.0 - z) * n + z * hidden
        outputs.append(hidden)
    return stack(outputs, 1), hidden


def autodiff_device(name):
    try:
        return bn.backend(name).default_device()
    except (BackendNotInstalledError, RuntimeError) as error:
        pytest.skip(f"{name}: {error}")


def run_both(model, packed, per_gate, x, *state):
    """Outputs and the gradients of every parameter and of ``x`` (and of the initial state)
    of a weighted loss over every output, through both paths."""
    results = []
    for run in (packed, per_gate):
        inputs = [t.detach().require_grad() for t in (x, *state)]
        out, final = run(model, *inputs)
        finals = list(final) if isinstance(final, tuple) else [final]
        weights = Tensor.from_data(np.linspace(-1, 1, out.numel()).reshape(out.shape),
                                   x.device, x.dtype)
        loss = (out * weights).sum() + sum((f * f).sum() for f in finals)
        grads = loss.backward()
        values = [out.to_numpy()] + [f.to_numpy() for f in finals]
        values += [t.grad(grads).to_numpy() for t in inputs]
        values += [p.val().grad(grads).to_numpy() for _, p in model.named_params()]
        results.append(values)
    return results


def assert_same(results, tol):
    packed, per_gate = results
    assert len(packed) == len(per_gate)
    for a, b in zip(packed, per_gate):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# Float tolerance: the packed path adds the two biases before the hidden part, the per-gate
# path after it; everything else is the same arithmetic.
BACKENDS = [("autodiff+ndarray", 2e-5), ("autodiff+rocm", 5e-5), ("autodiff+wgpu", 5e-5)]


@pytest.mark.parametrize("name,tol", BACKENDS, ids=[b for b, _ in BACKENDS])
@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_packed_path_matches_per_gate_formula(name, tol, reverse):
    device = autodiff_device(name)
    lstm = nn.LstmConfig(3, 5).init(device)
    x = Tensor.from_data(data(2, 6, 3), device)
    state = (Tensor.from_data(data(2, 5), device), Tensor.from_data(data(2, 5), device))

    def packed(model, x, cell, hidden):
        return model(x, nn.LstmState(cell, hidden), reverse=reverse)

    def per_gate(model, x, cell, hidden):
        return per_gate_lstm(model, x, nn.LstmState(cell, hidden), reverse=reverse)

    assert_same(run_both(lstm, packed, per_gate, x, *state), tol)


@pytest.mark.parametrize("name,tol", BACKENDS, ids=[b for b, _ in BACKENDS])
def test_gru_packed_path_matches_per_gate_formula(name, tol):
    device = autodiff_device(name)
    gru = nn.GruConfig(3, 4).init(device)
    x = Tensor.from_data(data(2, 6, 3), device)
    results = run_both(gru, lambda m, x, h: m(x, h), per_gate_gru, x,
                       Tensor.from_data(data(2, 4), device))
    assert_same(results, tol)


def test_stacked_bidirectional_packed_path_matches_per_gate_formula(ad):
    bilstm = nn.BiLstmConfig(3, 4, bias=False).init(ad)
    top = nn.LstmConfig(8, 3).init(ad)

    class Stack(nn.Module):
        bilstm: nn.BiLstm
        top: nn.Lstm

    model = Stack(bilstm=bilstm, top=top)

    def packed(model, x):
        return model.top(model.bilstm(x)[0])

    def per_gate(model, x):
        ahead, _ = per_gate_lstm(model.bilstm.forward_lstm, x)
        back, _ = per_gate_lstm(model.bilstm.reverse_lstm, x, reverse=True)
        return per_gate_lstm(model.top, bn.cat([ahead, back], 2))

    assert_same(run_both(model, packed, per_gate, Tensor.from_data(data(2, 5, 3), ad)), 2e-5)


def test_a_layer_is_one_sequence_op_and_a_cell_op_per_step_under_autodiff(ad, monkeypatch):
    calls = []
    for op in ("lstm_sequence", "gru_sequence", "lstm_cell", "gru_cell", "sigmoid", "tanh"):
        original = getattr(F, op)
        monkeypatch.setattr(F, op, lambda *a, _op=op, _f=original: calls.append(_op) or _f(*a))
    inner = ad.backend._inner
    for op in ("lstm_sequence", "gru_sequence", "lstm_cell", "gru_cell", "matmul"):
        original = getattr(inner, op)
        monkeypatch.setattr(inner, op, lambda *a, _op=op, _f=original:
                            calls.append("inner " + _op) or _f(*a))
    lstm, gru = nn.LstmConfig(3, 4).init(ad), nn.GruConfig(3, 4).init(ad)
    x = Tensor.from_data(data(2, 5, 3), ad)
    lstm(x)
    gru(x)
    # The parameters are tracked: the default's composition, a product and a cell per step.
    step = ["inner matmul", "inner lstm_cell"]
    assert calls == ["inner matmul", "lstm_sequence", *step * 5,
                     "inner matmul", "gru_sequence", *["inner matmul", "inner gru_cell"] * 5]
    calls.clear()
    lstm.no_grad()(x)
    # Nothing tracked: the inner backend's sequence op, once (ndarray runs the default).
    assert calls == ["inner matmul", "lstm_sequence", "inner lstm_sequence", *step * 5]


def test_an_empty_sequence_returns_no_steps_and_the_initial_state():
    lstm, gru = nn.LstmConfig(3, 4).init(), nn.GruConfig(3, 4).init()
    x = Tensor.zeros([2, 0, 3])
    out, state = lstm(x)
    assert out.dims() == [2, 0, 4] and state.hidden.dims() == [2, 4]
    h0 = Tensor.from_data(data(2, 4))
    out, hidden = gru(x, h0)
    assert out.dims() == [2, 0, 4]
    close(hidden, h0.to_numpy(), 0)


def test_layers_under_autocast_run_step_by_step_with_low_precision_products(monkeypatch):
    backend = bn.backend("ndarray")
    seen = []
    original = backend.matmul
    monkeypatch.setattr(backend, "matmul", lambda a, b: seen.append(str(a.dtype)) or original(a, b))
    lstm, gru = nn.LstmConfig(3, 4).init("ndarray"), nn.GruConfig(3, 4).init("ndarray")
    x = Tensor.from_data(data(2, 5, 3))
    with bn.autocast(bn.bfloat16):
        out, state = lstm(x)
        gru_out, _ = gru(x)
    # The input projection and every step's product in bfloat16; cells in float32.
    assert seen == ["bfloat16"] * 6 * 2
    assert out.dtype == bn.float32 and state.cell.dtype == bn.float32
    assert gru_out.dtype == bn.float32
    plain, _ = lstm(x)
    np.testing.assert_allclose(out.to_numpy(), plain.to_numpy(), atol=0.05)
