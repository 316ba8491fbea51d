"""Recurrent cells: one time step's gate nonlinearities and state update (LSTM, GRU) as one op,
so a GPU backend runs a step in one kernel instead of a dozen elementwise launches."""

from __future__ import annotations

from abc import ABC

from burnish.backend.base import Primitive
from burnish.dtype import DType


class RecurrentOps(ABC):  # noqa: B024 (only defaults, by design)
    """Cells of recurrent layers, on float tensors of one dtype. Gate pre-activations arrive in
    two parts, the input's (``x @ W_i + b_i``) and the hidden state's (``h @ W_h + b_h``), each
    ``[batch, gates * d_hidden]`` with the gates side by side in PyTorch's order; states are
    ``[batch, d_hidden]``. Operands may be views (a time step of a ``[batch, seq, ...]``
    projection). Results are new tensors. Backends override these for speed, not for
    correctness."""

    def lstm_cell(self, input_gates: Primitive, hidden_gates: Primitive, cell: Primitive,
                  dtype: DType) -> tuple[Primitive, Primitive]:
        """One LSTM step; gates ``(i, f, g, o)``: with ``a = input_gates + hidden_gates``,
        ``c' = sigmoid(a_f) * cell + sigmoid(a_i) * tanh(a_g)`` and
        ``h' = sigmoid(a_o) * tanh(c')``; returns ``(h', c')``."""
        i, f, g, o = _split(self, self.add(input_gates, hidden_gates), 4)
        new_cell = self.add(self.mul(self.sigmoid(f, dtype), cell),
                            self.mul(self.sigmoid(i, dtype), self.tanh(g)))
        return self.mul(self.sigmoid(o, dtype), self.tanh(new_cell)), new_cell

    def lstm_cell_backward(self, input_gates: Primitive, hidden_gates: Primitive,
                           cell: Primitive, grad_hidden: Primitive, grad_cell: Primitive,
                           dtype: DType) -> tuple[Primitive, Primitive]:
        """The gradients through ``lstm_cell`` (same inputs) given those of ``h'`` and ``c'``:
        ``(grad of the gates, grad of cell)``; the gates' gradient ``[batch, 4 * d_hidden]`` is
        both ``input_gates``' and ``hidden_gates``' (their sum is what the cell reads)."""
        i, f, g, o = _split(self, self.add(input_gates, hidden_gates), 4)
        i, f, o = self.sigmoid(i, dtype), self.sigmoid(f, dtype), self.sigmoid(o, dtype)
        g = self.tanh(g)
        tanh_cell = self.tanh(self.add(self.mul(f, cell), self.mul(i, g)))
        # dc' = grad_cell + grad_hidden * o * (1 - tanh(c')^2)
        grad_new = self.add(grad_cell, self.mul(self.mul(grad_hidden, o),
                                                _one_minus_square(self, tanh_cell, dtype)))
        grad_i = self.mul(self.mul(grad_new, g), _sigmoid_slope(self, i, dtype))
        grad_f = self.mul(self.mul(grad_new, cell), _sigmoid_slope(self, f, dtype))
        grad_g = self.mul(self.mul(grad_new, i), _one_minus_square(self, g, dtype))
        grad_o = self.mul(self.mul(grad_hidden, tanh_cell), _sigmoid_slope(self, o, dtype))
        return self.cat([grad_i, grad_f, grad_g, grad_o], 1), self.mul(grad_new, f)

    def gru_cell(self, input_gates: Primitive, hidden_gates: Primitive, hidden: Primitive,
                 dtype: DType) -> Primitive:
        """One GRU step; gates ``(r, z, n)``: ``r = sigmoid(x_r + h_r)``,
        ``z = sigmoid(x_z + h_z)``, ``n = tanh(x_n + r * h_n)`` (``x_*`` parts of
        ``input_gates``, ``h_*`` of ``hidden_gates``); returns ``(1 - z) * n + z * hidden``."""
        x_r, x_z, x_n = _split(self, input_gates, 3)
        h_r, h_z, h_n = _split(self, hidden_gates, 3)
        r = self.sigmoid(self.add(x_r, h_r), dtype)
        z = self.sigmoid(self.add(x_z, h_z), dtype)
        n = self.tanh(self.add(x_n, self.mul(r, h_n)))
        # (1 - z) * n + z * hidden = n + z * (hidden - n)
        return self.add(n, self.mul(z, self.sub(hidden, n)))

    def gru_cell_backward(self, input_gates: Primitive, hidden_gates: Primitive,
                          hidden: Primitive, grad: Primitive,
                          dtype: DType) -> tuple[Primitive, Primitive, Primitive]:
        """The gradients through ``gru_cell`` (same inputs) given that of its output:
        ``(grad of input_gates, grad of hidden_gates, grad of hidden)``."""
        x_r, x_z, x_n = _split(self, input_gates, 3)
        h_r, h_z, h_n = _split(self, hidden_gates, 3)
        r = self.sigmoid(self.add(x_r, h_r), dtype)
        z = self.sigmoid(self.add(x_z, h_z), dtype)
        n = self.tanh(self.add(x_n, self.mul(r, h_n)))
        grad_n = self.mul(self.mul(grad, self.add_scalar(self.neg(z, dtype), 1.0, dtype)),
                          _one_minus_square(self, n, dtype))
        grad_r = self.mul(self.mul(grad_n, h_n), _sigmoid_slope(self, r, dtype))
        grad_z = self.mul(self.mul(grad, self.sub(hidden, n)), _sigmoid_slope(self, z, dtype))
        return (self.cat([grad_r, grad_z, grad_n], 1),
                self.cat([grad_r, grad_z, self.mul(grad_n, r)], 1), self.mul(grad, z))


    def lstm_sequence(self, input_gates: Primitive, hidden_weight: Primitive,
                      hidden: Primitive, cell: Primitive, reverse: bool, dtype: DType
                      ) -> tuple[Primitive, Primitive, Primitive]:
        """A whole LSTM layer over a sequence: ``input_gates`` ``[seq, batch, 4 * d_hidden]``
        (the input's part of every step, biases included), ``hidden_weight`` ``[d_hidden, 4 *
        d_hidden]`` (each step's hidden part is ``h @ hidden_weight``), the initial ``hidden``
        and ``cell`` ``[batch, d_hidden]``; ``reverse`` runs from the last step to the first.
        Returns every step's hidden state ``[seq, batch, d_hidden]`` (in input order) and the
        final ``(hidden, cell)``. The default is a ``matmul`` and an ``lstm_cell`` per step."""
        outputs: list[Primitive] = [None] * input_gates.shape[0]
        for t, gates in _steps(self, input_gates, reverse):
            hidden, cell = self.lstm_cell(gates, self.matmul(hidden, hidden_weight), cell, dtype)
            outputs[t] = hidden
        return _stacked(self, outputs, hidden), hidden, cell

    def gru_sequence(self, input_gates: Primitive, hidden_weight: Primitive,
                     hidden_bias: Primitive | None, hidden: Primitive, reverse: bool,
                     dtype: DType) -> tuple[Primitive, Primitive]:
        """A whole GRU layer over a sequence: ``input_gates`` ``[seq, batch, 3 * d_hidden]``,
        each step's hidden part ``h @ hidden_weight + hidden_bias`` (``hidden_bias``
        ``[3 * d_hidden]`` or None), the initial ``hidden`` ``[batch, d_hidden]``. Returns
        every step's hidden state ``[seq, batch, d_hidden]`` (in input order) and the final one.
        The default is a ``matmul`` (and an ``add``) and a ``gru_cell`` per step."""
        outputs: list[Primitive] = [None] * input_gates.shape[0]
        for t, gates in _steps(self, input_gates, reverse):
            hidden_gates = self.matmul(hidden, hidden_weight)
            if hidden_bias is not None:
                hidden_gates = self.add(hidden_gates, hidden_bias)
            hidden = self.gru_cell(gates, hidden_gates, hidden, dtype)
            outputs[t] = hidden
        return _stacked(self, outputs, hidden), hidden


def _steps(b: RecurrentOps, input_gates: Primitive, reverse: bool):
    """``(t, input_gates[t])`` in the order a layer runs them: one ``split`` for all steps
    (under autodiff, one ``cat`` of their gradients)."""
    seq, batch, width = input_gates.shape
    steps = [b.reshape(x, (batch, width)) for x in b.split(input_gates, [1] * seq, 0)] \
        if seq else []
    order = range(seq - 1, -1, -1) if reverse else range(seq)
    return [(t, steps[t]) for t in order]


def _stacked(b: RecurrentOps, outputs: list[Primitive], state: Primitive) -> Primitive:
    """The steps' ``[batch, d]`` states as ``[seq, batch, d]``."""
    if not outputs:
        return b.reshape(b.slice(state, [(0, 0, 1), (0, state.shape[1], 1)]),
                         (0, *state.shape))
    return b.cat([b.reshape(x, (1, *x.shape)) for x in outputs], 0)


def _split(b: RecurrentOps, gates: Primitive, count: int) -> list[Primitive]:
    """``[batch, count * d]`` as ``count`` slices ``[batch, d]``."""
    batch, width = gates.shape
    d = width // count
    return [b.slice(gates, [(0, batch, 1), (k * d, (k + 1) * d, 1)]) for k in range(count)]


def _sigmoid_slope(b: RecurrentOps, s: Primitive, dtype: DType) -> Primitive:
    """``s * (1 - s)``: sigmoid's derivative from its value ``s``."""
    return b.mul(s, b.add_scalar(b.neg(s, dtype), 1.0, dtype))


def _one_minus_square(b: RecurrentOps, t: Primitive, dtype: DType) -> Primitive:
    """``1 - t^2``: tanh's derivative from its value ``t``."""
    return b.add_scalar(b.neg(b.mul(t, t), dtype), 1.0, dtype)
