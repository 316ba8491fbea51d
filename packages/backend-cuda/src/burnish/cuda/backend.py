"""``CudaBackend``: the backend protocol on NVIDIA GPUs; matmul on cuBLAS, the rest as CUDA C
kernels of ``burnish.jit``; every op enqueued on the device's stream."""

from __future__ import annotations

import numpy as np

from burnish.cuda import runtime as cuda_runtime
from burnish.device import Device
from burnish.dtype import ALL_DTYPES, DType
from burnish.errors import UnsupportedError
from burnish.jit.backend.backend import JitBackend
from burnish.jit.tensor import JitTensor

#: cuBLAS's names (cudaDataType, cublasComputeType_t, cublasOperation_t, cublasGemmAlgo_t).
_R_16F, _R_32F, _R_64F, _R_16BF = 2, 0, 1, 14
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32, _COMPUTE_64F = 68, 77, 70
_OP_N, _OP_T = 0, 1
_GEMM_DEFAULT = -1
#: Per dtype: storage type, compute type, and the host type of alpha and beta. Half floats
#: accumulate in float32 and round once, as every burnish backend does.
_GEMM_TYPES = {
    "float64": (_R_64F, _COMPUTE_64F, np.float64),
    "float32": (_R_32F, _COMPUTE_32F, np.float32),
    "float16": (_R_16F, _COMPUTE_32F, np.float32),
    "bfloat16": (_R_16BF, _COMPUTE_32F, np.float32),
}
_CUBLAS = tuple(_GEMM_TYPES)

_tf32 = False


def allow_tf32(allowed: bool = True) -> None:
    """Let float32 matrix products use TF32 Tensor Cores (10-bit mantissa inputs, float32
    accumulation): several times faster on Ampere and newer, less precise. Off by default."""
    global _tf32
    _tf32 = bool(allowed)


def tf32_allowed() -> bool:
    return _tf32


def _batch_stride(x: JitTensor, batch: tuple[int, ...]) -> int | None:
    """The one element stride between consecutive matrices of ``x`` over the flattened
    ``batch`` (0 when broadcast), or None when its batch dims do not flatten to one stride."""
    lead = len(batch) - (x.ndim - 2)
    strides = [0 if d < lead or x.shape[d - lead] == 1 else x.strides[d - lead]
               for d in range(len(batch))]
    kept = [(size, stride) for size, stride in zip(batch, strides) if size != 1]
    if all(stride == 0 for _, stride in kept):
        return 0
    for (_, outer), (size, inner) in zip(kept, kept[1:]):
        if outer != inner * size:
            return None
    return kept[-1][1]


class CudaBackend(JitBackend):
    """Devices ``cuda:0``, ``cuda:1``... (every GPU CuPy sees); all of burnish's dtypes."""

    name = "cuda"

    def _discover(self):
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

    def _device_dtypes(self, runtime) -> tuple[DType, ...]:
        return ALL_DTYPES

    def matmul(self, lhs: JitTensor, rhs: JitTensor) -> JitTensor:
        dtype = lhs.dtype.name
        if dtype not in _CUBLAS or min(lhs.shape[-2:] + rhs.shape[-1:]) == 0:
            return super().matmul(lhs, rhs)
        from burnish.jit.kernels.elementwise import broadcast_shape

        batch = broadcast_shape(lhs.shape[:-2], rhs.shape[:-2])
        m, k, n = lhs.shape[-2], lhs.shape[-1], rhs.shape[-1]
        count = 1
        for size in batch:
            count *= size
        out = self._new(batch + (m, n), lhs.dtype, lhs.device, lhs.runtime)
        if count == 0:
            return out
        # Row-major C = A @ B is column-major C^T = B^T @ A^T: B's buffer goes first.
        b_op, b_ld, b_stride, b = self._gemm_operand(rhs, batch)
        a_op, a_ld, a_stride, a = self._gemm_operand(lhs, batch)
        runtime = lhs.runtime
        cp = cuda_runtime.cp
        data, compute, scalar = _GEMM_TYPES[dtype]
        if dtype == "float32" and tf32_allowed():
            compute = _COMPUTE_32F_FAST_TF32
        one, zero = np.ones(1, scalar), np.zeros(1, scalar)
        size = lhs.runtime.generator.storage_numpy(dtype).itemsize
        with runtime.cuda_device, runtime.stream:
            handle = cp.cuda.device.get_cublas_handle()
            cp.cuda.cublas.gemmStridedBatchedEx(
                handle, b_op, a_op, n, m, k, one.ctypes.data,
                b.buffer.handle.ptr + b.offset * size, data, b_ld, b_stride,
                a.buffer.handle.ptr + a.offset * size, data, a_ld, a_stride,
                zero.ctypes.data, out.buffer.handle.ptr, data, n, m * n, count, compute,
                _GEMM_DEFAULT)
        return out

    def _gemm_operand(self, x: JitTensor, batch: tuple[int, ...]):
        """``(operation, leading dim, batch stride, tensor)`` for one operand of the
        column-major product; a layout cuBLAS cannot read is copied first."""
        rows, cols = x.shape[-2:]
        row_stride, col_stride = x.strides[-2:]
        batch_stride = _batch_stride(x, batch)
        if batch_stride is not None:
            if col_stride == 1 or cols == 1:
                return _OP_N, row_stride if rows > 1 and row_stride >= cols else cols, \
                    batch_stride, x
            if row_stride == 1 and col_stride >= rows:
                return _OP_T, col_stride, batch_stride, x
        plain = self.contiguous(self.expand(x, batch + (rows, cols)))
        return _OP_N, cols, rows * cols if batch else 0, plain

    def _as_cupy(self, x: JitTensor):
        itemsize = x.dtype.itemsize
        return x.runtime.as_cupy(x.buffer.handle, x.offset * itemsize, x.shape,
                                 tuple(s * itemsize for s in x.strides), x.dtype.numpy)
