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


def _packed(gates: tuple[GateController, ...], part: str) -> tuple[Tensor, Tensor | None]:
    """The ``part`` (``"input_transform"`` or ``"hidden_transform"``) of every gate side by
    side: its weights ``[d, gates * d_hidden]`` and biases ``[gates * d_hidden]`` (None when no
    gate has one). Made at each forward from the parameters (``cat`` is differentiable), so
    records keep one ``GateController`` per gate."""
    linears = [getattr(gate, part) for gate in gates]
    weight = cat([linear.weight.val() for linear in linears], 1)
    if all(linear.bias is None for linear in linears):
        return weight, None
    biases = [linear.bias.val() if linear.bias is not None
              else Tensor.zeros([linear.weight.shape[1]], weight.device, weight.dtype)
              for linear in linears]
    return weight, cat(biases, 0)


def _projection(x: Tensor, gates: tuple[GateController, ...],
                extra_bias: Tensor | None = None) -> Tensor:
    """Every step's input part of every gate, ``[seq, batch, gates * d_hidden]``, by one
    product (and one bias, with ``extra_bias`` added to it) for the whole sequence: the steps
    time-major as the rows of one matrix (a plain product, whose weight gradient is one product
    too)."""
    batch, seq, d_input = x.dims()
    weight, bias = _packed(gates, "input_transform")
    if extra_bias is not None:
        bias = extra_bias if bias is None else bias + extra_bias
    # One copy of x, unless it is a time-major block viewed batch-first (a layer's output).
    # As a linear layer: under autocast the bias is added in the product's 16-bit dtype, so
    # that the sequence's gates (which every step's cell keeps for backward) stay 16-bit.
    projected = F.linear(x.swap_dims(0, 1).reshape([seq * batch, d_input]), weight, bias)
    return projected.reshape([seq, batch, weight.shape[1]])


def _batch_first(outputs: Tensor) -> Tensor:
    """The steps' hidden states ``[seq, batch, d_hidden]`` viewed batch-first, so that a stacked
    layer's ``swap_dims`` gets the time-major block back without a copy."""
    return outputs.swap_dims(0, 1)


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

    The gates are packed at each forward: the input part of all four for every step is one
    product before the time loop, and the loop is ``functional.lstm_sequence``: each step one
    product with the packed recurrent weights and one ``functional.lstm_cell`` (one kernel on
    the GPU backends), or the whole loop in compiled code (the ``cpu`` backend).
    """

    input_gate: GateController
    forget_gate: GateController
    cell_gate: GateController
    output_gate: GateController
    d_hidden: int

    def forward(self, x: Tensor, state: LstmState | None = None,
                reverse: bool = False) -> tuple[Tensor, LstmState]:
        _check_input(x, self.input_gate.input_transform.weight.shape[0], "lstm")
        batch = x.shape[0]
        shape = [batch, self.d_hidden]
        if state is None:
            cell = hidden = Tensor.zeros(shape, x.device, x.dtype)
        else:
            _check_state(state.cell, shape, "lstm")
            _check_state(state.hidden, shape, "lstm")
            cell, hidden = state
        gates = (self.input_gate, self.forget_gate, self.cell_gate, self.output_gate)
        # The input's part of every gate for all steps at once, the hidden part's biases folded
        # in (the cell only ever reads their sum); per step, one product and one cell op.
        hidden_weight, hidden_bias = _packed(gates, "hidden_transform")
        outputs, hidden, cell = F.lstm_sequence(_projection(x, gates, hidden_bias),
                                                hidden_weight, hidden, cell, reverse)
        return _batch_first(outputs), LstmState(cell, hidden)


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

    As ``Lstm``, the gates are packed at each forward: one product for the input part of every
    step, then ``functional.gru_sequence``: per step one product (and its bias) and one
    ``functional.gru_cell``.
    """

    reset_gate: GateController
    update_gate: GateController
    new_gate: GateController
    d_hidden: int

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        _check_input(x, self.reset_gate.input_transform.weight.shape[0], "gru")
        batch = x.shape[0]
        if state is None:
            hidden = Tensor.zeros([batch, self.d_hidden], x.device, x.dtype)
        else:
            _check_state(state, [batch, self.d_hidden], "gru")
            hidden = state
        gates = (self.reset_gate, self.update_gate, self.new_gate)
        # The input's part of every gate for all steps at once; per step, one product (the
        # hidden part's biases stay there: ``r`` multiplies the new gate's) and one cell op.
        hidden_weight, hidden_bias = _packed(gates, "hidden_transform")
        outputs, hidden = F.gru_sequence(_projection(x, gates), hidden_weight, hidden_bias,
                                         hidden)
        return _batch_first(outputs), hidden
