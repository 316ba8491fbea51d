"""Quantized matmul on NumPy: the integer products through float32 BLAS, exactly.

NumPy multiplies integer matrices without BLAS, some 300 times slower than float32 (a 1024²
int8 product takes seconds). But integers up to 2^24 are exact in float32, and so is every
partial sum while it stays below 2^24: with int8 values (|q| <= 127, after the zero point
<= 255) a dot product of up to 1040 terms (258 for affine ones) is computed exactly by sgemm.
Longer inner dims are cut into chunks of that length, each exact, added in float64. The scales
then multiply the int32-exact sums once per output element. See bench/bench_quant.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from burnish.backend.quant_ops import QuantizedPrimitive, QuantOps
from burnish.dtype import DType
from burnish.quantization.scheme import PerBlock, PerChannel, QuantScheme, channel_axis

#: The largest integer float32 holds exactly, with every integer below it.
_EXACT = 2 ** 24


class NdArrayQuantOps(QuantOps):
    """``quantized_matmul`` of two quantized operands whose scales factor out of the dot
    products (per tensor, or per channel along an axis the product does not sum over: the
    rows of ``lhs``, the columns of ``rhs``), and ``quantize`` of unpacked values per tensor
    or per channel in one buffer; everything else is the protocol's default."""

    def quantized_matmul(self, lhs: Any, rhs: Any, dtype: DType) -> Any:
        if not (isinstance(lhs, QuantizedPrimitive) and isinstance(rhs, QuantizedPrimitive)
                and _factors(lhs, summed=len(lhs.shape) - 1)
                and _factors(rhs, summed=len(rhs.shape) - 2)):
            return QuantOps.quantized_matmul(self, lhs, rhs, dtype)
        a, a_bound = _centered(lhs)
        b, b_bound = _centered(rhs)
        inner = a.shape[-1]
        chunk = max(1, (_EXACT - 1) // (a_bound * b_bound))
        if inner <= chunk:
            out = np.matmul(a, b)
        else:
            out = np.matmul(a[..., :chunk], b[..., :chunk, :]).astype(np.float64)
            for start in range(chunk, inner, chunk):
                out += np.matmul(a[..., start:start + chunk], b[..., start:start + chunk, :])
            out = out.astype(np.float32)
        # A channel axis of lhs (not its last) or of rhs (not its second-to-last) lies where
        # the product's output has it: the scales broadcast in place, multiplied together
        # first (a vector, for per-tensor activations and per-channel weights).
        out *= _broadcast(lhs, lhs.scales.astype(np.float32)) * \
            _broadcast(rhs, rhs.scales.astype(np.float32))
        return out if out.dtype == dtype.numpy else out.astype(dtype.numpy)

    def quantize(self, x: Any, scales: Any, zero_points: Any, scheme: QuantScheme,
                 dtype: DType) -> QuantizedPrimitive:
        # The default's arithmetic (float32 x / scale, rint, + zero point, clip) in one buffer.
        if scheme.packed or isinstance(scheme.granularity, PerBlock):
            return QuantOps.quantize(self, x, scales, zero_points, scheme, dtype)
        q = QuantizedPrimitive(x, scales, zero_points, scheme, tuple(x.shape))
        ratio = np.divide(x, _broadcast(q, scales.astype(np.float32)), dtype=np.float32)
        np.rint(ratio, out=ratio)
        qmin, qmax = scheme.range
        if zero_points is not None:
            ratio += _broadcast(q, zero_points.astype(np.float32))
        elif scheme.symmetric_zero:
            ratio += np.float32(scheme.symmetric_zero)
        if scheme.mode == "symmetric":
            qmin = scheme.symmetric_zero - scheme.symmetric_limit
            qmax = scheme.symmetric_zero + scheme.symmetric_limit
        np.clip(ratio, qmin, qmax, out=ratio)
        values = ratio.astype(scheme.storage_dtype.numpy)
        return QuantizedPrimitive(values, scales, zero_points, scheme, tuple(x.shape))


def _factors(q: QuantizedPrimitive, summed: int) -> bool:
    """Whether ``q``'s scales are constant along dim ``summed`` (the one matmul sums over)."""
    granularity = q.scheme.granularity
    if isinstance(granularity, PerBlock):
        return False
    return not isinstance(granularity, PerChannel) or channel_axis(granularity, q.shape) != summed


def _centered(q: QuantizedPrimitive) -> tuple[np.ndarray, int]:
    """The integers minus their zero points as float32 (exact), and a bound on their
    magnitude."""
    scheme = q.scheme
    values = q.values
    if scheme.packed:
        nibbles = np.stack([values & 15, values >> 4], axis=-1).astype(np.int8).reshape(-1)
        nibbles = nibbles[:int(np.prod(q.shape))]
        values = np.where(nibbles >= 8, nibbles - 16, nibbles).reshape(q.shape)
    ints = values.astype(np.float32)
    if q.zero_points is not None:
        ints -= _broadcast(q, q.zero_points.astype(np.float32))
        qmin, qmax = scheme.range
        return ints, qmax - qmin
    if scheme.symmetric_zero:
        ints -= np.float32(scheme.symmetric_zero)
    return ints, scheme.symmetric_limit


def _broadcast(q: QuantizedPrimitive, params: np.ndarray) -> np.ndarray:
    granularity = q.scheme.granularity
    if not isinstance(granularity, PerChannel):
        return params
    axis = channel_axis(granularity, q.shape)
    return params.reshape([n if d == axis else 1 for d, n in enumerate(q.shape)])
