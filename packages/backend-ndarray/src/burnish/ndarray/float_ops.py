"""Elementwise float math on NumPy arrays: one ufunc each, erf through fdlibm's algorithm."""

from __future__ import annotations

import numpy as np

from burnish.backend.float_ops import FloatOps
from burnish.dtype import DType
from burnish.ndarray.dtypes import FLOAT64
from burnish.ndarray.erf import erf64

_exp, _sin, _cos, _tanh = np.exp, np.sin, np.cos, np.tanh


class NdArrayFloatOps(FloatOps):
    """Float ops; every ufunc here has float16 and bfloat16 loops, so results keep the dtype.
    Ops whose answer at some inputs is inf or NaN (log(0), sqrt(-1)) give it without warning."""

    def exp(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return _exp(x)

    def log(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(x)

    def log1p(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log1p(x)

    def sqrt(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.sqrt(x)

    def rsqrt(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.sqrt(x)
            return np.reciprocal(out, out=out) if isinstance(out, np.ndarray) else 1 / out

    def recip(self, x: np.ndarray, dtype: DType) -> np.ndarray:
        with np.errstate(divide="ignore", over="ignore"):
            return np.reciprocal(x)

    def sin(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):  # of inf
            return _sin(x)

    def cos(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):  # of inf
            return _cos(x)

    def tan(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.tan(x)

    def tanh(self, x: np.ndarray) -> np.ndarray:
        return _tanh(x)

    def erf(self, x: np.ndarray) -> np.ndarray:
        if x.dtype == FLOAT64:
            return erf64(x)
        return erf64(x.astype(FLOAT64)).astype(x.dtype)

    def floor(self, x: np.ndarray) -> np.ndarray:
        return np.floor(x)

    def ceil(self, x: np.ndarray) -> np.ndarray:
        return np.ceil(x)

    def round(self, x: np.ndarray) -> np.ndarray:
        # rint rounds halves to even, as NumPy's round and PyTorch's do.
        return np.rint(x)

    def is_nan(self, x: np.ndarray) -> np.ndarray:
        return np.isnan(x)

    def is_inf(self, x: np.ndarray) -> np.ndarray:
        return np.isinf(x)
