"""Convolutions' weight gradients on the CPU: the patch matrix of ``burnish.jit`` times the
output's gradient in one BLAS product per group (forward convolutions and input gradients take
the same way through ``CpuRuntime.library_matmul``)."""

from __future__ import annotations

import math

import numpy as np

from burnish.jit.backend.module_ops import JitModuleOps
from burnish.jit.kernels import conv as conv_kernels
from burnish.jit.kernels.elementwise import plain
from burnish.jit.tensor import JitTensor, numel


class CpuModuleOps(JitModuleOps):
    """``conv_weight_grad`` through NumPy's BLAS for float32 and float64."""

    def conv_weight_grad(self, x, grad, kernel, stride, padding, dilation, groups):
        runtime = x.runtime
        if not runtime.blas(x.dtype):
            return super().conv_weight_grad(x, grad, kernel, stride, padding, dilation, groups)
        batch, channels = x.shape[:2]
        out_channels, out_size = grad.shape[1], tuple(grad.shape[2:])
        taps, positions = math.prod(kernel), math.prod(out_size)
        per_group, group_out = channels // groups, out_channels // groups
        shape = (out_channels, per_group, *kernel)
        itemsize = np.dtype(x.dtype.name).itemsize
        out = JitTensor(runtime.pool.alloc(numel(shape) * itemsize), shape, x.dtype, x.device,
                        runtime)
        inner = per_group * taps
        result = out.view((groups, group_out, inner), (group_out * inner, inner, 1), 0)
        grad = plain(grad)
        step = max(1, conv_kernels.COLUMN_LIMIT // max(1, channels * taps * positions))
        for start in range(0, batch, step):
            count = min(step, batch - start)
            part = x.view((count, *x.shape[1:]), x.strides, x.offset + start * x.strides[0])
            columns = conv_kernels.columns(part, kernel, stride, padding, dilation, out_size,
                                            False)
            cols = columns.view((count, groups, inner, positions),
                                (groups * inner * positions, inner * positions, positions, 1),
                                columns.offset)
            grads = grad.view((count, groups, group_out, positions),
                              (out_channels * positions, group_out * positions, positions, 1),
                              grad.offset + start * out_channels * positions)
            runtime.host(_accumulate, (grads, cols), (result,), start == 0)
        return out


def _accumulate(grads: np.ndarray, cols: np.ndarray, result: np.ndarray, first: bool) -> None:
    """``result[g] (+)= sum over samples and positions of grads[:, g] x cols[:, g]``: per group
    one product whose inner dim is samples x positions."""
    count, groups, group_out, positions = grads.shape
    lhs = grads.transpose(1, 2, 0, 3).reshape(groups, group_out, count * positions)
    rhs = cols.transpose(1, 0, 3, 2).reshape(groups, count * positions, -1)
    if first:
        np.matmul(lhs, rhs, out=result)
    else:
        result += np.matmul(lhs, rhs)
