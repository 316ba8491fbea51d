"""Ops that neural-network modules are built from: convolutions, pools, interpolation, embedding.

Layouts are channels-first: ``x`` is ``[batch, channels, *spatial]`` with 1, 2 or 3 spatial dims.
Every per-dim option (stride, padding, dilation, kernel size...) arrives as a tuple with one entry
per spatial dim; ``Tensor`` and ``burnish.functional`` have checked that the shapes fit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from burnish.backend.base import Primitive
from burnish.dtype import DType

Dims = tuple[int, ...]


class ModuleOps(ABC):
    """Convolutions, pools, interpolation, embedding and unfold."""

    @abstractmethod
    def conv(self, x: Primitive, weight: Primitive, bias: Primitive | None, stride: Dims,
             padding: Dims, dilation: Dims, groups: int) -> Primitive:
        """Cross-correlation (PyTorch's convN). ``weight`` is ``[out_channels, in_channels //
        groups, *kernel]``, ``bias`` ``[out_channels]``; zero padding on both sides of each dim."""

    @abstractmethod
    def conv_transpose(self, x: Primitive, weight: Primitive, bias: Primitive | None,
                       stride: Dims, padding: Dims, output_padding: Dims, dilation: Dims,
                       groups: int) -> Primitive:
        """Transposed convolution (PyTorch's conv_transposeN). ``weight`` is ``[in_channels,
        out_channels // groups, *kernel]``; each output dim is ``(in - 1) * stride - 2 * padding
        + dilation * (kernel - 1) + output_padding + 1``."""

    @abstractmethod
    def avg_pool(self, x: Primitive, kernel: Dims, stride: Dims, padding: Dims,
                 count_include_pad: bool, ceil_mode: bool) -> Primitive:
        """Mean over each window; padding counts as zeros in the divisor when
        ``count_include_pad``, else only real elements are counted."""

    @abstractmethod
    def max_pool_with_indices(self, x: Primitive, kernel: Dims, stride: Dims, padding: Dims,
                              dilation: Dims, ceil_mode: bool) -> tuple[Primitive, Primitive]:
        """Max over each window (padding is -inf) and the int64 index of the max, flattened over
        the spatial dims of the input (PyTorch's ``return_indices``); the first max wins."""

    def max_pool(self, x: Primitive, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
                 ceil_mode: bool) -> Primitive:
        """Max over each window (padding is -inf)."""
        return self.max_pool_with_indices(x, kernel, stride, padding, dilation, ceil_mode)[0]

    @abstractmethod
    def adaptive_avg_pool(self, x: Primitive, output_size: Dims) -> Primitive:
        """Mean over windows ``[floor(i * L / out), ceil((i + 1) * L / out))`` of each dim."""

    @abstractmethod
    def adaptive_max_pool_with_indices(self, x: Primitive, output_size: Dims
                                       ) -> tuple[Primitive, Primitive]:
        """Max over the adaptive windows and the flattened int64 index of each max."""

    def adaptive_max_pool(self, x: Primitive, output_size: Dims) -> Primitive:
        """Max over the adaptive windows of each dim."""
        return self.adaptive_max_pool_with_indices(x, output_size)[0]

    @abstractmethod
    def interpolate(self, x: Primitive, size: Dims, mode: str, align_corners: bool
                    ) -> Primitive:
        """``x`` ([batch, channels, height, width]) resized to ``size`` by ``mode``: ``"nearest"``
        (PyTorch's legacy nearest: ``floor(out_index * in / out)``), ``"bilinear"`` or
        ``"bicubic"`` (a = -0.75, borders clamped), with PyTorch's ``align_corners`` meaning."""

    def embedding(self, weights: Primitive, indices: Primitive) -> Primitive:
        """Rows of ``weights`` ([num, dim]) at int64 ``indices`` of any shape:
        ``[*indices, dim]``."""
        flat = self.reshape(indices, (_numel(indices.shape),))
        rows = self.select(weights, 0, flat)
        return self.reshape(rows, tuple(indices.shape) + (weights.shape[1],))

    def unfold(self, x: Primitive, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
               dtype: DType) -> Primitive:
        """Sliding blocks of ``x`` ([batch, channels, h, w]) as columns: ``[batch, channels *
        kh * kw, blocks]`` (PyTorch's ``F.unfold``), through a convolution with one-hot weights."""
        import numpy as np

        from burnish.tensor_data import TensorData

        channels = x.shape[1]
        size = channels * _numel(kernel)
        eye = np.eye(size, dtype=dtype.numpy).reshape((size, channels) + tuple(kernel))
        weight = self.from_data(TensorData(eye), self._device_of(x))
        out = self.conv(x, weight, None, stride, padding, dilation, 1)
        return self.reshape(out, (out.shape[0], size, _numel(out.shape[2:])))


def _numel(shape: Dims) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
