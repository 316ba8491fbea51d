"""Recurrent layers: Lstm, BiLstm and Gru over batch-first sequences, gates as PyTorch's."""

from __future__ import annotations

import math
from typing import NamedTuple

from burnish import Device, Tensor, cat, stack
from burnish import functional as F
from burnish.errors import ShapeError
from burnish.nn.config import Config
from burnish.nn.initializer import Initializer, Uniform
from burnish.nn.linear import Linear, LinearConfig
from burnish.nn.module import Module
from burnish.shape import show


class GateController(Module):
    """One gate's two affine maps: ``input_transform(x) + hidden_transform(h)`` (Burn's
    ``GateController``; two biases, as PyTorch's ``b_i*`` and ``b_h*``)."""

    input_transform: Linear
    hidden_transform: Linear


def _gate(d_input: int, d_hidden: int, bias: bool, initializer: Initializer | None,
          device: Device | str | None) -> GateController:
    # PyTorch's default: every weight and bias uniform on ±1/sqrt(d_hidden).
    bound = 1.0 / math.sqrt(d_hidden)
    init = Uniform(-bound, bound) if initializer is None else initializer
    return GateController(LinearConfig(d_input, d_hidden, bias, init).init(device),
                          LinearConfig(d_hidden, d_hidden, bias, init).init(device))


def _check_input(x: Tensor, d_input: int, op: str) -> None:
    if x.ndim != 3 or x.shape[2] != d_input:
        raise ShapeError(f"{op}: input must be [batch, seq, {d_input}], got {show(x.shape)}")


def _check_state(state: Tensor, shape: list[int], op: str) -> None:
    if list(state.shape) != shape:
        raise ShapeError(f"{op}: initial state must be {show(shape)}, got {show(state.shape)}")


class LstmState(NamedTuple):
    """An LSTM's state: ``cell`` and ``hidden``, each ``[batch, d_hidden]`` (``[2, batch,
    d_hidden]`` for BiLstm, forward direction first)."""

    cell: Tensor
    hidden: Tensor


class LstmConfig(Config):
    d_input: int
    d_hidden: int
    bias: bool = True
    #: None: PyTorch's uniform on ±1/sqrt(d_hidden) for every weight and bias.
    initializer: Initializer | None = None

    def init(self, device: Device | str | None = None) -> Lstm:
        def gate() -> GateController:
            return _gate(self.d_input, self.d_hidden, self.bias, self.initializer, device)

        return Lstm(input_gate=gate(), forget_gate=gate(), cell_gate=gate(), output_gate=gate(),
                    d_hidden=self.d_hidden)


class Lstm(Module):
    """Long short-term memory over ``[batch, seq, d_input]``, with PyTorch's equations::

        i = sigmoid(W_ii x + b_ii + W_hi h + b_hi)      f = sigmoid(W_if x + ... )
        g = tanh(W_ig x + b_ig + W_hg h + b_hg)         o = sigmoid(W_io x + ... )
        c' = f * c + i * g                              h' = o * tanh(c')

    ``forward(x, state=None, reverse=False)`` returns the hidden states ``[batch, seq,
    d_hidden]`` and the final ``LstmState``; the state starts at zeros unless given.
    ``reverse`` runs from the last step to the first (outputs stay in input order).
    """

    input_gate: GateController
    forget_gate: GateController
    cell_gate: GateController
    output_gate: GateController
    d_hidden: int

    def forward(self, x: Tensor, state: LstmState | None = None,
                reverse: bool = False) -> tuple[Tensor, LstmState]:
        _check_input(x, self.input_gate.input_transform.weight.shape[0], "lstm")
        batch, seq, _ = x.dims()
        shape = [batch, self.d_hidden]
        if state is None:
            cell = hidden = Tensor.zeros(shape, x.device, x.dtype)
        else:
            _check_state(state.cell, shape, "lstm")
            _check_state(state.hidden, shape, "lstm")
            cell, hidden = state
        gates = (self.input_gate, self.forget_gate, self.cell_gate, self.output_gate)
        # The input's part of every gate, for all steps at once.
        inputs = [gate.input_transform(x) for gate in gates]
        outputs: list[Tensor] = [None] * seq  # type: ignore[list-item]
        for t in (reversed(range(seq)) if reverse else range(seq)):
            i, f, g, o = (projected[:, t] + gate.hidden_transform(hidden)
                          for projected, gate in zip(inputs, gates))
            cell = F.sigmoid(f) * cell + F.sigmoid(i) * g.tanh()
            hidden = F.sigmoid(o) * cell.tanh()
            outputs[t] = hidden
        return stack(outputs, 1), LstmState(cell, hidden)


class BiLstmConfig(Config):
    d_input: int
    d_hidden: int
    bias: bool = True
    initializer: Initializer | None = None

    def init(self, device: Device | str | None = None) -> BiLstm:
        config = LstmConfig(self.d_input, self.d_hidden, self.bias, self.initializer)
        return BiLstm(forward_lstm=config.init(device), reverse_lstm=config.init(device))


class BiLstm(Module):
    """Two LSTMs, one reading the sequence forwards and one backwards; outputs ``[batch, seq,
    2 * d_hidden]`` (the forward direction's features first, as PyTorch's
    ``bidirectional=True``) and the final ``LstmState`` with tensors ``[2, batch, d_hidden]``.
    An initial state has that shape too."""

    forward_lstm: Lstm
    reverse_lstm: Lstm

    def forward(self, x: Tensor, state: LstmState | None = None) -> tuple[Tensor, LstmState]:
        forward_state = reverse_state = None
        if state is not None:
            shape = [2, x.shape[0], self.forward_lstm.d_hidden]
            _check_state(state.cell, shape, "bilstm")
            _check_state(state.hidden, shape, "bilstm")
            forward_state = LstmState(state.cell[0], state.hidden[0])
            reverse_state = LstmState(state.cell[1], state.hidden[1])
        ahead, (ahead_cell, ahead_hidden) = self.forward_lstm(x, forward_state)
        back, (back_cell, back_hidden) = self.reverse_lstm(x, reverse_state, reverse=True)
        final = LstmState(stack([ahead_cell, back_cell], 0), stack([ahead_hidden, back_hidden], 0))
        return cat([ahead, back], 2), final


class GruConfig(Config):
    d_input: int
    d_hidden: int
    bias: bool = True
    #: None: PyTorch's uniform on ±1/sqrt(d_hidden) for every weight and bias.
    initializer: Initializer | None = None

    def init(self, device: Device | str | None = None) -> Gru:
        def gate() -> GateController:
            return _gate(self.d_input, self.d_hidden, self.bias, self.initializer, device)

        return Gru(reset_gate=gate(), update_gate=gate(), new_gate=gate(),
                   d_hidden=self.d_hidden)


class Gru(Module):
    """Gated recurrent unit over ``[batch, seq, d_input]``, with PyTorch's equations::

        r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)      z = sigmoid(W_iz x + ... )
        n = tanh(W_in x + b_in + r * (W_hn h + b_hn))   h' = (1 - z) * n + z * h

    ``forward(x, state=None)`` returns the hidden states ``[batch, seq, d_hidden]`` and the
    final hidden state ``[batch, d_hidden]``; the state starts at zeros unless given.
    """

    reset_gate: GateController
    update_gate: GateController
    new_gate: GateController
    d_hidden: int

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        _check_input(x, self.reset_gate.input_transform.weight.shape[0], "gru")
        batch, seq, _ = x.dims()
        if state is None:
            hidden = Tensor.zeros([batch, self.d_hidden], x.device, x.dtype)
        else:
            _check_state(state, [batch, self.d_hidden], "gru")
            hidden = state
        reset_in, update_in, new_in = (gate.input_transform(x)
                                       for gate in (self.reset_gate, self.update_gate,
                                                    self.new_gate))
        outputs = []
        for t in range(seq):
            r = F.sigmoid(reset_in[:, t] + self.reset_gate.hidden_transform(hidden))
            z = F.sigmoid(update_in[:, t] + self.update_gate.hidden_transform(hidden))
            n = (new_in[:, t] + r * self.new_gate.hidden_transform(hidden)).tanh()
            hidden = (1.0 - z) * n + z * hidden
            outputs.append(hidden)
        return stack(outputs, 1), hidden
