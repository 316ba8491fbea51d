"""Recurrent cells and their gradients, each one kernel (``kernels.recurrent``); whole layers
through the runtime's library where it has one (``Runtime.library_recurrent``), else a product
and a cell kernel per step (the protocol's default)."""

from __future__ import annotations

from burnish.backend.recurrent_ops import RecurrentOps
from burnish.jit.kernels.recurrent import cell
from burnish.jit.tensor import JitTensor


class JitRecurrentOps(RecurrentOps):
    def lstm_cell(self, input_gates: JitTensor, hidden_gates: JitTensor, cell_state: JitTensor,
                  dtype):
        return cell("lstm_cell", [input_gates, hidden_gates, cell_state])

    def lstm_cell_backward(self, input_gates: JitTensor, hidden_gates: JitTensor,
                           cell_state: JitTensor, grad_hidden: JitTensor, grad_cell: JitTensor,
                           dtype):
        return cell("lstm_cell_backward",
                    [input_gates, hidden_gates, cell_state, grad_hidden, grad_cell])

    def gru_cell(self, input_gates: JitTensor, hidden_gates: JitTensor, hidden: JitTensor,
                 dtype):
        return cell("gru_cell", [input_gates, hidden_gates, hidden])[0]

    def gru_cell_backward(self, input_gates: JitTensor, hidden_gates: JitTensor,
                          hidden: JitTensor, grad: JitTensor, dtype):
        return cell("gru_cell_backward", [input_gates, hidden_gates, hidden, grad])

    def lstm_sequence(self, input_gates: JitTensor, hidden_weight: JitTensor, hidden: JitTensor,
                      cell_state: JitTensor, reverse: bool, dtype):
        found = hidden.runtime.library_recurrent(input_gates, hidden_weight, None, hidden,
                                                 cell_state, reverse)
        if found is not None:
            return found
        return RecurrentOps.lstm_sequence(self, input_gates, hidden_weight, hidden, cell_state,
                                          reverse, dtype)

    def gru_sequence(self, input_gates: JitTensor, hidden_weight: JitTensor,
                     hidden_bias: JitTensor | None, hidden: JitTensor, reverse: bool, dtype):
        found = hidden.runtime.library_recurrent(input_gates, hidden_weight, hidden_bias, hidden,
                                                 None, reverse)
        if found is not None:
            return found
        return RecurrentOps.gru_sequence(self, input_gates, hidden_weight, hidden_bias, hidden,
                                         reverse, dtype)
