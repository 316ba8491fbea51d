"""Recurrent cells as single ops (``burnish.nn``'s ``Lstm`` and ``Gru`` run one per time step)."""

from __future__ import annotations

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
