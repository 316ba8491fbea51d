"""ONNX's GRU as PyTorch's (reset gate after the product) runs as one ``gru_sequence`` per
direction; its results equal the step-by-step composition the other variants use."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
import burnish.functional as F
from burnish import Tensor
from burnish.onnx.ops.recurrent import recurrent


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_gru_layer_equals_the_step_by_step_composition(direction, layout, monkeypatch):
    rng = np.random.default_rng(3)
    seq, batch, d_input, hidden = 5, 3, 4, 6
    directions = 2 if direction == "bidirectional" else 1

    def tensor(*shape):
        return Tensor.from_data(rng.standard_normal(shape).astype(np.float32))

    x = tensor(*((batch, seq, d_input) if layout else (seq, batch, d_input)))
    w, r = tensor(directions, 3 * hidden, d_input), tensor(directions, 3 * hidden, hidden)
    b = tensor(directions, 6 * hidden)
    h0 = tensor(*((batch, directions, hidden) if layout else (directions, batch, hidden)))
    calls = []
    original = F.gru_sequence
    monkeypatch.setattr(F, "gru_sequence", lambda *a: calls.append(1) or original(*a))
    fast = recurrent("GRU", x, w, r, b, None, h0, hidden_size=hidden, direction=direction,
                     layout=layout, linear_before_reset=1)
    assert len(calls) == directions
    # A clip no value reaches takes the general path: the same arithmetic, step by step.
    slow = recurrent("GRU", x, w, r, b, None, h0, hidden_size=hidden, direction=direction,
                     layout=layout, linear_before_reset=1, clip=1e30)
    assert len(calls) == directions
    for a, e in zip(fast, slow):
        assert a.dims() == e.dims()
        np.testing.assert_allclose(a.to_numpy(), e.to_numpy(), rtol=1e-5, atol=1e-6)
    assert bn.float32 == fast[0].dtype


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("states", [False, True])
def test_packed_layers_equal_the_step_by_step_composition(kind, direction, layout, states):
    """Constant weights packed at import (``packed_gates``) then ``packed_recurrent``: the same
    outputs as ONNX's equations step by step, for every direction, layout and initial state."""
    from burnish.onnx.converters.layers import packed_gates
    from burnish.onnx.ops.recurrent import packed_recurrent

    rng = np.random.default_rng(4)
    seq, batch, d_input, hidden = 5, 3, 4, 6
    directions = 2 if direction == "bidirectional" else 1
    gates = 4 if kind == "LSTM" else 3

    def array(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    x = array(*((batch, seq, d_input) if layout else (seq, batch, d_input)))
    w, r = array(directions, gates * hidden, d_input), array(directions, gates * hidden, hidden)
    b = array(directions, 2 * gates * hidden)
    state = (batch, directions, hidden) if layout else (directions, batch, hidden)
    h0, c0 = (Tensor.from_data(array(*state)) for _ in range(2)) if states else (None, None)
    packed = {k: Tensor.from_data(v) for k, v in packed_gates(kind, w, r, b).items()}
    fast = packed_recurrent(kind, Tensor.from_data(x), packed["weight"],
                            packed["hidden_weight"], packed["bias"], packed.get("hidden_bias"),
                            h0, c0 if kind == "LSTM" else None, direction=direction,
                            layout=layout)
    extra = {"linear_before_reset": 1} if kind == "GRU" else {}
    # A clip no value reaches: the general path, ONNX's gate order and equations step by step.
    slow = recurrent(kind, *(Tensor.from_data(a) for a in (x, w, r, b)), None, h0,
                     c0 if kind == "LSTM" else None, hidden_size=hidden, direction=direction,
                     layout=layout, clip=1e30, **extra)
    assert len(fast) == len(slow) == (3 if kind == "LSTM" else 2)
    for a, e in zip(fast, slow):
        assert a.dims() == e.dims()
        np.testing.assert_allclose(a.to_numpy(), e.to_numpy(), rtol=1e-5, atol=1e-6)
