"""Lstm, BiLstm and Gru against NumPy step loops written from PyTorch's equations."""

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
