"""Recurrent cells: ``lstm_cell`` and ``gru_cell`` against NumPy, on time-step views and at large
magnitudes, and whole layers (``lstm_sequence``, ``gru_sequence``) forwards and in reverse, with
their gradients on autodiff backends, and their errors."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, cat, float32
from burnish import functional as F
from burnish.conformance import reference
from burnish.conformance.compare import assert_close
from burnish.conformance.gradcheck import check_gradients
from burnish.conformance.samples import FLOATS, ids, laid_out, sample
from burnish.errors import DTypeError, ShapeError

BATCH, HIDDEN, SEQ = 3, 4, 3


def lstm_reference(input_gates, hidden_gates, cell):
    i, f, g, o = np.split(input_gates + hidden_gates, 4, axis=1)
    new_cell = reference.sigmoid(f) * cell + reference.sigmoid(i) * np.tanh(g)
    return reference.sigmoid(o) * np.tanh(new_cell), new_cell


def gru_reference(input_gates, hidden_gates, hidden):
    x_r, x_z, x_n = np.split(input_gates, 3, axis=1)
    h_r, h_z, h_n = np.split(hidden_gates, 3, axis=1)
    r, z = reference.sigmoid(x_r + h_r), reference.sigmoid(x_z + h_z)
    n = np.tanh(x_n + r * h_n)
    return (1 - z) * n + z * hidden


def _operands(gates: int, dtype, scale: float) -> tuple[np.ndarray, ...]:
    """A projection ``[batch, seq, gates * hidden]`` (a step of it is a view), the hidden
    part of the gates and a state, as ``dtype`` holds them."""
    projected = sample((BATCH, SEQ, gates * HIDDEN), dtype, -scale, scale, key=gates)
    hidden_gates = sample((BATCH, gates * HIDDEN), dtype, -scale, scale, key=gates + 1)
    state = sample((BATCH, HIDDEN), dtype, -2.0, 2.0, key=gates + 2)
    return projected, hidden_gates, state


@pytest.mark.parametrize("scale", [3.0, 40.0], ids=["moderate", "large"])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_lstm_cell(device, dtype, scale):
    projected, hidden_gates, cell = _operands(4, dtype, scale)
    hidden, new_cell = F.lstm_cell(Tensor.from_data(projected, device, dtype)[:, 1],
                                   Tensor.from_data(hidden_gates, device, dtype),
                                   laid_out(cell, device, dtype, "permuted"))
    expected_hidden, expected_cell = lstm_reference(projected[:, 1].astype(np.float64),
                                                    hidden_gates.astype(np.float64),
                                                    cell.astype(np.float64))
    assert_close(hidden, expected_hidden, dtype)
    assert_close(new_cell, expected_cell, dtype)


@pytest.mark.parametrize("scale", [3.0, 40.0], ids=["moderate", "large"])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_gru_cell(device, dtype, scale):
    projected, hidden_gates, hidden = _operands(3, dtype, scale)
    out = F.gru_cell(Tensor.from_data(projected, device, dtype)[:, 2],
                     Tensor.from_data(hidden_gates, device, dtype),
                     laid_out(hidden, device, dtype, "strided"))
    expected = gru_reference(projected[:, 2].astype(np.float64),
                             hidden_gates.astype(np.float64), hidden.astype(np.float64))
    assert_close(out, expected, dtype)


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("uses", ["both", "hidden", "cell"])
def test_lstm_cell_gradients(device, uses):
    def fn(projected, hidden_gates, cell):
        hidden, new_cell = F.lstm_cell(projected[:, 1], hidden_gates, cell)
        if uses == "hidden":
            return hidden
        if uses == "cell":
            return new_cell
        # Two steps: the second reads the first's cell, both outputs reach the loss.
        second_hidden, second_cell = F.lstm_cell(projected[:, 2], hidden_gates, new_cell)
        return cat([hidden, second_hidden, second_cell], 1)

    check_gradients(fn, *_operands(4, float32, 2.0), device=device, key=uses)


@pytest.mark.requires_autodiff
def test_gru_cell_gradients(device):
    def fn(projected, hidden_gates, hidden):
        first = F.gru_cell(projected[:, 0], hidden_gates, hidden)
        return cat([first, F.gru_cell(projected[:, 1], hidden_gates, first)], 1)

    check_gradients(fn, *_operands(3, float32, 2.0), device=device)


@pytest.mark.requires_dtype(float32)
def test_cells_name_bad_operands(device):
    gates = Tensor.zeros([2, 8], device)
    state = Tensor.zeros([2, 2], device)
    with pytest.raises(ShapeError, match=r"hidden_gates must be \[batch, 4 \* d_hidden\]"):
        F.lstm_cell(gates, Tensor.zeros([2, 6], device), state)
    with pytest.raises(ShapeError, match=r"input_gates must be \[batch, 3 \* d_hidden\]"):
        F.gru_cell(gates, Tensor.zeros([2, 6], device), state)
    with pytest.raises(ShapeError, match="the state must be"):
        F.lstm_cell(gates, gates, Tensor.zeros([2, 2, 1], device))
    with pytest.raises(DTypeError, match="needs float tensors"):
        F.gru_cell(gates, gates, Tensor.zeros([2, 2], device, "int32"))


# -- whole layers: lstm_sequence and gru_sequence ---------------------------------------------


def _layer_reference(kind: str, projected, weight, bias, hidden, cell, reverse):
    """Every step's hidden state ``[seq, batch, d]`` and the final state(s), in float64."""
    seq = projected.shape[0]
    outputs = [None] * seq
    for t in (reversed(range(seq)) if reverse else range(seq)):
        hidden_gates = hidden @ weight + (0 if bias is None else bias)
        if kind == "lstm":
            hidden, cell = lstm_reference(projected[t], hidden_gates, cell)
        else:
            hidden = gru_reference(projected[t], hidden_gates, hidden)
        outputs[t] = hidden
    stacked = np.stack(outputs) if seq else np.zeros((0, *hidden.shape))
    return (stacked, hidden, cell) if kind == "lstm" else (stacked, hidden)


def _layer_operands(kind: str, seq: int, dtype, scale: float = 1.5):
    gates = 4 if kind == "lstm" else 3
    key = 10 * gates + seq
    projected = sample((seq, BATCH, gates * HIDDEN), dtype, -scale, scale, key=key)
    weight = sample((HIDDEN, gates * HIDDEN), dtype, -0.8, 0.8, key=key + 1)
    bias = sample((gates * HIDDEN,), dtype, -0.5, 0.5, key=key + 2)
    hidden = sample((BATCH, HIDDEN), dtype, -1.0, 1.0, key=key + 3)
    cell = sample((BATCH, HIDDEN), dtype, -2.0, 2.0, key=key + 4)
    return projected, weight, bias, hidden, cell


@pytest.mark.parametrize("seq", [0, 1, 4])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_lstm_sequence(device, dtype, reverse, seq):
    projected, weight, _, hidden, cell = _layer_operands("lstm", seq, dtype)
    # The weight transposed in memory (as a transposed parameter is) and a strided state.
    results = F.lstm_sequence(Tensor.from_data(projected, device, dtype),
                              laid_out(weight, device, dtype, "permuted"),
                              laid_out(hidden, device, dtype, "strided"),
                              laid_out(cell, device, dtype, "permuted"), reverse)
    expected = _layer_reference("lstm", *[a.astype(np.float64) for a in
                                          (projected, weight)], None,
                                hidden.astype(np.float64), cell.astype(np.float64), reverse)
    for got, want in zip(results, expected):
        assert got.dims() == list(want.shape)
        assert_close(got, want, dtype)


@pytest.mark.parametrize("biased", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("seq", [0, 1, 4])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_gru_sequence(device, dtype, reverse, seq, biased):
    projected, weight, bias, hidden, _ = _layer_operands("gru", seq, dtype)
    # The input gates a time-major view of a batch-first projection.
    batch_first = np.ascontiguousarray(projected.transpose(1, 0, 2))
    results = F.gru_sequence(Tensor.from_data(batch_first, device, dtype).swap_dims(0, 1),
                             Tensor.from_data(weight, device, dtype),
                             Tensor.from_data(bias, device, dtype) if biased else None,
                             Tensor.from_data(hidden, device, dtype), reverse)
    expected = _layer_reference("gru", projected.astype(np.float64),
                                weight.astype(np.float64),
                                bias.astype(np.float64) if biased else None,
                                hidden.astype(np.float64), None, reverse)
    for got, want in zip(results, expected):
        assert got.dims() == list(want.shape)
        assert_close(got, want, dtype)


@pytest.mark.requires_autodiff
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_lstm_sequence_gradients(device, reverse):
    def fn(projected, weight, hidden, cell):
        outputs, last, last_cell = F.lstm_sequence(projected, weight, hidden, cell, reverse)
        return cat([outputs.reshape([-1, HIDDEN]), last, last_cell], 0)

    projected, weight, _, hidden, cell = _layer_operands("lstm", SEQ, float32)
    check_gradients(fn, projected, weight, hidden, cell, device=device, key=reverse)


@pytest.mark.requires_autodiff
def test_gru_sequence_gradients(device):
    def fn(projected, weight, bias, hidden):
        outputs, last = F.gru_sequence(projected, weight, bias, hidden, True)
        return cat([outputs.reshape([-1, HIDDEN]), last], 0)

    projected, weight, bias, hidden, _ = _layer_operands("gru", SEQ, float32)
    check_gradients(fn, projected, weight, bias, hidden, device=device)


@pytest.mark.requires_dtype(float32)
def test_sequences_name_bad_operands(device):
    gates, weight = Tensor.zeros([3, 2, 8], device), Tensor.zeros([2, 8], device)
    state = Tensor.zeros([2, 2], device)
    with pytest.raises(ShapeError, match=r"input_gates must be \[seq, batch, 4 \* d_hidden\]"):
        F.lstm_sequence(Tensor.zeros([3, 8], device), weight, state, state)
    with pytest.raises(ShapeError, match=r"hidden_weight must be \[d_hidden, 3 \* d_hidden\]"):
        F.gru_sequence(Tensor.zeros([3, 2, 6], device), weight, None, state)
    with pytest.raises(ShapeError, match=r"hidden_bias must be \[3 \* d_hidden\] = \[6\]"):
        F.gru_sequence(Tensor.zeros([3, 2, 6], device), Tensor.zeros([2, 6], device),
                       Tensor.zeros([8], device), state)
    with pytest.raises(ShapeError, match=r"cell must be \[batch, d_hidden\]"):
        F.lstm_sequence(gates, weight, state, Tensor.zeros([2, 3], device))
    with pytest.raises(DTypeError, match="hidden_weight is int32"):
        F.lstm_sequence(gates, Tensor.zeros([2, 8], device, "int32"), state, state)
