"""Quantized tensors on NVIDIA GPUs: two 8-bit operands multiplied by cuBLAS's int8 product
(int32 accumulation, on Tensor Cores) and one epilogue kernel; float tensors quantized to 8 bits
in one kernel, per-tensor symmetric scales found on the device in one more.

``quantized_matmul`` of two quantized operands (hence ``quantized_linear`` too) runs on cuBLAS
where the scales factor out of the sums: ``lhs`` ``[..., M, K]`` int8 or uint8 per tensor or per
row (a channel axis of ``-2``), ``rhs`` ``[K, N]`` int8 or uint8 per tensor or per column (axis
1), symmetric or affine, ``K`` up to ``MAX_INNER`` (int32 sums of int8 products stay exact).
uint8 values are shifted to int8 (``q - 128``, the zero point with them), which cuBLAS takes;
affine zero points are corrected for with the rows' sums of ``lhs`` and the columns' sums of
``rhs``:

    sum_k (a - za)(b - zb) = sum_k a b - zb sum_k a - za sum_k b + K za zb

Everything else (a float operand, int4, per-block scales, a batched ``rhs``, empty operands) is
the protocol's default: dequantize, then the float op.

cuBLAS's int8 product wants both operands contiguous in ``K`` (its "TN" layout), 16-byte aligned
rows and leading dims that are multiples of 4 (the Tensor Core kernels, multiples of 16). So the
weights (``rhs``) are copied once per buffer into ``[N', K']`` (transposed, ``N`` and ``K``
rounded up to ``ALIGN`` with zeros, uint8 shifted), with their columns' sums, and the copy kept
as long as their buffer lives, as the cpu backend keeps its packing. ``lhs`` is read where it
lies when it is int8, plain, aligned and ``K`` a multiple of ``ALIGN``, and no row sums are
needed; otherwise one kernel copies it padded (and sums its rows). The zeros padded in add
nothing to the products or the sums; the epilogue reads the ``N`` columns of the ``[M, N']``
int32 product.

``quantize`` of float32 or float16 to int8 or uint8, per tensor or per channel, is one kernel
with the default's arithmetic (the same integers). ``quantize_params`` of a symmetric per-tensor
scheme is one kernel too: the largest magnitude folded over the blocks, the scale written by the
last block, nothing read back to the host. Other schemes take the defaults.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from burnish.backend.quant_ops import QuantizedPrimitive, QuantOps, byte_operands
from burnish.cuda import gemm
from burnish.cuda.runtime import CudaRuntime
from burnish.dtype import DType, float16, float32, get_dtype
from burnish.jit import ir
from burnish.jit.kernels.elementwise import plain
from burnish.jit.tensor import JitTensor, per_buffer
from burnish.quantization.scheme import PerChannel, PerTensor, QuantScheme, channel_axis

#: The kernels' source; constants are defined in front of it per use (``_source``).
SOURCE = (Path(__file__).parent / "quant_kernels.cu").read_text()
#: Threads per block of every kernel here (THREADS in the source).
THREADS = 256
#: What ``K`` and ``N`` of the copies given to cuBLAS are rounded up to.
ALIGN = 16
#: The longest inner dim taken: 131071 products of two int8 (at most 2^14 each, -128 * -128)
#: sum exactly in int32.
MAX_INNER = (2**31 - 1) // (128 * 128)
#: The most elements ``quantize`` and ``quantize_params`` take (the kernels count in int32).
MAX_ELEMENTS = 2**31 - 1
#: The most elements of the int32 product (rows times padded columns): the epilogue indexes
#: them in 32-bit arithmetic, with room for its grid's stride.
MAX_PRODUCT = 1 << 30
#: cudaDataType and cublasComputeType_t of cuBLAS's int8 product.
_R_8I, _R_32I, _COMPUTE_32I = 3, 10, 72

_BYTES = frozenset({"int8", "uint8"})
_FLOATS = {"float32": "float", "float16": "__half"}
_INTS = {"int8": "signed char", "uint8": "unsigned char"}


class PackedWeights:
    """A ``[K, N]`` operand as cuBLAS reads it: ``values`` int8 ``[N', K']`` (its transpose,
    padded with zeros, uint8 shifted to int8) and ``sums`` int32 ``[N']``, each column's sum of
    the shifted values."""

    __slots__ = ("values", "sums", "n_padded", "k_padded")

    def __init__(self, values: JitTensor, sums: JitTensor, n_padded: int, k_padded: int):
        self.values = values
        self.sums = sums
        self.n_padded = n_padded
        self.k_padded = k_padded


class CudaQuantOps(QuantOps):
    """``quantized_matmul`` of two 8-bit operands on cuBLAS's int8 product, ``quantize`` and
    per-tensor ``quantize_params`` as single kernels."""

    cast: Callable[..., Any]  # the backend's (JitBackend)

    def quantized_matmul(self, lhs: Any, rhs: Any, dtype: DType) -> Any:
        if not takes(lhs, rhs):
            return super().quantized_matmul(lhs, rhs, dtype)
        values: JitTensor = lhs.values
        runtime = values.runtime
        k, n = rhs.shape
        rows = 1
        for d in lhs.shape[:-1]:
            rows *= d
        weights = _packed(rhs)
        k_padded, n_padded = weights.k_padded, weights.n_padded
        a_shift = 128 if lhs.scheme.value == "uint8" else 0
        b_shift = 128 if rhs.scheme.value == "uint8" else 0
        need_row_sums = rhs.zero_points is not None
        a = values if values.ndim == 2 else plain(values)
        a = a.view((rows, k), (k, 1), a.offset) if a.is_contiguous() else a
        row_sums = None
        if direct(a, lhs.scheme.value, need_row_sums):
            a_pointer, a_ld = _address(a), a.strides[0]
            a_buffer = a.buffer
        else:
            packed, row_sums = _pack(a, rows, rows, k, k_padded, a.strides[0], a.strides[1],
                                     a_shift, need_row_sums)
            a_pointer, a_ld, a_buffer = _address(packed), k_padded, packed.buffer
        product = _alloc(values, (rows, n_padded), "int32")
        one, zero = gemm._one_and_zero(np.int32)
        args = (runtime, gemm.OP_T, gemm.OP_N, n_padded, rows, k_padded, one,
                _address(weights.values), _R_8I, k_padded, 0, a_pointer, _R_8I, a_ld, 0, zero,
                _address(product), _R_32I, n_padded, 0, 1, _COMPUTE_32I)
        runtime.call(gemm._gemm, args, (weights.values.buffer.handle, a_buffer.handle),
                     (product.buffer.handle,), ("int8 gemm", n_padded, rows, k_padded, a_ld))
        runtime.launches += 1
        out_dtype = float16 if dtype is float16 else float32
        out = _alloc(values, (*lhs.shape[:-1], n), out_dtype.name)
        _epilogue(out, product, lhs, rhs, weights, row_sums, rows, n, k, a_shift, b_shift)
        return out if dtype is out_dtype else self.cast(out, out_dtype, dtype)

    def quantize(self, x: Any, scales: Any, zero_points: Any, scheme: QuantScheme,
                 dtype: DType) -> QuantizedPrimitive:
        granularity = scheme.granularity
        if (dtype.name not in _FLOATS or scheme.value not in _BYTES
                or not isinstance(granularity, PerTensor | PerChannel)
                or not isinstance(x, JitTensor) or not 0 < x.numel <= MAX_ELEMENTS):
            return super().quantize(x, scales, zero_points, scheme, dtype)
        shape = tuple(x.shape)
        source = plain(x)
        values = _alloc(x, shape, scheme.storage_dtype.name)
        channels, inner = 1, 1
        if isinstance(granularity, PerChannel):
            axis = channel_axis(granularity, shape)
            channels = shape[axis]
            for d in shape[axis + 1:]:
                inner *= d
        low, high = scheme.range
        if scheme.mode == "symmetric":
            low = scheme.symmetric_zero - scheme.symmetric_limit
            high = scheme.symmetric_zero + scheme.symmetric_limit
        scale = plain(scales)
        point = None if zero_points is None else plain(zero_points)
        point_type = _INTS[scheme.zero_point_dtype.name]
        key = ("quant_quantize", dtype.name, scheme.scale_dtype.name, point_type,
               scheme.storage_dtype.name, point is not None)
        defines = {"QUANTIZE": "quant_quantize", "X_T": _FLOATS[dtype.name],
                   "SCALE_T": _FLOATS[scheme.scale_dtype.name], "POINT_T": point_type,
                   "OUT_T": _INTS[scheme.storage_dtype.name], "POINTS": int(point is not None)}
        info = [x.numel, inner, channels, scale.offset, 0 if point is None else point.offset,
                _bits(float(scheme.symmetric_zero)), _bits(float(low)), _bits(float(high)),
                source.offset]
        buffers = [values.buffer, source.buffer, scale.buffer,
                   (scale if point is None else point).buffer]
        _launch(x.runtime, key, "quant_quantize", defines, buffers, info,
                _blocks(x.numel))
        return QuantizedPrimitive(values, scales, zero_points, scheme, shape)

    def quantize_params(self, x: Any, scheme: QuantScheme, dtype: DType
                        ) -> tuple[Any, Any]:
        if (scheme.mode != "symmetric" or not isinstance(scheme.granularity, PerTensor)
                or scheme.value not in _BYTES or dtype.name not in _FLOATS
                or not isinstance(x, JitTensor) or not 0 < x.numel <= MAX_ELEMENTS):
            return super().quantize_params(x, scheme, dtype)
        runtime = x.runtime
        source = plain(x)
        scale = _alloc(x, (), scheme.scale_dtype.name)
        work = runtime.pool.alloc(8)
        runtime.write(work.handle, 0, np.zeros(2, np.int32))
        key = ("quant_amax", dtype.name, scheme.scale_dtype.name)
        defines = {"AMAX": "quant_amax", "X_T": _FLOATS[dtype.name],
                   "SCALE_T": _FLOATS[scheme.scale_dtype.name]}
        _launch(runtime, key, "quant_amax", defines, [scale.buffer, work, source.buffer],
                [x.numel, source.offset], min(_blocks(x.numel), 1024))
        return scale, None


def takes(lhs: Any, rhs: Any) -> bool:
    """Whether cuBLAS's int8 product computes ``lhs @ rhs`` (the module's docstring says
    when)."""
    if not byte_operands(lhs, rhs, MAX_INNER):
        return False
    if not isinstance(lhs.values, JitTensor) or not isinstance(rhs.values, JitTensor):
        return False
    if not isinstance(lhs.values.runtime, CudaRuntime) or \
            lhs.values.runtime is not rhs.values.runtime:
        return False
    rows = 1
    for d in lhs.shape[:-1]:
        rows *= d
    return rows * _round_up(rhs.shape[1]) <= MAX_PRODUCT


def direct(a: JitTensor, value: str, need_row_sums: bool) -> bool:
    """Whether cuBLAS reads the ``[M, K]`` lhs values ``a`` where they lie: int8 (uint8 needs
    the shift), rows contiguous, ``K`` and the row stride multiples of ``ALIGN``, the start
    16-byte aligned, and no row sums wanted (a symmetric rhs)."""
    if value != "int8" or need_row_sums or a.ndim != 2:
        return False
    rows, k = a.shape
    row_stride, col_stride = a.strides
    return (col_stride == 1 and k % ALIGN == 0 and row_stride % ALIGN == 0
            and row_stride >= k and a.offset % ALIGN == 0)


def _round_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _bits(value: float) -> int:
    """A float32's bits as the int32 word the kernels read it from."""
    return struct.unpack("<i", struct.pack("<f", value))[0]


def _blocks(count: int) -> int:
    """Blocks for a loop over ``count`` elements (each thread takes a few when there are
    many)."""
    return max(1, min(-(-count // THREADS), 65535 * 8))


def _alloc(like: JitTensor, shape: tuple[int, ...], dtype: str) -> JitTensor:
    kind = get_dtype(dtype)
    count = 1
    for n in shape:
        count *= n
    buffer = like.runtime.pool.alloc(max(count, 1) * kind.itemsize)
    return JitTensor(buffer, shape, kind, like.device, like.runtime)


def _address(t: JitTensor) -> int:
    return t.buffer.handle.ptr + t.offset * t.dtype.itemsize


def _source(defines: dict[str, Any]) -> str:
    return "".join(f"#define {name} {value}\n" for name, value in defines.items()) + SOURCE


def _launch(runtime: Any, key: tuple, name: str, defines: dict[str, Any], buffers: list,
            info: list[int], groups: int) -> None:
    def build() -> tuple[ir.Kernel, str]:
        return ir.Kernel(name, [], (THREADS, 1, 1), [], []), _source(defines)

    runtime.launch(key, build, buffers, np.asarray(info, np.int32), groups=groups)


def _pack(src: JitTensor, rows: int, rows_padded: int, cols: int, cols_padded: int,
          row_stride: int, col_stride: int, shift: int, sums: bool
          ) -> tuple[JitTensor, JitTensor | None]:
    """``src``'s ``[rows, cols]`` (elements ``offset + r * row_stride + c * col_stride``) as
    int8 ``[rows_padded, cols_padded]``, shifted, zero padded; with each row's sum if
    ``sums``."""
    out = _alloc(src, (rows_padded, cols_padded), "int8")
    row_sums = _alloc(src, (rows_padded,), "int32") if sums else None
    source = src.dtype.name
    key = ("quant_pack", source, shift, sums)
    defines = {"PACK": "quant_pack", "SRC": _INTS[source], "SHIFT": shift,
               "ROW_SUMS": int(sums)}
    info = [rows, rows_padded, cols, cols_padded, src.offset, row_stride, col_stride]
    _launch(src.runtime, key, "quant_pack", defines,
            [out.buffer, (out if row_sums is None else row_sums).buffer, src.buffer], info,
            rows_padded)
    return out, row_sums


def _packed(rhs: QuantizedPrimitive) -> PackedWeights:
    """``rhs``'s values as cuBLAS reads them, once per buffer and layout."""
    values: JitTensor = rhs.values

    def pack() -> PackedWeights:
        k, n = values.shape
        k_padded, n_padded = _round_up(k), _round_up(n)
        shift = 128 if rhs.scheme.value == "uint8" else 0
        # Row r of the copy is column r of the weights: rows step by the column stride.
        packed, sums = _pack(values, n, n_padded, k, k_padded, values.strides[1],
                             values.strides[0], shift, True)
        assert sums is not None
        return PackedWeights(packed, sums, n_padded, k_padded)

    return per_buffer(values, "cublas", pack)


def _epilogue(out: JitTensor, product: JitTensor, lhs: QuantizedPrimitive,
              rhs: QuantizedPrimitive, weights: PackedWeights, row_sums: JitTensor | None,
              rows: int, n: int, k: int, a_shift: int, b_shift: int) -> None:
    """``out`` from the int32 ``product`` (the kernel's comment has the formula)."""
    sa, sb = plain(lhs.scales), plain(rhs.scales)
    za = None if lhs.zero_points is None else plain(lhs.zero_points)
    zb = None if rhs.zero_points is None else plain(rhs.zero_points)
    a_channel = isinstance(lhs.scheme.granularity, PerChannel)
    b_channel = isinstance(rhs.scheme.granularity, PerChannel)
    inner_rows = lhs.shape[-2] if len(lhs.shape) >= 2 else 1
    types = (out.dtype.name, sa.dtype.name, sb.dtype.name, lhs.scheme.zero_point_dtype.name,
             rhs.scheme.zero_point_dtype.name, za is not None, zb is not None)
    defines = {"EPILOGUE": "quant_epilogue", "OUT_T": _FLOATS[types[0]],
               "SA_T": _FLOATS[types[1]], "SB_T": _FLOATS[types[2]], "ZA_T": _INTS[types[3]],
               "ZB_T": _INTS[types[4]], "A_POINTS": int(types[5]), "B_POINTS": int(types[6])}
    info = [rows, n, weights.n_padded, inner_rows, int(a_channel), int(b_channel), sa.offset,
            sb.offset, 0 if za is None else za.offset, 0 if zb is None else zb.offset, k,
            a_shift, b_shift]
    # Absent operands are given some buffer: the kernel compiled without them never reads it.
    buffers = [out.buffer, product.buffer, sa.buffer, sb.buffer,
               (sa if za is None else za).buffer, (sb if zb is None else zb).buffer,
               (product if row_sums is None else row_sums).buffer, weights.sums.buffer]
    _launch(out.runtime, ("quant_epilogue", *types), "quant_epilogue", defines, buffers, info,
            _blocks(rows * n))
