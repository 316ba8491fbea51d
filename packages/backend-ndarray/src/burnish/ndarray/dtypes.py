"""NumPy dtype helpers: the dtype to compute in, scalars as elements, silent IEEE results."""

from __future__ import annotations

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
INT64 = np.dtype(np.int64)

#: Float dtypes too narrow to accumulate in: sums, products, matmuls and the like run in float32
#: and round once at the end (as PyTorch does), which is also far faster than NumPy's float16
#: loops and ml_dtypes' bfloat16 ones.
HALF_FLOATS = (FLOAT16, BFLOAT16)


#: Decorator (not a reusable ``with`` block) for ops whose inf and NaN results are answers, not
#: accidents (a pool over an input holding inf, a cast that overflows float16): NumPy would warn,
#: PyTorch does not.
quiet = np.errstate(divide="ignore", invalid="ignore", over="ignore")


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype to accumulate ``dtype`` values in: float32 for the half floats, else itself."""
    return FLOAT32 if dtype in HALF_FLOATS else dtype


def widen(x: np.ndarray) -> np.ndarray:
    """``x`` in its compute dtype (float32 for half floats; exact), unchanged otherwise."""
    if x.dtype in HALF_FLOATS:
        return x.astype(FLOAT32)
    return x


def element(value: bool | int | float, dtype: np.dtype) -> np.generic:
    """``value`` as a NumPy scalar of ``dtype``.

    Ints out of an int dtype's range wrap around (two's complement, as PyTorch does) instead of
    raising as NumPy 2 does; floats to ints truncate toward zero.
    """
    kind = dtype.kind
    if kind == "f" and (type(value) is float or type(value) is int):
        return value  # NumPy 2 treats Python numbers as weak: the array's float dtype wins
    if kind in "iu" and isinstance(value, int) and not isinstance(value, bool):
        bits = dtype.itemsize * 8
        value %= 1 << bits
        if dtype.kind == "i" and value >= 1 << (bits - 1):
            value -= 1 << bits
    return dtype.type(value)
