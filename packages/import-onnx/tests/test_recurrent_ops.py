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
