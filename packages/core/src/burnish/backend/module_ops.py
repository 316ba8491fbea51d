"""Ops that neural-network modules are built from: convolutions, pools, interpolation, embedding.

Layouts are channels-first: ``x`` is ``[batch, channels, *spatial]`` with 1, 2 or 3 spatial dims.
Every per-dim option (stride, padding, dilation, kernel size...) arrives as a tuple with one entry
per spatial dim; ``Tensor`` and ``burnish.functional`` have checked that the shapes fit.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

from burnish.backend.base import Primitive
from burnish.dtype import DType, float32

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

    def conv_weight_grad(self, x: Primitive, grad: Primitive, kernel: Dims, stride: Dims,
                         padding: Dims, dilation: Dims, groups: int) -> Primitive:
        """The gradient of ``conv(x, weight, ...)`` with respect to ``weight``, contracted with
        ``grad`` (the output's gradient, ``[batch, out_channels, *out]``): ``[out_channels,
        in_channels // groups, *kernel]``. (The weight gradient of ``conv_transpose`` is this op
        with ``x`` and ``grad`` exchanged.) The default is one grouped convolution whose batch
        is the input channels of a group, whose channels are (group, batch) and whose kernel is
        ``grad``, with stride and dilation exchanged."""
        batch, channels, *size = x.shape
        out_channels, out_size = grad.shape[1], tuple(grad.shape[2:])
        size = tuple(size)
        group_in, group_out = channels // groups, out_channels // groups
        spatial = tuple(range(3, 3 + len(size)))
        xs = self.reshape(x, (batch, groups, group_in) + size)
        xs = self.reshape(self.permute(xs, (2, 1, 0) + spatial), (group_in, groups * batch) + size)
        gs = self.reshape(grad, (batch, groups, group_out) + out_size)
        gs = self.reshape(self.permute(gs, (1, 2, 0) + spatial),
                          (groups * group_out, batch) + out_size)
        full = self.conv(xs, gs, None, dilation, padding, stride, groups)
        if tuple(full.shape[2:]) != tuple(kernel):
            # Rows of the padded input that no output reads give extra kernel positions.
            full = self.slice(full, ((0, group_in, 1), (0, out_channels, 1))
                              + tuple((0, k, 1) for k in kernel))
        return self.permute(full, (1, 0) + tuple(range(2, 2 + len(size))))

    def batch_norm(self, x: Primitive, weight: Primitive, bias: Primitive, epsilon: float,
                   dtype: DType) -> tuple[Primitive, Primitive, Primitive]:
        """Batch normalisation with the batch's statistics (training mode): ``x`` is ``[batch,
        channels, *spatial]`` of ``dtype``, ``weight`` and ``bias`` ``[channels]``.
        Returns ``(y, mean, invstd)``: ``y = (x - mean) * invstd * weight + bias`` of ``dtype``,
        where ``mean`` and ``invstd = 1 / sqrt(var + epsilon)`` (``var`` biased) are taken per
        channel over every other dim and returned as ``[channels]``. For a float ``dtype`` of
        32 bits or more, ``weight``, ``bias`` and the statistics are of ``dtype``; for a 16-bit
        float ``dtype`` they are float32, the statistics and the normalisation are computed in
        float32 and ``y`` rounded once (cuDNN's and PyTorch's rule)."""
        if _narrow_float(dtype):
            y, mean, invstd = self.batch_norm(self.cast(x, dtype, float32), weight, bias,
                                              epsilon, float32)
            return self.cast(y, float32, dtype), mean, invstd
        channels, ndim = x.shape[1], len(x.shape)
        shape = (1, channels) + (1,) * (ndim - 2)
        dims = [0, *range(2, ndim)]
        mean = x
        for d in reversed(dims):
            mean = self.mean(mean, d, dtype)
        centered = self.sub(x, mean)
        var = self.mul(centered, centered)
        for d in reversed(dims):
            var = self.mean(var, d, dtype)
        invstd = self.rsqrt(self.add_scalar(var, epsilon, dtype), dtype)
        y = self.mul_add(self.mul(centered, invstd), self.reshape(weight, shape),
                         self.reshape(bias, shape))
        return y, self.reshape(mean, (channels,)), self.reshape(invstd, (channels,))

    def linear(self, x: Primitive, weight: Primitive, bias: Primitive) -> Primitive:
        """``x @ weight + bias``: ``x`` is ``[..., d_input]`` (at least 2-d), ``weight``
        ``[d_input, d_output]``, ``bias`` ``[d_output]``, all of one float dtype; the result is
        ``[..., d_output]`` (what ``nn.Linear`` runs with a bias). Decorators that
        differentiate keep this composition."""
        y = self.matmul(x, weight)
        return self.add(y, self.reshape(bias, (1,) * (len(y.shape) - 1) + (bias.shape[0],)))

    def layer_norm(self, x: Primitive, weight: Primitive, bias: Primitive, epsilon: float,
                   dtype: DType) -> Primitive:
        """Layer normalisation over the last dim: ``x`` is ``[..., d]``, ``weight`` and ``bias``
        ``[d]``, all of ``dtype``; ``y = (x - mean) * invstd * weight + bias`` with each row's
        ``mean`` and ``invstd = 1 / sqrt(var + epsilon)`` (``var`` biased). 16-bit floats
        compute in float32 and round once at the end (as PyTorch's layer norm does)."""
        return self.layer_norm_with_statistics(x, weight, bias, epsilon, dtype)[0]

    def layer_norm_with_statistics(self, x: Primitive, weight: Primitive, bias: Primitive,
                                   epsilon: float, dtype: DType
                                   ) -> tuple[Primitive, Primitive, Primitive]:
        """``layer_norm``'s ``y`` with each row's ``mean`` and ``invstd`` (``[..., 1]``,
        float32 for 16-bit floats): what autodiff keeps for ``layer_norm_backward``."""
        if _narrow_float(dtype):
            x32, weight32, bias32 = (self.cast(v, dtype, float32) for v in (x, weight, bias))
            y, mean, invstd = self.layer_norm_with_statistics(x32, weight32, bias32, epsilon,
                                                              float32)
            return self.cast(y, float32, dtype), mean, invstd
        last = len(x.shape) - 1
        mean = self.mean(x, last, dtype)
        centered = self.sub(x, mean)
        var = self.mean(self.mul(centered, centered), last, dtype)
        invstd = self.rsqrt(self.add_scalar(var, epsilon, dtype), dtype)
        shape = (1,) * last + (x.shape[last],)
        y = self.add(self.mul(self.mul(centered, invstd), self.reshape(weight, shape)),
                     self.reshape(bias, shape))
        return y, mean, invstd

    def layer_norm_backward(self, x: Primitive, weight: Primitive, mean: Primitive,
                            invstd: Primitive, grad: Primitive, dtype: DType
                            ) -> tuple[Primitive, Primitive, Primitive]:
        """The gradients ``(dx, dweight, dbias)`` of ``layer_norm``'s ``y`` contracted with
        ``grad`` (``x``, ``weight``, ``grad`` and the results of ``dtype``), given each row's
        ``mean`` and ``invstd`` (``[..., 1]``, float32 for 16-bit floats, whose work is done in
        float32; ``layer_norm_with_statistics`` gives them): with ``xhat = (x - mean) * invstd`` and
        ``g = grad * weight``, ``dbias`` and ``dweight`` are the sums of ``grad`` and ``grad *
        xhat`` over every row, and ``dx = invstd * (g - mean(g) - xhat * mean(g * xhat))``,
        the means over each row."""
        if _narrow_float(dtype):
            x32, weight32, grad32 = (self.cast(v, dtype, float32) for v in (x, weight, grad))
            dx, dweight, dbias = self.layer_norm_backward(x32, weight32, mean, invstd, grad32,
                                                          float32)
            return (self.cast(dx, float32, dtype), self.cast(dweight, float32, dtype),
                    self.cast(dbias, float32, dtype))
        last = len(x.shape) - 1
        d = x.shape[last]
        xhat = self.mul(self.sub(x, mean), invstd)
        rows = (_numel(x.shape) // max(d, 1), d)
        dbias = self.sum(self.reshape(grad, rows), 0)
        dweight = self.sum(self.reshape(self.mul(grad, xhat), rows), 0)
        g = self.mul(grad, self.reshape(weight, (1,) * last + (d,)))
        inner = self.sub(self.sub(g, self.mean(g, last, dtype)),
                         self.mul(xhat, self.mean(self.mul(g, xhat), last, dtype)))
        return (self.mul(inner, invstd), self.reshape(dweight, (d,)),
                self.reshape(dbias, (d,)))

    def batch_norm_backward(self, x: Primitive, weight: Primitive, mean: Primitive,
                            invstd: Primitive, grad: Primitive, epsilon: float, dtype: DType
                            ) -> tuple[Primitive, Primitive, Primitive]:
        """The gradients ``(dx, dweight, dbias)`` of ``batch_norm``'s ``y`` contracted with
        ``grad``, from the ``mean`` and ``invstd`` it returned (``epsilon`` is the one it was
        given): with ``xhat = (x - mean) * invstd`` and ``m`` the elements per channel,
        ``dbias = sum(grad)``, ``dweight = sum(grad * xhat)`` and ``dx = weight * invstd *
        (grad - dbias / m - xhat * dweight / m)``. For a 16-bit float ``dtype`` (``x``,
        ``grad`` and ``dx``), ``weight``, the statistics, ``dweight`` and ``dbias`` are float32,
        as in ``batch_norm``, and the work is done in float32."""
        if _narrow_float(dtype):
            dx, dweight, dbias = self.batch_norm_backward(
                self.cast(x, dtype, float32), weight, mean, invstd,
                self.cast(grad, dtype, float32), epsilon, float32)
            return self.cast(dx, float32, dtype), dweight, dbias

        channels, ndim = x.shape[1], len(x.shape)
        shape = (1, channels) + (1,) * (ndim - 2)
        dims = [0, *range(2, ndim)]
        count = _numel(x.shape) // max(channels, 1)
        xhat = self.mul(self.sub(x, self.reshape(mean, shape)), self.reshape(invstd, shape))
        dbias, dweight = grad, self.mul(grad, xhat)
        for d in reversed(dims):
            dbias, dweight = self.sum(dbias, d), self.sum(dweight, d)
        scale = 1.0 / max(count, 1)
        inner = self.sub(self.sub(grad, self.mul_scalar(dbias, scale, dtype)),
                         self.mul(xhat, self.mul_scalar(dweight, scale, dtype)))
        dx = self.mul(inner, self.reshape(self.mul(weight, invstd), shape))
        return dx, self.reshape(dweight, (channels,)), self.reshape(dbias, (channels,))

    @abstractmethod
    def avg_pool(self, x: Primitive, kernel: Dims, stride: Dims, padding: Dims,
                 count_include_pad: bool, ceil_mode: bool) -> Primitive:
        """Mean over each window; padding counts as zeros in the divisor when
        ``count_include_pad``, else only real elements are counted."""

    @abstractmethod
    def max_pool_with_indices(self, x: Primitive, kernel: Dims, stride: Dims, padding: Dims,
                              dilation: Dims, ceil_mode: bool) -> tuple[Primitive, Primitive]:
        """Max over each window (padding is -inf) and the int64 index of the max, flattened over
        the spatial dims of the input (PyTorch's ``return_indices``). Windows are scanned in
        row-major order as PyTorch does (``val > max or isnan(val)``): the first max wins, and a
        NaN beats every number, the last NaN of the window winning."""

    def max_pool(self, x: Primitive, kernel: Dims, stride: Dims, padding: Dims, dilation: Dims,
                 ceil_mode: bool) -> Primitive:
        """Max over each window (padding is -inf)."""
        return self.max_pool_with_indices(x, kernel, stride, padding, dilation, ceil_mode)[0]

    def max_pool_backward(self, grad: Primitive, indices: Primitive, x_shape: Dims,
                          dtype: DType) -> Primitive:
        """The gradient of ``max_pool_with_indices`` (or ``adaptive_max_pool_with_indices``)
        with respect to its input ``x`` of shape ``x_shape``: zeros with each element of
        ``grad`` (the output's gradient, ``[batch, channels, *out]``) added at its index in
        ``indices`` (the forward pass's, flattened over the spatial dims of ``x``); windows
        that chose the same element add up. The default is ``scatter_add`` into zeros over
        the flattened spatial dims."""
        batch, channels = x_shape[:2]
        count = math.prod(grad.shape[2:])
        flat_grad = self.reshape(grad, (batch, channels, count))
        flat_indices = self.reshape(indices, (batch, channels, count))
        zeros = self.zeros((batch, channels, math.prod(x_shape[2:])), dtype,
                           self._device_of(grad))
        return self.reshape(self.scatter_add(zeros, 2, flat_indices, flat_grad),
                            tuple(x_shape))

    @abstractmethod
    def adaptive_avg_pool(self, x: Primitive, output_size: Dims) -> Primitive:
        """Mean over windows ``[floor(i * L / out), ceil((i + 1) * L / out))`` of each dim."""

    @abstractmethod
    def adaptive_max_pool_with_indices(self, x: Primitive, output_size: Dims
                                       ) -> tuple[Primitive, Primitive]:
        """Max over the adaptive windows and the flattened int64 index of each max (ties and
        NaN as in ``max_pool_with_indices``)."""

    def adaptive_max_pool(self, x: Primitive, output_size: Dims) -> Primitive:
        """Max over the adaptive windows of each dim."""
        return self.adaptive_max_pool_with_indices(x, output_size)[0]

    @abstractmethod
    def interpolate(self, x: Primitive, size: Dims, mode: str, align_corners: bool
                    ) -> Primitive:
        """``x`` ([batch, channels, height, width]) resized to ``size`` by ``mode``: ``"nearest"``
        (PyTorch's legacy nearest: ``min(floor(out_index * scale), in - 1)`` with ``scale = in /
        out``, scale and product in float32 as PyTorch computes them for float32 images, which
        for some sizes is one below the exact ``out_index * in // out``), ``"bilinear"`` or
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
        kh * kw, blocks]`` (PyTorch's ``F.unfold``); values are copied, never multiplied, so NaN
        and inf stay where they are."""
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
        if ph or pw:
            padded = self.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype, self._device_of(x))
            inside = ((0, n, 1), (0, c, 1), (ph, ph + h, 1), (pw, pw + w, 1))
            x = self.slice_assign(padded, inside, x)
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        columns = []
        for i in range(kh):
            for j in range(kw):
                rows = (i * dh, i * dh + (oh - 1) * sh + 1, sh)
                cols = (j * dw, j * dw + (ow - 1) * sw + 1, sw)
                window = self.slice(x, ((0, n, 1), (0, c, 1), rows, cols))
                columns.append(self.reshape(window, (n, c, 1, oh * ow)))
        blocks = self.cat(columns, 2) if len(columns) > 1 else columns[0]
        return self.reshape(blocks, (n, c * kh * kw, oh * ow))


def _narrow_float(dtype: DType) -> bool:
    """Whether ``dtype`` is a float narrower than float32 (float16, bfloat16: the norms
    compute in float32)."""
    return dtype.is_float and dtype.bits < 32


def _numel(shape: Dims) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
