"""Recurrent cell kernels (``kernels.recurrent``) against the protocol's default beyond the
conformance suite's sizes: more units than a workgroup, a time step of a projection (a view),
a batch of one, large pre-activations; one launch each, forward and backward; and the launches
a recurrent layer's training step makes per time step."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Tensor, nn
from burnish.backend.recurrent_ops import RecurrentOps
from burnish.dtype import float32
from burnish.tensor_data import TensorData

#: name -> (batch, d_hidden, scale of the pre-activations)
CASES = {"units_300": (3, 100, 3.0), "batch_1": (1, 37, 3.0), "large": (4, 16, 60.0)}
SEQ = 3


def _put(backend, a):
    return backend.from_data(TensorData(a.astype(np.float32), float32),
                             backend.default_device())


def _get(backend, x):
    return backend.into_data(x, float32).to_numpy().astype(np.float64)


def _inputs(backend, case, gates):
    batch, d, scale = CASES[case]
    rng = np.random.default_rng(gates)
    projection = _put(backend, rng.uniform(-scale, scale, (batch, SEQ, gates * d)))
    # Step 1 as a view whose rows are SEQ * gates * d apart (batch-first, as a user may pass).
    step = backend.slice(projection, [(0, batch, 1), (1, 2, 1), (0, gates * d, 1)])
    step = step.view((batch, gates * d), (step.strides[0], 1), step.offset)
    hidden_gates = _put(backend, rng.uniform(-scale, scale, (batch, gates * d)))
    state = _put(backend, rng.uniform(-2, 2, (batch, d)))
    grads = [_put(backend, rng.uniform(-1, 1, (batch, d))) for _ in range(2)]
    return step, hidden_gates, state, grads


def _check(backend, op, args, expected_launches=1):
    runtime = backend.runtime(backend.default_device())
    before = runtime.launches
    got = getattr(backend, op)(*args, float32)
    assert runtime.launches - before == expected_launches
    expected = getattr(RecurrentOps, op)(backend, *args, float32)
    got, expected = (got, expected) if isinstance(got, tuple) else ((got,), (expected,))
    for a, b in zip(got, expected):
        np.testing.assert_allclose(_get(backend, a), _get(backend, b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", list(CASES))
def test_lstm_kernels_match_the_default(jit_backend, case):
    step, hidden_gates, cell, (grad_hidden, grad_cell) = _inputs(jit_backend, case, 4)
    _check(jit_backend, "lstm_cell", (step, hidden_gates, cell))
    _check(jit_backend, "lstm_cell_backward",
           (step, hidden_gates, cell, grad_hidden, grad_cell))


@pytest.mark.parametrize("case", list(CASES))
def test_gru_kernels_match_the_default(jit_backend, case):
    step, hidden_gates, hidden, (grad, _) = _inputs(jit_backend, case, 3)
    _check(jit_backend, "gru_cell", (step, hidden_gates, hidden))
    _check(jit_backend, "gru_cell_backward", (step, hidden_gates, hidden, grad))


def _training_step_launches(backend, seq: int) -> int:
    device = burnish.backend(f"autodiff+{backend.name}").default_device()
    runtime = backend.runtime(backend.default_device())
    layers = [nn.LstmConfig(3, 8).init(device), nn.LstmConfig(8, 8).init(device)]
    x = Tensor.from_data(np.ones((2, seq, 3), np.float32), device)

    def step() -> None:
        y = x
        for layer in layers:
            y, _ = layer(y)
        (y * y).mean().backward()
        backend.sync(backend.default_device())

    step()  # warm: kernels compiled, products tuned
    before = runtime.launches
    step()
    return runtime.launches - before


def test_lstm_training_step_launches_per_time_step(jit_backend):
    # Per layer and time step: forward one product, one cell and the step's copy into the
    # stacked outputs; backward the cell's kernel, two products, the step's copy into the
    # projection's gradient and a few sums of gradients: 9.5 (the per-gate formula: 115).
    extra = _training_step_launches(jit_backend, 8) - _training_step_launches(jit_backend, 4)
    assert extra / (4 * 2) <= 12
