"""``CudaBackend``: the backend protocol on NVIDIA GPUs; matmul (float, and int8 for quantized
operands) on cuBLAS, the rest as CUDA C kernels of ``burnish.jit``; every op enqueued on the
device's stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from burnish.cuda import cudnn, flash, gemm
from burnish.cuda import runtime as cuda_runtime
from burnish.cuda.gemm import allow_tf32, tf32_allowed
from burnish.cuda.quant_ops import CudaQuantOps
from burnish.device import Device
from burnish.dtype import ALL_DTYPES, DType
from burnish.errors import UnsupportedError
from burnish.jit.backend.backend import JitBackend
from burnish.jit.kernels.elementwise import broadcast_shape
from burnish.jit.tensor import JitTensor

if TYPE_CHECKING:
    from burnish.backend.module_ops import Dims
    from burnish.jit.runtime import Runtime

__all__ = ["CudaBackend", "allow_tf32", "tf32_allowed"]


class CudaBackend(CudaQuantOps, JitBackend):
    """Devices ``cuda:0``, ``cuda:1``... (every GPU CuPy sees); all of burnish's dtypes.
    Quantized products of two 8-bit operands run on cuBLAS's int8 product (quant_ops.py)."""

    name = "cuda"

    def _discover(self) -> list[tuple[Device, Runtime]]:
        if cuda_runtime.cp is None:
            raise UnsupportedError(
                f"cuda backend: CuPy is not importable ({cuda_runtime.CUPY_ERROR}); install the "
                "wheel for your driver: pip install 'burnish-backend-cuda[cuda12]' or [cuda13]")
        cp = cuda_runtime.cp
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except cp.cuda.runtime.CUDARuntimeError as error:
            count, reason = 0, str(error)
        else:
            reason = "no device"
        if count == 0:
            raise UnsupportedError(f"cuda backend: no NVIDIA GPU is available ({reason})")
        return [(Device(self, "cuda", i), cuda_runtime.CudaRuntime(i)) for i in range(count)]

    def describe_device(self, device: Device) -> str:
        """The GPU's name and what runs its convolutions (``python -m burnish info``)."""
        return f"{super().describe_device(device)}; convolutions: {cudnn.summary()}"

    def _device_dtypes(self, runtime: Runtime) -> tuple[DType, ...]:
        return ALL_DTYPES

    def matmul(self, lhs: JitTensor, rhs: JitTensor) -> JitTensor:
        # burnish.jit's matmul hands the product to cuBLAS (CudaRuntime.library_matmul); an
        # operand cuBLAS cannot read in place (overlapping rows, no unit stride, batch dims that
        # do not flatten) is copied first, one pass, so that the library still takes it.
        if lhs.dtype.name in gemm.TYPES and min(lhs.shape[-2:] + rhs.shape[-1:]) > 0:
            batch = broadcast_shape(lhs.shape[:-2], rhs.shape[:-2])
            if gemm.operand(lhs, batch) is None:
                lhs = self.contiguous(self.expand(lhs, batch + lhs.shape[-2:]))
            if gemm.operand(rhs, batch) is None:
                rhs = self.contiguous(self.expand(rhs, batch + rhs.shape[-2:]))
        return super().matmul(lhs, rhs)

    def conv(self, x: JitTensor, weight: JitTensor, bias: JitTensor | None, stride: Dims,
             padding: Dims, dilation: Dims, groups: int) -> JitTensor:
        # cuDNN where it is installed (cudnn.py), else burnish.jit's gather and cuBLAS.
        convolutions = x.runtime.convolutions()  # type: ignore[attr-defined]  # CudaRuntime's
        if convolutions is not None:
            out = convolutions.forward(
                self.contiguous(x), self.contiguous(weight),
                None if bias is None else self.contiguous(bias), tuple(stride), tuple(padding),
                tuple(dilation), groups)
            if out is not None:
                return out
        return super().conv(x, weight, bias, stride, padding, dilation, groups)

    def conv_transpose(self, x: JitTensor, weight: JitTensor, bias: JitTensor | None,
                       stride: Dims, padding: Dims, output_padding: Dims, dilation: Dims,
                       groups: int) -> JitTensor:
        # cuDNN's backward-data pass where it is installed (a convolution's input gradient).
        convolutions = x.runtime.convolutions()  # type: ignore[attr-defined]  # CudaRuntime's
        if convolutions is not None:
            out = convolutions.transpose(
                self.contiguous(x), self.contiguous(weight),
                None if bias is None else self.contiguous(bias), tuple(stride), tuple(padding),
                tuple(output_padding), tuple(dilation), groups)
            if out is not None:
                return out
        return super().conv_transpose(x, weight, bias, stride, padding, output_padding,
                                      dilation, groups)

    def batch_norm(self, x: JitTensor, weight: JitTensor, bias: JitTensor, epsilon: float,
                   dtype: DType) -> tuple[JitTensor, JitTensor, JitTensor]:
        # cuDNN's batch normalisation where it is installed (one pass for the statistics, one
        # for the output), else the protocol's composition.
        convolutions = x.runtime.convolutions()  # type: ignore[attr-defined]  # CudaRuntime's
        if convolutions is not None:
            out = convolutions.batch_norm(self.contiguous(x), self.contiguous(weight),
                                          self.contiguous(bias), epsilon)
            if out is not None:
                return out
        return super().batch_norm(x, weight, bias, epsilon, dtype)

    def batch_norm_backward(self, x: JitTensor, weight: JitTensor, mean: JitTensor,
                            invstd: JitTensor, grad: JitTensor, epsilon: float, dtype: DType
                            ) -> tuple[JitTensor, JitTensor, JitTensor]:
        convolutions = x.runtime.convolutions()  # type: ignore[attr-defined]  # CudaRuntime's
        if convolutions is not None:
            out = convolutions.batch_norm_backward(*(self.contiguous(t) for t in (
                x, weight, mean, invstd, grad)), epsilon)
            if out is not None:
                return out
        return super().batch_norm_backward(x, weight, mean, invstd, grad, epsilon, dtype)

    def conv_weight_grad(self, x: JitTensor, grad: JitTensor, kernel: Dims, stride: Dims,
                         padding: Dims, dilation: Dims, groups: int) -> JitTensor:
        # cuDNN's backward-filter pass where it is installed, else the protocol's grouped
        # convolution (the batch and channel dims exchanged, through the forward pass).
        convolutions = x.runtime.convolutions()  # type: ignore[attr-defined]  # CudaRuntime's
        if convolutions is not None:
            out = convolutions.weight_grad(self.contiguous(x), self.contiguous(grad),
                                           tuple(kernel), tuple(stride), tuple(padding),
                                           tuple(dilation), groups)
            if out is not None:
                return out
        return super().conv_weight_grad(x, grad, kernel, stride, padding, dilation, groups)

    def attention(self, q: JitTensor, k: JitTensor, v: JitTensor, mask: JitTensor | None,
                  scale: float, causal: bool, dtype: DType) -> tuple[JitTensor, JitTensor]:
        # Tensor cores (flash.py) for half floats, else burnish.jit's kernels.
        if flash.fits(q, k, v, mask):
            return flash.attention(q, k, v, mask, scale, causal)
        return super().attention(q, k, v, mask, scale, causal, dtype)

    def attention_backward(self, q: JitTensor, k: JitTensor, v: JitTensor,
                           mask: JitTensor | None, out: JitTensor, lse: JitTensor,
                           grad: JitTensor, scale: float, causal: bool, dtype: DType
                           ) -> tuple[JitTensor, JitTensor, JitTensor]:
        if flash.fits(q, k, v, mask):
            out, grad = (x if flash.readable(x) else self.contiguous(x) for x in (out, grad))
            if flash.backward_fits(out, lse, grad):
                return flash.attention_backward(q, k, v, mask, out, lse, grad, scale, causal)
        return super().attention_backward(q, k, v, mask, out, lse, grad, scale, causal, dtype)

    def _as_cupy(self, x: JitTensor) -> Any:
        itemsize = x.dtype.itemsize
        return x.runtime.as_cupy(  # type: ignore[attr-defined]  # CudaRuntime's
            x.buffer.handle, x.offset * itemsize, x.shape,
            tuple(s * itemsize for s in x.strides), x.dtype.numpy)
