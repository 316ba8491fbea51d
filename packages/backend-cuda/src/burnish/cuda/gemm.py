"""Matrix products on cuBLAS. ``gemm`` writes ``a @ b`` (batch dims broadcast) into a plain
``out`` when cuBLAS can read both operands where they lie. ``burnish.jit``'s matmul (the
backend's ``matmul`` and convolutions' patch products) reaches it through
``CudaRuntime.library_matmul``; the backend's ``matmul`` first copies the operands ``operand``
says cuBLAS cannot read."""

from __future__ import annotations

import ctypes

import numpy as np

from burnish.jit.tensor import JitTensor

try:
    import cupy as cp
except ImportError:  # the backend reports it; nothing here runs without CuPy
    cp = None

#: cuBLAS's names (cudaDataType, cublasComputeType_t, cublasOperation_t, cublasGemmAlgo_t).
_R_16F, _R_32F, _R_64F, _R_16BF = 2, 0, 1, 14
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32, _COMPUTE_64F = 68, 77, 70
OP_N, OP_T = 0, 1
_GEMM_DEFAULT = -1
#: Per dtype: storage type, compute type, and the host type of alpha and beta. Half floats
#: accumulate in float32 and round once, as every burnish backend does.
TYPES = {
    "float64": (_R_64F, _COMPUTE_64F, np.float64),
    "float32": (_R_32F, _COMPUTE_32F, np.float32),
    "float16": (_R_16F, _COMPUTE_32F, np.float32),
    "bfloat16": (_R_16BF, _COMPUTE_32F, np.float32),
}

_tf32 = False


def allow_tf32(allowed: bool = True) -> None:
    """Let float32 matrix products use TF32 Tensor Cores (10-bit mantissa inputs, float32
    accumulation): several times faster on Ampere and newer, less precise. Off by default."""
    global _tf32
    _tf32 = bool(allowed)


def tf32_allowed() -> bool:
    return _tf32


#: Per host scalar type: alpha = 1 and beta = 0 as arrays, kept alive here, and their addresses
#: (made once: ``ndarray.ctypes`` costs a microsecond a call).
_CONSTANTS: dict[type, tuple[np.ndarray, np.ndarray, int, int]] = {}


def _one_and_zero(scalar: type) -> tuple[int, int]:
    found = _CONSTANTS.get(scalar)
    if found is None:
        one, zero = np.ones(1, scalar), np.zeros(1, scalar)
        found = _CONSTANTS[scalar] = (one, zero, one.ctypes.data, zero.ctypes.data)
    return found[2], found[3]


def batch_stride(x: JitTensor, batch: tuple[int, ...]) -> int | None:
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


def operand(x: JitTensor, batch: tuple[int, ...]) -> tuple[int, int, int] | None:
    """``(operation, leading dim, batch stride)`` of ``x`` as an operand of the column-major
    product, or None when cuBLAS cannot read it in place (rows that overlap, as in an expanded
    view, or neither dim of unit stride)."""
    rows, cols = x.shape[-2:]
    row_stride, col_stride = x.strides[-2:]
    stride = batch_stride(x, batch)
    if stride is None:
        return None
    # Row-major [rows, cols] with unit column stride is column-major [cols, rows], ld = row stride.
    if col_stride == 1 or cols == 1:
        if rows == 1:
            return OP_N, max(cols, 1), stride
        if row_stride >= max(cols, 1):
            return OP_N, row_stride, stride
    if row_stride == 1 or rows == 1:
        if cols == 1:
            return OP_T, max(rows, 1), stride
        if col_stride >= max(rows, 1):
            return OP_T, col_stride, stride
    return None


def gemm(a: JitTensor, b: JitTensor, out: JitTensor, batch: tuple[int, ...]) -> bool:
    """``out = a @ b`` on cuBLAS, ``out`` plain ``[*batch, m, n]`` (at its offset); False, with
    nothing enqueued, when the dtype or a layout is one cuBLAS cannot take as it lies."""
    key = (a.dtype, b.dtype, out.dtype, a.shape, a.strides, b.shape, b.strides, batch, _tf32)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(a, b, out, batch)
        if len(_PLANS) >= 4096:
            _PLANS.clear()
        _PLANS[key] = plan
    if plan is False:
        return False
    n, m, k, one, data, b_op, b_ld, b_stride, a_op, a_ld, a_stride, zero, mn, count, compute, \
        size = plan
    runtime = a.runtime
    runtime.call(_gemm, (runtime, b_op, a_op, n, m, k, one,
                         b.buffer.handle.ptr + b.offset * size, data, b_ld, b_stride,
                         a.buffer.handle.ptr + a.offset * size, data, a_ld, a_stride,
                         zero, out.buffer.handle.ptr + out.offset * size, data, n, mn, count,
                         compute),
                 (a.buffer.handle, b.buffer.handle), (out.buffer.handle,), plan)
    runtime.launches += 1
    return True


def _gemm(runtime, *args) -> None:
    """cuBLAS's strided batched product on ``runtime``'s stream (``gemm``'s arguments). While
    a CUDA graph is captured (``runtime.capturing``) the library is called directly: CuPy's
    wrapper refuses to during a capture, and the handle was readied by ``ready_for_capture``."""
    with runtime.cuda_device, runtime.stream:
        handle = cp.cuda.device.get_cublas_handle()
        if runtime.capturing:
            status = _library().cublasGemmStridedBatchedEx(handle, *args, _GEMM_DEFAULT)
            if status:
                raise RuntimeError(f"cuda: cuBLAS's product failed while capturing a graph "
                                   f"(status {status})")
        else:
            cp.cuda.cublas.gemmStridedBatchedEx(handle, *args, _GEMM_DEFAULT)


#: The cuBLAS library CuPy loaded, called through ctypes (``_library``).
_LIBRARY = None
#: Per device: the workspace given to cuBLAS for captured products (kept alive here).
_WORKSPACES: dict[int, object] = {}
#: cuBLAS's workspace for graphs: what it would otherwise allocate while being captured.
WORKSPACE_BYTES = 32 << 20


def _library():
    """libcublas as CuPy loaded it (found in the process's mapped files), declared for the
    calls made while a CUDA graph is captured."""
    global _LIBRARY
    if _LIBRARY is None:
        import cupy_backends.cuda.libs.cublas  # noqa: F401 (loads libcublas)

        path = "libcublas.so"
        with open("/proc/self/maps") as maps:
            for line in maps:
                name = line.split()[-1]
                if "/libcublas.so" in name:
                    path = name
                    break
        lib = ctypes.CDLL(path)
        p, i, q = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        lib.cublasGemmStridedBatchedEx.restype = i
        lib.cublasGemmStridedBatchedEx.argtypes = [p, i, i, i, i, i, p, p, i, i, q, p, i, i, q,
                                                   p, p, i, i, q, i, i, i]
        lib.cublasSetWorkspace_v2.restype = i
        lib.cublasSetWorkspace_v2.argtypes = [p, p, ctypes.c_size_t]
        _LIBRARY = lib
    return _LIBRARY


def ready_for_capture(runtime) -> None:
    """Point CuPy's cuBLAS handle for ``runtime``'s device at its stream and give it a
    workspace of its own, before a CUDA graph is captured on that stream (cuBLAS may neither
    change streams nor allocate during a capture)."""
    with runtime.cuda_device:
        handle = cp.cuda.device.get_cublas_handle()
        cp.cuda.cublas.setStream(handle, runtime.stream.ptr)
        if runtime.index not in _WORKSPACES:
            workspace = cp.cuda.alloc(WORKSPACE_BYTES)
            status = _library().cublasSetWorkspace_v2(handle, workspace.ptr, WORKSPACE_BYTES)
            if status:
                raise RuntimeError(f"cuda: cuBLAS refused a workspace (status {status})")
            _WORKSPACES[runtime.index] = workspace


#: gemm's arguments but the addresses, per operand layout (dtypes, shapes, strides, batch,
#: TF32): False where cuBLAS cannot take it. Working them out costs more than the call.
_PLANS: dict[tuple, tuple | bool] = {}


def _plan(a: JitTensor, b: JitTensor, out: JitTensor, batch: tuple[int, ...]) -> tuple | bool:
    dtype = a.dtype.name
    if dtype not in TYPES or b.dtype.name != dtype or out.dtype.name != dtype:
        return False
    b_operand, a_operand = operand(b, batch), operand(a, batch)
    if a_operand is None or b_operand is None:
        return False
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    count = 1
    for size in batch:
        count *= size
    if min(m, n, k, count) == 0:
        return False
    data, compute, scalar = TYPES[dtype]
    if dtype == "float32" and _tf32:
        compute = _COMPUTE_32F_FAST_TF32
    one, zero = _one_and_zero(scalar)
    size = a.runtime.generator.storage_numpy(dtype).itemsize
    # Row-major C = A @ B is column-major C^T = B^T @ A^T: B goes first.
    b_op, b_ld, b_stride = b_operand
    a_op, a_ld, a_stride = a_operand
    return (n, m, k, one, data, b_op, b_ld, b_stride, a_op, a_ld, a_stride, zero, m * n, count,
            compute, size)
