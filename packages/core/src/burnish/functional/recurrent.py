"""Recurrent cells as single ops (``burnish.nn``'s ``Lstm`` and ``Gru`` run one per time step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from burnish import amp as _amp
from burnish.dtype import Kind
from burnish.errors import DTypeError, ShapeError
from burnish.shape import show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor


def lstm_cell(input_gates: Tensor, hidden_gates: Tensor, cell: Tensor) -> tuple[Tensor, Tensor]:
    """One LSTM time step as one op (one kernel on GPU backends); returns ``(hidden, cell)``.

    ``input_gates`` (``x @ W_i + b_i``) and ``hidden_gates`` (``h @ W_h + b_h``) are
    ``[batch, 4 * d_hidden]``, the gates ``i, f, g, o`` side by side (PyTorch's order), and
    ``cell`` is ``[batch, d_hidden]``. With ``a = input_gates + hidden_gates``::

        c' = sigmoid(a_f) * cell + sigmoid(a_i) * tanh(a_g)     h' = sigmoid(a_o) * tanh(c')

    All three must have one float dtype (DTypeError) and one device (DeviceError);
    ShapeError names the shapes that disagree. Under autocast the cell computes in float32.
    """
    if _amp.entered:
        input_gates, hidden_gates, cell = (_amp.full(input_gates), _amp.full(hidden_gates),
                                           _amp.full(cell))
    _check("lstm_cell", input_gates, hidden_gates, cell, 4)
    hidden, new_cell = cell.backend.lstm_cell(input_gates._prim, hidden_gates._prim, cell._prim,
                                              cell.dtype)
    return (_core.make(hidden, cell.device, cell.dtype),
            _core.make(new_cell, cell.device, cell.dtype))


def gru_cell(input_gates: Tensor, hidden_gates: Tensor, hidden: Tensor) -> Tensor:
    """One GRU time step as one op (one kernel on GPU backends); returns the new hidden state.

    ``input_gates`` (``x @ W_i + b_i``) and ``hidden_gates`` (``h @ W_h + b_h``) are
    ``[batch, 3 * d_hidden]``, the gates ``r, z, n`` side by side (PyTorch's order), and
    ``hidden`` is ``[batch, d_hidden]``::

        r = sigmoid(x_r + h_r)    z = sigmoid(x_z + h_z)    n = tanh(x_n + r * h_n)
        h' = (1 - z) * n + z * hidden

    All three must have one float dtype (DTypeError) and one device (DeviceError);
    ShapeError names the shapes that disagree. Under autocast the cell computes in float32.
    """
    if _amp.entered:
        input_gates, hidden_gates, hidden = (_amp.full(input_gates), _amp.full(hidden_gates),
                                             _amp.full(hidden))
    _check("gru_cell", input_gates, hidden_gates, hidden, 3)
    out = hidden.backend.gru_cell(input_gates._prim, hidden_gates._prim, hidden._prim,
                                  hidden.dtype)
    return _core.make(out, hidden.device, hidden.dtype)


def lstm_sequence(input_gates: Tensor, hidden_weight: Tensor, hidden: Tensor, cell: Tensor,
                  reverse: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """A whole LSTM layer as one op (one call into compiled code on the ``cpu`` backend);
    returns every step's hidden state ``[seq, batch, d_hidden]`` and the final ``(hidden,
    cell)``.

    ``input_gates`` ``[seq, batch, 4 * d_hidden]`` is the input's part of every step's gates
    (``x @ W_i + b_i + b_h``, gates ``i, f, g, o``), ``hidden_weight`` ``[d_hidden, 4 *
    d_hidden]`` multiplies the hidden state at each step, ``hidden`` and ``cell`` ``[batch,
    d_hidden]`` are the initial state. Each step is ``lstm_cell(input_gates[t], h @
    hidden_weight, c)``; ``reverse`` runs from the last step to the first (the outputs stay in
    input order). Under autocast the steps run one by one, as ``matmul`` and ``lstm_cell``
    do there (products in the autocast dtype, cells in float32).
    """
    _check_sequence("lstm_sequence", input_gates, hidden_weight, None, (hidden, cell), 4)
    if _amp.active_dtype() is not None:
        return _by_steps(input_gates, reverse, lambda x, h, c: lstm_cell(
            x, h.matmul(hidden_weight), c), hidden, cell)  # type: ignore[return-value]
    outputs, last, last_cell = hidden.backend.lstm_sequence(
        input_gates._prim, hidden_weight._prim, hidden._prim, cell._prim, reverse, hidden.dtype)
    device, dtype = hidden.device, hidden.dtype
    return (_core.make(outputs, device, dtype), _core.make(last, device, dtype),
            _core.make(last_cell, device, dtype))


def gru_sequence(input_gates: Tensor, hidden_weight: Tensor, hidden_bias: Tensor | None,
                 hidden: Tensor, reverse: bool = False) -> tuple[Tensor, Tensor]:
    """A whole GRU layer as one op (one call into compiled code on the ``cpu`` backend);
    returns every step's hidden state ``[seq, batch, d_hidden]`` and the final one.

    ``input_gates`` ``[seq, batch, 3 * d_hidden]`` is the input's part of every step's gates
    (``x @ W_i + b_i``, gates ``r, z, n``); each step's hidden part is ``h @ hidden_weight +
    hidden_bias`` (``hidden_weight`` ``[d_hidden, 3 * d_hidden]``, ``hidden_bias`` ``[3 *
    d_hidden]`` or None) and the step is ``gru_cell`` of both. ``reverse`` and autocast as in
    ``lstm_sequence``.
    """
    _check_sequence("gru_sequence", input_gates, hidden_weight, hidden_bias, (hidden,), 3)
    if _amp.active_dtype() is not None:
        def step(x: Tensor, h: Tensor) -> tuple[Tensor]:
            gates = h.matmul(hidden_weight)
            return (gru_cell(x, gates if hidden_bias is None else gates + hidden_bias, h),)

        return _by_steps(input_gates, reverse, step, hidden)  # type: ignore[return-value]
    outputs, last = hidden.backend.gru_sequence(
        input_gates._prim, hidden_weight._prim, None if hidden_bias is None else hidden_bias._prim,
        hidden._prim, reverse, hidden.dtype)
    return _core.make(outputs, hidden.device, hidden.dtype), \
        _core.make(last, hidden.device, hidden.dtype)


def _by_steps(input_gates: Tensor, reverse: bool, step: Callable[..., tuple[Tensor, ...]],
              *state: Tensor) -> tuple[Tensor, ...]:
    """A sequence op as its steps, with Tensor ops (what autocast sees)."""
    from burnish.tensor.layout import stack

    seq = input_gates.shape[0]
    steps = input_gates.split([1] * seq, 0) if seq else []
    outputs: list[Tensor] = [None] * seq  # type: ignore[list-item]
    for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
        state = step(steps[t].squeeze(0), *state)
        outputs[t] = state[0]
    first = state[0]
    stacked = stack(outputs, 0) if outputs else first.reshape([0, *first.shape])
    return (stacked, *state)


def _check_sequence(op: str, input_gates: Tensor, hidden_weight: Tensor,
                    hidden_bias: Tensor | None, states: tuple[Tensor, ...], gates: int) -> None:
    named = [("input_gates", input_gates), ("hidden_weight", hidden_weight),
             *([("hidden_bias", hidden_bias)] if hidden_bias is not None else []),
             *[(name, x) for name, x in zip(("hidden", "cell"), states)]]
    for name, x in named:
        if type(x) is not _core.Tensor:
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    state = states[0]
    if state.dtype.kind is not Kind.FLOAT:
        raise DTypeError(f"{op} needs float tensors, got a hidden state of {state.dtype}")
    # Under autocast the steps cast as their products and cells do: a 16-bit input projection
    # (a linear layer's there) goes in as it is.
    mixed = _amp.active_dtype() is not None
    for name, x in named:
        if x.dtype is not state.dtype and not (mixed and x.dtype in _amp.LOW_DTYPES
                                               and x is not state):
            raise DTypeError(f"{op}: {name} is {x.dtype} but the hidden state is {state.dtype}")
        _core.same_device(x, state, op)
    if state.ndim != 2:
        raise ShapeError(f"{op}: the hidden state must be [batch, d_hidden], got "
                         f"{show(state.shape)}")
    batch, d_hidden = state.shape
    width = gates * d_hidden
    for name, x in named[3 if hidden_bias is not None else 2:]:
        if list(x.shape) != [batch, d_hidden]:
            raise ShapeError(f"{op}: {name} must be [batch, d_hidden] = "
                             f"{show([batch, d_hidden])} like the hidden state, got "
                             f"{show(x.shape)}")
    if input_gates.ndim != 3 or list(input_gates.shape[1:]) != [batch, width]:
        raise ShapeError(f"{op}: input_gates must be [seq, batch, {gates} * d_hidden] = "
                         f"[seq, {batch}, {width}] for a hidden state of {show(state.shape)}, "
                         f"got {show(input_gates.shape)}")
    if list(hidden_weight.shape) != [d_hidden, width]:
        raise ShapeError(f"{op}: hidden_weight must be [d_hidden, {gates} * d_hidden] = "
                         f"{show([d_hidden, width])}, got {show(hidden_weight.shape)}")
    if hidden_bias is not None and list(hidden_bias.shape) != [width]:
        raise ShapeError(f"{op}: hidden_bias must be [{gates} * d_hidden] = [{width}], got "
                         f"{show(hidden_bias.shape)}")


def _check(op: str, input_gates: Tensor, hidden_gates: Tensor, state: Tensor,
           gates: int) -> None:
    for name, x in (("input_gates", input_gates), ("hidden_gates", hidden_gates),
                    ("state", state)):
        if type(x) is not _core.Tensor:
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if state.dtype.kind is not Kind.FLOAT:
        raise DTypeError(f"{op} needs float tensors, got a state of {state.dtype}")
    for name, x in (("input_gates", input_gates), ("hidden_gates", hidden_gates)):
        if x.dtype is not state.dtype:
            raise DTypeError(f"{op}: {name} is {x.dtype} but the state is {state.dtype}")
        _core.same_device(x, state, op)
    if state.ndim != 2:
        raise ShapeError(f"{op}: the state must be [batch, d_hidden], got {show(state.shape)}")
    batch, d_hidden = state.shape
    expected = [batch, gates * d_hidden]
    for name, x in (("input_gates", input_gates), ("hidden_gates", hidden_gates)):
        if list(x.shape) != expected:
            raise ShapeError(f"{op}: {name} must be [batch, {gates} * d_hidden] = "
                             f"{show(expected)} for a state of {show(state.shape)}, got "
                             f"{show(x.shape)}")
