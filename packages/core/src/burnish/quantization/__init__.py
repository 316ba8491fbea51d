"""Quantization: schemes, quantized tensors, and the ops that compute with them
(see docs/quantization.md)."""

from burnish.quantization.ops import conv, linear, matmul
from burnish.quantization.scheme import (
    Granularity,
    PerBlock,
    PerChannel,
    PerTensor,
    QuantScheme,
    scales_shape,
)
from burnish.quantization.tensor import QuantizedTensor, quantize

__all__ = [
    "Granularity", "PerBlock", "PerChannel", "PerTensor", "QuantScheme", "QuantizedTensor",
    "conv", "linear", "matmul", "quantize", "scales_shape",
]
