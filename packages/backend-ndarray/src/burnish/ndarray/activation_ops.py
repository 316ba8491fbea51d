"""Activations on NumPy float arrays, each a few ufunc passes writing into its own temporaries."""

from __future__ import annotations

import math

import numpy as np

from burnish.backend.activation_ops import ActivationOps
from burnish.dtype import DType
from burnish.ndarray.dtypes import FLOAT64, compute_dtype, element, quiet
from burnish.ndarray.erf import erf64

_INV_SQRT2 = 1.0 / math.sqrt(2.0)


class NdArrayActivationOps(ActivationOps):
    """Activations. Half floats are computed in float32 and rounded once; the temporaries each
    op allocates are reused with ``out=``, so an activation costs one or two arrays, not five.
    Inputs are never written to."""

    def relu(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        return np.maximum(x, element(0, x.dtype))

    @quiet
    def relu_backward(self, output: np.ndarray, grad: np.ndarray, dtype: DType) -> np.ndarray:
        return np.multiply(grad, np.greater(output, element(0, output.dtype)))

    @quiet
    def gelu(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        # In float64 whatever the dtype: 1 + erf cancels for negative x, and float32 would
        # keep few correct digits there (PyTorch's float32 gelu is off by 20% near x = -5).
        flat = np.ravel(x).astype(FLOAT64, copy=False)
        out = erf64(flat * _INV_SQRT2)
        out += 1.0
        out *= flat  # -inf * 0 is NaN at x = -inf, as in PyTorch
        out *= 0.5
        return out.astype(x.dtype, copy=False).reshape(np.shape(x))

    @quiet
    def hard_sigmoid(self, x: np.ndarray, alpha: float, beta: float, dtype: DType
                     ) -> np.ndarray:
        flat = np.ravel(x).astype(compute_dtype(x.dtype), copy=False)
        out = flat * alpha
        out += beta
        np.clip(out, 0.0, 1.0, out=out)  # NaN stays NaN
        return out.astype(x.dtype, copy=False).reshape(np.shape(x))

    @quiet
    def hard_swish(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        flat = np.ravel(x).astype(compute_dtype(x.dtype), copy=False)
        out = flat + 3.0
        np.clip(out, 0.0, 6.0, out=out)
        out *= flat
        out *= 1.0 / 6.0
        return out.astype(x.dtype, copy=False).reshape(np.shape(x))

    @quiet
    def sigmoid(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        flat = np.ravel(x).astype(compute_dtype(x.dtype), copy=False)
        # 1 / (1 + exp(-x)): exp overflows to inf for very negative x and the result is then 0,
        # its correct rounding; no branch (a select by sign costs more than the whole formula).
        out = np.negative(flat)
        np.exp(out, out=out)
        out += 1
        np.reciprocal(out, out=out)
        return out.astype(x.dtype, copy=False).reshape(np.shape(x))

    @quiet
    def log_sigmoid(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        flat = np.ravel(x).astype(compute_dtype(x.dtype), copy=False)
        softplus = np.abs(flat)
        np.negative(softplus, out=softplus)
        np.exp(softplus, out=softplus)
        np.log1p(softplus, out=softplus)
        out = np.minimum(flat, 0.0)
        out -= softplus
        return out.astype(x.dtype, copy=False).reshape(np.shape(x))

    @quiet
    def softmax(self, x: np.ndarray, dim: int, dtype: DType) -> np.ndarray:
        if x.shape[dim] == 0:
            return np.array(x)
        xc = x.astype(compute_dtype(x.dtype), copy=False)
        out = xc - np.max(xc, axis=dim, keepdims=True)  # a row of -inf gives NaN, as PyTorch
        np.exp(out, out=out)
        out /= np.sum(out, axis=dim, keepdims=True)
        return out.astype(x.dtype, copy=False)

    @quiet
    def log_softmax(self, x: np.ndarray, dim: int, dtype: DType) -> np.ndarray:
        if x.shape[dim] == 0:
            return np.array(x)
        xc = x.astype(compute_dtype(x.dtype), copy=False)
        out = xc - np.max(xc, axis=dim, keepdims=True)
        total = np.sum(np.exp(out), axis=dim, keepdims=True)
        out -= np.log(total, out=total)
        return out.astype(x.dtype, copy=False)

    @quiet
    def softmax_backward(self, output: np.ndarray, grad: np.ndarray, dim: int,
                         dtype: DType) -> np.ndarray:
        if output.shape != grad.shape:  # the default broadcasts; autodiff never needs it
            return ActivationOps.softmax_backward(self, output, grad, dim, dtype)
        wide = compute_dtype(grad.dtype)
        o = output.astype(wide, copy=False)
        out = np.multiply(grad, o, dtype=wide)
        total = np.sum(out, axis=dim, keepdims=True)
        np.subtract(grad, total, out=out, dtype=wide)
        out *= o
        return out.astype(grad.dtype, copy=False)

    @quiet
    def log_softmax_backward(self, output: np.ndarray, grad: np.ndarray, dim: int,
                             dtype: DType) -> np.ndarray:
        if output.shape != grad.shape:
            return ActivationOps.log_softmax_backward(self, output, grad, dim, dtype)
        wide = compute_dtype(grad.dtype)
        total = np.sum(grad, axis=dim, keepdims=True, dtype=wide)
        out = np.exp(output, dtype=wide)
        out *= total
        np.subtract(grad, out, out=out, dtype=wide)
        return out.astype(grad.dtype, copy=False)

