"""Activations on the CPU: softmax and log-softmax along the last dim of float32 and float64
plain tensors, and their gradients, through ``burnish.cpu.rows``; the rest as burnish.jit's
kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from burnish.cpu.rows import NativeRows
from burnish.jit.backend.activation_ops import JitActivationOps
from burnish.jit.tensor import JitTensor, numel


class CpuActivationOps(JitActivationOps):
    """Softmax rows in compiled C where they are plain and along the last dim."""

    #: Fewer elements stay with the row kernel: a host call costs about 15 us of Python.
    rows_from = 4096
    _new: Callable[..., JitTensor]  # the backend's (JitBase)

    def softmax(self, x, dim, dtype):
        return self._rows("softmax", [x], dim) or super().softmax(x, dim, dtype)

    def log_softmax(self, x, dim, dtype):
        return self._rows("log_softmax", [x], dim) or super().log_softmax(x, dim, dtype)

    def softmax_backward(self, output, grad, dim, dtype):
        return (self._rows("softmax_backward", [output, grad], dim)
                or super().softmax_backward(output, grad, dim, dtype))

    def log_softmax_backward(self, output, grad, dim, dtype):
        return (self._rows("log_softmax_backward", [output, grad], dim)
                or super().log_softmax_backward(output, grad, dim, dtype))

    def _rows(self, op: str, inputs: list[JitTensor], dim: int) -> JitTensor | None:
        """``op`` through ``NativeRows``, or None where it does not apply (another dtype,
        inputs of different shapes or dtypes, another dim, a layout that is not plain, fewer
        than ``rows_from`` elements)."""
        first = inputs[0]
        shape = first.shape
        if (first.dtype.name not in NativeRows.dtypes or not shape
                or dim % len(shape) != len(shape) - 1 or numel(shape) < self.rows_from
                or any(x.shape != shape or x.dtype is not first.dtype or not x.is_contiguous()
                       for x in inputs)):
            return None
        runtime: Any = first.runtime  # a CpuRuntime: host calls and the compiled rows
        d = shape[-1]
        rows = numel(shape) // d
        out = self._new(shape, first.dtype, first.device, runtime)
        flat = [x.view((rows, d), (d, 1), x.offset) for x in inputs]
        runtime.host(_rows, tuple(flat), (out.view((rows, d), (d, 1), 0),), op,
                     runtime.native_rows)
        return out


def _rows(*rest: Any) -> None:
    """``NativeRows.run`` with what ``CpuActivationOps._rows`` recorded."""
    *arrays, op, native = rest
    *inputs, out = arrays
    native.run(op, inputs, out)
