"""``JitFuser``: what ``burnish.fusion`` drives on a ``burnish.jit`` backend (see ``lazy`` and
``kernels.fused`` for how ops are recorded and fused)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.device import Device
from burnish.jit import lazy
from burnish.jit.kernels.fused import FusedProgram

if TYPE_CHECKING:
    from burnish.jit.backend.base import JitBase


class JitFuser:
    """Records elementwise ops of a jit backend lazily and fuses them into generated kernels.

    ``begin()``/``end()`` bracket the ops to record (per thread); ``flush(device)`` computes
    what is pending; ``programs(device)`` lists the fused kernels made so far and
    ``launches(device)`` counts every kernel launched on the device.
    """

    #: Protocol ops that never record (convolutions and pooling, reductions with positions,
    #: scans, softmax, recurrent cells, sorting, indexing, transfers; elementwise ops,
    #: products, views and the other reductions do), so ``Fusion`` calls them without
    #: ``begin()``/``end()``. (An op missing here is only bracketed for nothing; one listed
    #: here that did record would just run eagerly.)
    eager = frozenset({
        "conv", "conv_transpose", "avg_pool", "max_pool", "max_pool_with_indices",
        "max_pool_backward", "adaptive_avg_pool", "adaptive_max_pool",
        "adaptive_max_pool_with_indices",
        "interpolate", "max_with_indices", "min_with_indices", "cumsum", "cumprod", "argsort",
        "sort", "sort_with_indices", "softmax", "log_softmax", "softmax_backward",
        "log_softmax_backward", "lstm_cell", "lstm_cell_backward", "gru_cell",
        "gru_cell_backward", "gather", "select", "scatter_add", "select_add",
        "slice_assign", "cat", "repeat_dim", "empty", "random", "from_data", "into_data", "read",
        "to_device", "attention", "attention_backward",
    })

    def __init__(self, backend: JitBase):
        self.backend = backend

    begin = staticmethod(lazy.begin)
    end = staticmethod(lazy.end)

    def flush(self, device: Device) -> None:
        lazy.flush(self.backend.runtime(device))

    def programs(self, device: Device) -> list[FusedProgram]:
        return list(self.backend.runtime(device).fused_programs.values())

    def launches(self, device: Device) -> int:
        return self.backend.runtime(device).launches
