"""Reductions on the CPU: float sums and means of plain tensors through ``burnish.cpu.reduce``
(one vector pass, whichever dim is reduced); the rest through burnish.jit's kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from burnish.cpu.reduce import NativeReduce
from burnish.jit.backend.reduce_ops import JitReduceOps
from burnish.jit.kernels.reduce import out_shape_of
from burnish.jit.tensor import JitTensor, numel


class CpuReduceOps(JitReduceOps):
    """``sum`` and ``mean`` of float32 and float64 plain tensors in compiled C."""

    #: Fewer elements stay with the kernels: a host call costs about 15 µs of Python (the
    #: arrays, ctypes), twice a small kernel's launch.
    native_from = 4096
    _new: Callable[..., JitTensor]  # the backend's (JitBase)

    def sum(self, x, dim):
        return self._native(x, dim, False) or super().sum(x, dim)

    def mean(self, x, dim, dtype):
        return self._native(x, dim, True) or super().mean(x, dim, dtype)

    def _native(self, x: JitTensor, dim: int | None, mean: bool) -> JitTensor | None:
        """The reduction through ``NativeReduce``, or None where it does not apply (another
        dtype, a layout that is not plain, fewer than ``native_from`` elements)."""
        if (x.dtype.name not in NativeReduce.dtypes or x.numel < self.native_from
                or not x.is_contiguous()):
            return None
        shape = x.shape
        if dim is None:
            outer, n, inner = 1, numel(shape), 1
        else:
            outer, n, inner = numel(shape[:dim]), shape[dim], numel(shape[dim + 1:])
        runtime: Any = x.runtime  # a CpuRuntime: host calls and the compiled sums
        out_shape = out_shape_of(shape, dim)
        out = self._new(out_shape, x.dtype, x.device, runtime)
        flat = x.view((outer, n, inner), (n * inner, inner, 1), x.offset)
        runtime.host(_sum, (flat,), (out,), outer, n, inner, mean, runtime.native_reduce)
        return out


def _sum(x: np.ndarray, out: np.ndarray, outer: int, n: int, inner: int, mean: bool,
         native: NativeReduce) -> None:
    native.sum(x, out, outer, n, inner, mean)


def bind_sum(x: np.ndarray, out: np.ndarray, outer: int, n: int, inner: int, mean: bool,
             native: NativeReduce) -> Callable[[], None]:
    """``_sum`` of these arrays as a call of no arguments (``NativeReduce.bind_sum``)."""
    return native.bind_sum(x, out, outer, n, inner, mean)


#: Host functions of this module whose replays bind their arrays once
#: (``burnish.cpu.runtime``'s ``_BINDERS``).
BINDERS: dict[Any, Callable[..., Callable[[], None]]] = {_sum: bind_sum}
