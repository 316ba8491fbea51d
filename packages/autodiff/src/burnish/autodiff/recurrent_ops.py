"""Recurrent cells with their backward rules: a step is one node, differentiated by one op.

``lstm_cell`` has two outputs: one node runs the step's backward once both gradients (the new
hidden state's and the new cell's) have arrived; each output gets a node of its own that hands
its gradient to it (``burnish.autodiff.graph.output_node``).
"""

from __future__ import annotations

from burnish.autodiff.graph import AutodiffPrimitive, Node, kept, output_node
from burnish.autodiff.inner_math import zeros
from burnish.backend.recurrent_ops import RecurrentOps
from burnish.dtype import DType

P = AutodiffPrimitive


class AutodiffRecurrentOps(RecurrentOps):
    """Cells: the inner backend computes a step, a tracked input adds one node (two more for
    the LSTM's outputs); backward is the inner backend's ``*_backward`` op."""

    def lstm_cell(self, input_gates: P, hidden_gates: P, cell: P, dtype: DType) -> tuple[P, P]:
        hidden, new_cell = self._inner.lstm_cell(input_gates.inner, hidden_gates.inner,
                                                 cell.inner, dtype)
        if input_gates.node is None and hidden_gates.node is None and cell.node is None:
            return P(hidden), P(new_cell)
        step = Node((input_gates.node, hidden_gates.node, cell.node), _lstm_cell_backward,
                    (kept(input_gates), kept(hidden_gates), kept(cell)), None, dtype)
        return P(hidden, output_node(step, 0)), P(new_cell, output_node(step, 1))

    def lstm_cell_backward(self, input_gates: P, hidden_gates: P, cell: P, grad_hidden: P,
                           grad_cell: P, dtype: DType) -> tuple[P, P]:
        operands = (input_gates, hidden_gates, cell, grad_hidden, grad_cell)
        if all(x.node is None for x in operands):
            grad_gates, grad = self._inner.lstm_cell_backward(*[x.inner for x in operands],
                                                              dtype)
            return P(grad_gates), P(grad)
        # Tracked (a gradient of a gradient): the default's composition, differentiable.
        return RecurrentOps.lstm_cell_backward(self, *operands, dtype)

    def gru_cell(self, input_gates: P, hidden_gates: P, hidden: P, dtype: DType) -> P:
        out = self._inner.gru_cell(input_gates.inner, hidden_gates.inner, hidden.inner, dtype)
        if input_gates.node is None and hidden_gates.node is None and hidden.node is None:
            return P(out)
        return self._record(out, (input_gates, hidden_gates, hidden), _gru_cell_backward,
                            (input_gates, hidden_gates, hidden))

    def gru_cell_backward(self, input_gates: P, hidden_gates: P, hidden: P, grad: P,
                          dtype: DType) -> tuple[P, P, P]:
        operands = (input_gates, hidden_gates, hidden, grad)
        if all(x.node is None for x in operands):
            results = self._inner.gru_cell_backward(*[x.inner for x in operands], dtype)
            return tuple(P(x) for x in results)  # type: ignore[return-value]  # three
        return RecurrentOps.gru_cell_backward(self, *operands, dtype)

    def lstm_sequence(self, input_gates: P, hidden_weight: P, hidden: P, cell: P,
                      reverse: bool, dtype: DType) -> tuple[P, P, P]:
        operands = (input_gates, hidden_weight, hidden, cell)
        if all(x.node is None for x in operands):  # nothing to differentiate: one inner op
            results = self._inner.lstm_sequence(*[x.inner for x in operands], reverse, dtype)
            return tuple(P(x) for x in results)  # type: ignore[return-value]  # three
        # Tracked: a cell node per step (the default's composition).
        return RecurrentOps.lstm_sequence(self, *operands, reverse, dtype)

    def gru_sequence(self, input_gates: P, hidden_weight: P, hidden_bias: P | None, hidden: P,
                     reverse: bool, dtype: DType) -> tuple[P, P]:
        operands = (input_gates, hidden_weight, hidden_bias, hidden)
        if all(x is None or x.node is None for x in operands):
            outputs, last = self._inner.gru_sequence(
                *[None if x is None else x.inner for x in operands], reverse, dtype)
            return P(outputs), P(last)
        return RecurrentOps.gru_sequence(self, *operands, reverse, dtype)


# -- backward rules: rule(inner, dtype, grad, *saved) -> a gradient per input ---------------------


def _lstm_cell_backward(b, dtype, grads, input_gates, hidden_gates, cell):
    grad_hidden, grad_cell = grads.get(0), grads.get(1)
    if grad_hidden is None:
        grad_hidden = zeros(b, cell.shape, dtype, cell)
    if grad_cell is None:
        grad_cell = zeros(b, cell.shape, dtype, cell)
    grad_gates, grad = b.lstm_cell_backward(input_gates, hidden_gates, cell, grad_hidden,
                                            grad_cell, dtype)
    return grad_gates, grad_gates, grad


def _gru_cell_backward(b, dtype, g, input_gates, hidden_gates, hidden):
    return b.gru_cell_backward(input_gates, hidden_gates, hidden, g, dtype)
