"""ONNX's control flow on burnish tensors: If, Loop and Scan call the functions nested in the
generated forward that compute their subgraphs; conditions and trip counts are read on the
host, since they decide which operations run."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import burnish as bn
from burnish import Tensor
from burnish.onnx.ops.core import host


def truth(condition: Tensor) -> bool:
    """A one-element condition read as a Python bool."""
    return bool(host(condition).reshape(-1)[0])


def _stack(pieces: list[Tensor], axis: int = 0) -> Tensor:
    """The tensors stacked along a new ``axis`` (from the end when negative)."""
    rank = pieces[0].ndim + 1
    axis = axis + rank if axis < 0 else axis
    return bn.cat([p.unsqueeze(axis) for p in pieces], axis)


def loop(body: Callable[..., tuple], trip_count: Tensor | None, condition: Tensor | None,
         carried: Sequence[Tensor], scan_outputs: int) -> tuple[Tensor, ...]:
    """ONNX Loop: ``body(iteration, condition, *carried)`` returns the next condition, the
    next carried values and one element of each scan output; it runs while the iteration is
    below ``trip_count`` and the condition holds (either left out: no limit). Returns the
    final carried values, then each scan output's elements stacked along a new first dim."""
    limit = None if trip_count is None else int(host(trip_count).reshape(-1)[0])
    going = True if condition is None else truth(condition)
    state = list(carried)
    device = state[0].device if state else (
        condition.device if condition is not None else trip_count.device)
    scanned: list[list[Tensor]] = [[] for _ in range(scan_outputs)]
    iteration = 0
    while going and (limit is None or iteration < limit):
        results = body(Tensor.from_data(np.array(iteration, np.int64), device=device),
                       Tensor.from_data(np.array(going), device=device), *state)
        going = truth(results[0])
        state = list(results[1:1 + len(state)])
        for pieces, element in zip(scanned, results[1 + len(state):]):
            pieces.append(element)
        iteration += 1
    stacked = [_stack(pieces) if pieces else Tensor.zeros([0], device, bn.float32)
               for pieces in scanned]
    return (*state, *stacked)


def scan(body: Callable[..., tuple], states: Sequence[Tensor], inputs: Sequence[Tensor],
         input_axes: Sequence[int] | None = None,
         input_directions: Sequence[int] | None = None,
         output_axes: Sequence[int] | None = None,
         output_directions: Sequence[int] | None = None) -> tuple[Tensor, ...]:
    """ONNX Scan: ``body(*states, *slices)`` runs once per slice of the scan inputs along
    their axes (backwards where a direction is 1), returning the next states and one element
    of each scan output. Returns the final states, then each scan output's elements stacked
    along its axis (in reverse order where its direction is 1)."""
    input_axes = list(input_axes or [0] * len(inputs))
    input_directions = list(input_directions or [0] * len(inputs))
    axes = [a + x.ndim if a < 0 else a for a, x in zip(input_axes, inputs)]
    steps = inputs[0].shape[axes[0]] if inputs else 0
    state = list(states)
    scanned: list[list[Tensor]] | None = None
    for step in range(steps):
        slices = []
        for x, axis, backwards in zip(inputs, axes, input_directions):
            at = x.shape[axis] - 1 - step if backwards else step
            slices.append(x.narrow(axis, at, 1).squeeze(axis))
        results = body(*state, *slices)
        state = list(results[:len(state)])
        elements = results[len(state):]
        if scanned is None:
            scanned = [[] for _ in elements]
        for pieces, element in zip(scanned, elements):
            pieces.append(element)
    scanned = scanned or []
    output_axes = list(output_axes or [0] * len(scanned))
    output_directions = list(output_directions or [0] * len(scanned))
    stacked = []
    for pieces, axis, backwards in zip(scanned, output_axes, output_directions):
        stacked.append(_stack(pieces[::-1] if backwards else pieces, axis))
    return (*state, *stacked)
