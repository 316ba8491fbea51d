"""Module ops' backward passes on the CPU. Convolutions' weight gradients: each sample's patch
matrix times the output's gradient, summed over the batch by ``burnish.cpu.conv`` (forward
convolutions and input gradients go there through ``CpuRuntime.library_conv``); where that
cannot run, burnish.jit's patch matrix times the gradient in one BLAS product per group. Max
pooling's input gradient: one pass of ``burnish.cpu.pool`` per plane. Layer normalisation:
one visit per row in ``burnish.cpu.norm``. Linear maps: the bias added within the BLAS call."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from burnish.cpu.blas import Gemm
from burnish.cpu.conv import NativeConv, geometry
from burnish.cpu.norm import NativeNorm
from burnish.cpu.pool import NativePool
from burnish.jit.backend.module_ops import JitModuleOps
from burnish.jit.kernels import conv as conv_kernels
from burnish.jit.kernels.elementwise import plain
from burnish.jit.tensor import numel


class CpuModuleOps(JitModuleOps):
    """``conv_weight_grad`` and ``linear`` through NumPy's BLAS, ``max_pool_backward`` and
    ``layer_norm`` in compiled C, for float32 and float64."""

    def max_pool_backward(self, grad, indices, x_shape, dtype):
        if (dtype.name not in NativePool.dtypes or grad.dtype != dtype
                or indices.dtype.name != "int64"):
            return super().max_pool_backward(grad, indices, x_shape, dtype)
        runtime = grad.runtime
        shape = tuple(x_shape)
        out = self._new(shape, dtype, grad.device, runtime)
        if numel(shape):
            runtime.host(_max_pool_backward, (plain(grad), plain(indices)), (out,),
                         runtime.native_pool)
        return out

    def linear(self, x, weight, bias):
        """float32 and float64 on BLAS: each thread sets its block of the output to the bias,
        broadcast, and adds its product to it (BLAS's beta of 1): no pass of its own for the
        bias."""
        runtime = x.runtime
        if not runtime.blas(x.dtype) or weight.dtype != x.dtype or bias.dtype != x.dtype:
            return super().linear(x, weight, bias)
        shape = (*x.shape[:-1], weight.shape[1])
        out = self._new(shape, x.dtype, x.device, runtime)
        if numel(shape):
            runtime.host(_linear, (x, weight, plain(bias)), (out,), runtime.gemm)
        return out

    def layer_norm(self, x, weight, bias, epsilon, dtype):
        """float32 and float64 through ``burnish.cpu.norm``: one visit per row."""
        if not _native_norm(dtype, x, weight, bias):
            return super().layer_norm(x, weight, bias, epsilon, dtype)
        return self._layer_norm(x, weight, bias, epsilon, dtype, False)[0]

    def layer_norm_with_statistics(self, x, weight, bias, epsilon, dtype):
        """float32 and float64 through ``burnish.cpu.norm``: the statistics written by the
        same visit per row."""
        if not _native_norm(dtype, x, weight, bias):
            return super().layer_norm_with_statistics(x, weight, bias, epsilon, dtype)
        return self._layer_norm(x, weight, bias, epsilon, dtype, True)

    def _layer_norm(self, x, weight, bias, epsilon, dtype, statistics):
        runtime = x.runtime
        d = x.shape[-1]
        rows = numel(x.shape) // d
        x = plain(x)
        out = self._new(x.shape, dtype, x.device, runtime)
        stats = ()
        if statistics:
            stats = tuple(self._new((*x.shape[:-1], 1), dtype, x.device, runtime)
                          for _ in range(2))
        flat = x.view((rows, d), (d, 1), x.offset)
        runtime.host(_layer_norm, (flat, plain(weight), plain(bias)),
                     (out.view((rows, d), (d, 1), 0), *stats), float(epsilon),
                     runtime.native_norm)
        return (out, *stats) if statistics else (out, None, None)

    def layer_norm_backward(self, x, weight, mean, invstd, grad, dtype):
        """float32 and float64 through ``burnish.cpu.norm``: one visit per row, the weight's
        and bias's gradients summed on the way."""
        if not _native_norm(dtype, x, weight, grad, mean, invstd):
            return super().layer_norm_backward(x, weight, mean, invstd, grad, dtype)
        runtime = x.runtime
        d = x.shape[-1]
        rows = numel(x.shape) // d
        dx = self._new(x.shape, dtype, x.device, runtime)
        dweight, dbias = (self._new((d,), dtype, x.device, runtime) for _ in range(2))
        x, grad = plain(x), plain(grad)
        runtime.host(_layer_norm_backward,
                     (x.view((rows, d), (d, 1), x.offset), plain(weight), plain(mean),
                      plain(invstd), grad.view((rows, d), (d, 1), grad.offset)),
                     (dx.view((rows, d), (d, 1), 0), dweight, dbias), runtime.native_norm)
        return dx, dweight, dbias

    def conv_weight_grad(self, x, grad, kernel, stride, padding, dilation, groups):
        runtime = x.runtime
        if not runtime.blas(x.dtype):
            return super().conv_weight_grad(x, grad, kernel, stride, padding, dilation, groups)
        batch, channels = x.shape[:2]
        out_channels, out_size = grad.shape[1], tuple(grad.shape[2:])
        taps, positions = math.prod(kernel), math.prod(out_size)
        per_group, group_out = channels // groups, out_channels // groups
        shape = (out_channels, per_group, *kernel)
        out = self._new(shape, x.dtype, x.device, runtime)
        inner = per_group * taps
        result = out.view((groups, group_out, inner), (group_out * inner, inner, 1), 0)
        grad = plain(grad)
        native = runtime.native_conv
        if x.dtype.name in native.entries and 1 <= len(kernel) <= 3:
            words = geometry(x.shape[2:], out_size, kernel, stride, padding, dilation,
                             x.strides[2:])
            runtime.host(_weight_grad, (x, grad), (result,), tuple(words.tolist()), groups,
                         native)
            return out
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
            runtime.host(_accumulate, (grads, cols), (result,), start == 0, runtime.gemm)
        return out


def _max_pool_backward(grad: np.ndarray, indices: np.ndarray, out: np.ndarray,
                       native: NativePool) -> None:
    native.backward(grad, indices, out)


def _weight_grad(x: np.ndarray, grad: np.ndarray, result: np.ndarray, words: tuple[int, ...],
                 groups: int, native: NativeConv) -> None:
    native.weight_grad(x, grad, result, np.array(words, np.int64), groups, False)


def _accumulate(grads: np.ndarray, cols: np.ndarray, result: np.ndarray, first: bool,
                gemm: Gemm) -> None:
    """``result[g] (+)= sum over samples and positions of grads[:, g] x cols[:, g]``: one
    product per sample added up in place (one group), else per group one product whose inner
    dim is samples x positions."""
    count, groups, group_out, positions = grads.shape
    if groups == 1 and gemm.product(grads[:, 0], cols[:, 0].swapaxes(-1, -2), result[0],
                                    accumulate=True, beta=0.0 if first else 1.0):
        return
    lhs = grads.transpose(1, 2, 0, 3).reshape(groups, group_out, count * positions)
    rhs = cols.transpose(1, 0, 3, 2).reshape(groups, count * positions, -1)
    if first:
        np.matmul(lhs, rhs, out=result)
    else:
        result += np.matmul(lhs, rhs)


def _native_norm(dtype, x, *others) -> bool:
    """Whether ``burnish.cpu.norm`` takes a layer norm of ``x`` (and ``others``, all of
    ``dtype``): float32 and float64, at least one element."""
    return (dtype.name in NativeNorm.dtypes and x.dtype == dtype and bool(x.shape)
            and all(t.dtype == dtype for t in others) and bool(numel(x.shape)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, out: np.ndarray,
                *rest: Any) -> None:
    """``NativeNorm.layer_norm`` with what ``CpuModuleOps._layer_norm`` recorded: the
    statistics' arrays, where asked for, follow ``out``."""
    *stats, epsilon, native = rest
    mean, invstd = stats if stats else (None, None)
    native.layer_norm(x, weight, bias, out, epsilon, mean, invstd)


def _layer_norm_backward(x: np.ndarray, weight: np.ndarray, mean: np.ndarray,
                         invstd: np.ndarray, grad: np.ndarray, dx: np.ndarray,
                         dweight: np.ndarray, dbias: np.ndarray, native: NativeNorm) -> None:
    native.layer_norm_backward(x, weight, mean, invstd, grad, dx, dweight, dbias)


def _linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, out: np.ndarray,
            gemm: Gemm) -> None:
    if not gemm.product(x, weight, out, bias=bias):
        np.matmul(x, weight, out=out)
        out += bias
