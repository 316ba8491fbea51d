"""Optimizer updates on NumPy float arrays: a few ufunc passes, the donated moments updated in
their own memory where nothing else sees them."""

from __future__ import annotations

import numpy as np

from burnish.backend.optim_ops import OptimOps
from burnish.dtype import DType
from burnish.ndarray.dtypes import HALF_FLOATS, quiet, widen
from burnish.ndarray.numeric_ops import _reusable


class NdArrayOptimOps(OptimOps):
    """Half floats are computed in float32 and rounded once per result; ``value`` and
    ``grad`` are never written to."""

    def adam_step(self, value: np.ndarray, grad: np.ndarray, moment_1: np.ndarray,
                  moment_2: np.ndarray, beta_1: float, beta_2: float, epsilon: float,
                  step_size: float, dtype: DType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # Checked here, not under a decorator whose argument tuple would hold one more
        # reference to the moments than ``_reusable`` counts.
        if not value.shape:  # 0-d: ufuncs would give NumPy scalars, which take no ``out=``
            results = _adam(value.reshape(1), grad.reshape(1), moment_1.reshape(1),
                            moment_2.reshape(1), (False, False), beta_1, beta_2, epsilon,
                            step_size)
            return tuple(r.reshape(()) for r in results)
        half = value.dtype in HALF_FLOATS
        reuse = (not half and _reusable(moment_1, grad), not half and _reusable(moment_2, grad))
        return _adam(value, grad, moment_1, moment_2, reuse, beta_1, beta_2, epsilon, step_size)


@quiet
def _adam(value: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray,
          reuse: tuple[bool, bool], beta_1: float, beta_2: float, epsilon: float,
          step_size: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    storage = value.dtype
    if reuse[0]:
        m *= beta_1
    else:
        m = widen(m) * beta_1
    if reuse[1]:
        v *= beta_2
    else:
        v = widen(v) * beta_2
    grad = widen(grad)
    scratch = grad * (1.0 - beta_1)
    m += scratch
    np.multiply(grad, grad, out=scratch)
    scratch *= 1.0 - beta_2
    v += scratch
    np.sqrt(v, out=scratch)
    scratch += epsilon
    np.divide(m, scratch, out=scratch)
    scratch *= -step_size
    scratch += value
    return (scratch.astype(storage, copy=False), m.astype(storage, copy=False),
            v.astype(storage, copy=False))
