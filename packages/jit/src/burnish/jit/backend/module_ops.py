"""Matrix products, convolutions, pooling and interpolation as kernels."""

from __future__ import annotations

from burnish.backend.module_ops import ModuleOps
from burnish.jit.kernels import conv as conv_kernels
from burnish.jit.kernels import interpolate as interpolate_kernels
from burnish.jit.kernels import pool as pool_kernels
from burnish.jit.kernels.matmul import matmul
from burnish.jit.tensor import JitTensor


class JitModuleOps(ModuleOps):
    """matmul (tiled, autotuned), conv, conv_transpose, pools, adaptive pools, interpolate."""

    def matmul(self, lhs: JitTensor, rhs: JitTensor) -> JitTensor:
        return matmul(lhs, rhs)

    def conv(self, x, weight, bias, stride, padding, dilation, groups):
        return conv_kernels.conv(x, weight, bias, stride, padding, dilation, groups)

    def conv_transpose(self, x, weight, bias, stride, padding, output_padding, dilation,
                       groups):
        return conv_kernels.conv_transpose(x, weight, bias, stride, padding, output_padding,
                                           dilation, groups)

    def conv_weight_grad(self, x, grad, kernel, stride, padding, dilation, groups):
        out = conv_kernels.conv_weight_grad(x, grad, kernel, stride, padding, dilation, groups)
        if out is None:  # too small for the implicit kernel: the protocol's grouped convolution
            return super().conv_weight_grad(x, grad, kernel, stride, padding, dilation, groups)
        return out

    def avg_pool(self, x, kernel, stride, padding, count_include_pad, ceil_mode):
        return pool_kernels.avg_pool(x, kernel, stride, padding, count_include_pad, ceil_mode)

    def max_pool(self, x, kernel, stride, padding, dilation, ceil_mode):
        return pool_kernels.max_pool(x, kernel, stride, padding, dilation, ceil_mode, False)[0]

    def max_pool_with_indices(self, x, kernel, stride, padding, dilation, ceil_mode):
        return pool_kernels.max_pool(x, kernel, stride, padding, dilation, ceil_mode, True)

    def adaptive_avg_pool(self, x, output_size):
        return pool_kernels.adaptive_avg_pool(x, output_size)

    def adaptive_max_pool(self, x, output_size):
        return pool_kernels.adaptive_max_pool(x, output_size, False)[0]

    def adaptive_max_pool_with_indices(self, x, output_size):
        return pool_kernels.adaptive_max_pool(x, output_size, True)

    def interpolate(self, x, size, mode, align_corners):
        return interpolate_kernels.interpolate(x, tuple(size), mode, align_corners)
