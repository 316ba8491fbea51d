"""``CpuRuntime``: host memory as device memory, kernels as compiled C run at once.

Launches run when they are enqueued (the call returns when the kernel is done), so the queue
is trivially in order and reading back needs no wait. Buffers are aligned host allocations
that NumPy can see, which lets products go to NumPy's BLAS (``library_matmul``).
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from burnish.cpu.attention import NativeAttention, interleaved, takes
from burnish.cpu.blas import Gemm
from burnish.cpu.compiler import Compiler
from burnish.cpu.conv import Epilogue, NativeConv, geometry
from burnish.cpu.int8_gemm import Int8Gemm
from burnish.cpu.int8_quantize import Int8Quantize
from burnish.cpu.module_ops import BINDERS as module_binders
from burnish.cpu.norm import NativeNorm
from burnish.cpu.pool import NativePool
from burnish.cpu.recurrent import BoundLayers, NativeRecurrent, weight_layout
from burnish.cpu.reduce import NativeReduce
from burnish.cpu.reduce_ops import BINDERS as reduce_binders
from burnish.cpu.rows import NativeRows
from burnish.jit import ir
from burnish.jit.codegen.cpu import EPILOGUE_WORDS, CpuGenerator
from burnish.jit.kernels.elementwise import WORKGROUP
from burnish.jit.runtime import Runtime
from burnish.jit.tensor import JitTensor, contiguous_strides

_ALIGN = 64
_memmove = ctypes.memmove
_VOID_P = ctypes.c_void_p
_INT = ctypes.c_int

#: The dtypes whose products NumPy hands to BLAS.
_BLAS_DTYPES = frozenset({"float32", "float64"})
#: The dtypes whose storage is NumPy's type of the same name (host calls' arrays are made by
#: name).
_NUMPY_DTYPES = frozenset({"float64", "float32", "float16", "int64", "int32", "int16", "int8",
                           "uint64", "uint32", "uint16", "uint8", "bool"})


class HostBuffer:
    """An aligned block of host memory: the NumPy bytes that own it and its address."""

    __slots__ = ("array", "address", "nbytes")

    def __init__(self, nbytes: int):
        raw = np.empty(nbytes + _ALIGN, np.uint8)
        start = -raw.ctypes.data % _ALIGN
        self.array = raw[start:start + nbytes]
        self.address = raw.ctypes.data + start
        self.nbytes = nbytes


class CpuRuntime(Runtime):
    """This machine's cores, through kernels the system's C compiler builds."""

    generator = CpuGenerator()
    max_buffers = 64
    #: Convolutions as a patch matrix times NumPy's BLAS: the implicit-GEMM kernels are the
    #: tiled product's loops, which BLAS outruns many times on a CPU.
    implicit_convolutions = False
    library_bias = True
    serial_scatter = True
    workgroup_reductions = False
    byte_words = sys.byteorder == "little"

    def __init__(self, compiler: Compiler):
        super().__init__()
        self.compiler = compiler
        self.generator = CpuGenerator(vector_math=compiler.vector_math)
        self.threads = compiler.threads.count
        self.library_products = os.environ.get("BURNISH_CPU_BLAS", "1").lower() not in (
            "0", "false", "off", "no")

    def describe(self) -> str:
        import platform

        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                name = next((line.split(":", 1)[1].strip() for line in f
                             if line.startswith("model name")), name)
        except OSError:
            pass
        return name

    def describe_compiler(self) -> str:
        simd = "" if self.compiler.simd else "; no OpenMP simd pragmas (scalar loops)"
        vector = "; vector math from libmvec" if self.compiler.vector_math else ""
        return f"{self.compiler.version}; {self.threads} threads{simd}{vector}"

    def allocate(self, nbytes: int) -> HostBuffer:
        return HostBuffer(nbytes)

    def free(self, handle: HostBuffer) -> None:
        pass  # NumPy owns the memory: dropping the handle frees it

    def write(self, handle: HostBuffer, offset: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data)
        if data.nbytes:
            _memmove(handle.address + offset, data.ctypes.data, data.nbytes)

    def read(self, items: Sequence[tuple[Any, int, int]]) -> list[bytes]:
        return [handle.array[offset:offset + nbytes].tobytes()
                for handle, offset, nbytes in items]

    def copy(self, src: HostBuffer, src_offset: int, dst: HostBuffer, dst_offset: int,
             nbytes: int) -> None:
        if nbytes:
            _memmove(dst.address + dst_offset, src.address + src_offset, nbytes)

    def compile(self, kernel: ir.Kernel, source: str) -> Any:
        function = getattr(self.compiler.build(source), kernel.name)
        function.argtypes = [_VOID_P] * (len(kernel.buffers) + 1) + [_INT] * 3
        function.restype = None
        return function

    def dispatch(self, compiled: Any, handles: Sequence[HostBuffer], info: np.ndarray,
                 groups: tuple[int, int, int]) -> None:
        self.launches += 1
        compiled(*[h.address for h in handles], info.ctypes.data, *groups)

    def sync(self) -> None:
        pass  # every launch has finished when it returns

    def blas(self, dtype: Any) -> bool:
        """Whether products of ``dtype`` go to NumPy's BLAS."""
        return self.library_products and dtype.name in _BLAS_DTYPES

    def fuses_product(self, dtype: Any, macs: int) -> bool:
        # BLAS outruns the tiled kernel (compiled for the CPU) far more than a separate pass
        # for a bias or an activation costs.
        return not self.blas(dtype)

    def fused_attention(self, dtype: Any) -> bool:
        # The flash kernels' workgroup tiles, written for GPUs' on-chip memory, run here as
        # loops over arrays; materialised scores go through BLAS.
        return not self.blas(dtype)

    def library_matmul(self, a: JitTensor, b: JitTensor, out: JitTensor,
                       batch: tuple[int, ...], bias: JitTensor | None = None,
                       groups: int = 1) -> bool:
        """float32 and float64 products through NumPy's ``matmul`` (its BLAS), straight on
        the buffers, and the bias added in place."""
        if not self.blas(a.dtype):
            return False
        if bias is None:
            self.host(_product, (a, b), (out,), self.gemm)
        else:
            m = out.shape[-2]
            self.host(_product_bias, (a, b, bias.view((groups, m, 1), (m, 1, 0), bias.offset)),
                      (out,), groups, self.gemm)
        return True

    @functools.cached_property
    def native_conv(self) -> NativeConv:
        """Convolutions in compiled C over BLAS (made at the first use)."""
        return NativeConv(self.compiler, self.gemm)

    def library_conv(self, x: JitTensor, matrix: JitTensor, bias: JitTensor | None,
                     out: JitTensor, groups: int, kernel: tuple[int, ...],
                     stride: tuple[int, ...], padding: tuple[int, ...],
                     dilation: tuple[int, ...], transposed: bool) -> bool:
        """Float convolutions of 1 to 3 spatial dims through ``burnish.cpu.conv``: each
        sample's patch matrix made and multiplied by BLAS while it is in the cache."""
        if (not self.blas(x.dtype) or not 1 <= len(kernel) <= 3
                or matrix.strides != contiguous_strides(matrix.shape)
                or x.dtype.name not in self.native_conv.entries):
            return False
        words = _words(x, out, kernel, stride, padding, dilation)
        inputs = (x, matrix) if bias is None else (x, matrix, bias)
        self.host(_conv, inputs, (out,), words, groups, transposed, self.native_conv)
        return True

    @functools.cached_property
    def native_pool(self) -> NativePool:
        """Max pooling in compiled C (made at the first use)."""
        return NativePool(self.compiler)

    @functools.cached_property
    def native_reduce(self) -> NativeReduce:
        """Float sums and means in compiled C (made at the first use)."""
        return NativeReduce(self.compiler)

    @functools.cached_property
    def native_rows(self) -> NativeRows:
        """Softmax and log-softmax rows in compiled C (made at the first use)."""
        return NativeRows(self.compiler)

    @functools.cached_property
    def native_norm(self) -> NativeNorm:
        """Layer normalisation in compiled C (made at the first use)."""
        return NativeNorm(self.compiler)

    def library_max_pool(self, x: JitTensor, out: JitTensor, index: JitTensor | None,
                         kernel: tuple[int, ...], stride: tuple[int, ...],
                         padding: tuple[int, ...], dilation: tuple[int, ...]) -> bool:
        """float32/float64 max pooling of 1 to 3 spatial dims through ``burnish.cpu.pool``,
        a line of outputs at a time."""
        if (not 1 <= len(kernel) <= 3 or x.dtype.name not in NativePool.dtypes
                or math.prod(x.shape[2:]) > NativePool.max_plane):
            return False
        words = _words(x, out, kernel, stride, padding, dilation)
        outputs = (out,) if index is None else (out, index)
        self.host(_max_pool, (x,), outputs, words, self.native_pool)
        return True

    @functools.cached_property
    def native_attention(self) -> NativeAttention:
        """Attention in compiled C over BLAS (made at the first use)."""
        return NativeAttention(self.compiler, self.gemm)

    def _attention_takes(self, *tensors: JitTensor) -> bool:
        q = tensors[0]
        return (self.blas(q.dtype) and q.dtype.name in self.native_attention.entries
                and all(n > 0 for t in tensors for n in t.shape)
                and takes(*[(t.shape, t.strides) for t in tensors]))

    def _new(self, shape: tuple[int, ...], like: JitTensor) -> JitTensor:
        nbytes = max(1, math.prod(shape)) * np.dtype(like.dtype.name).itemsize
        return JitTensor(self.pool.alloc(nbytes), shape, like.dtype, like.device, self)

    def _new_heads(self, shape: tuple[int, ...], like: JitTensor) -> JitTensor:
        """``[batch, heads, seq, dim]`` over a plain ``[batch, seq, heads, dim]`` buffer
        (``burnish.cpu.attention.interleaved``)."""
        stored, strides = interleaved(tuple(shape))
        return self._new(stored, like).view(tuple(shape), strides, 0)

    def library_attention(self, q: JitTensor, k: JitTensor, v: JitTensor,
                          mask: JitTensor | None, scale: float, causal: bool
                          ) -> tuple[JitTensor, JitTensor] | None:
        """float32/float64 attention through ``burnish.cpu.attention``: query blocks' scores
        made by BLAS and softmaxed while in the cache."""
        if not self._attention_takes(q, k, v):
            return None
        out = self._new_heads((*q.shape[:3], v.shape[3]), q)
        lse = self._new(tuple(q.shape[:3]), q)
        inputs = (q, k, v) if mask is None else (q, k, v, mask)
        self.host(_attention, inputs, (out, lse), causal, scale, self.native_attention)
        return out, lse

    def library_attention_backward(self, q: JitTensor, k: JitTensor, v: JitTensor,
                                   mask: JitTensor | None, grad: JitTensor, scale: float,
                                   causal: bool
                                   ) -> tuple[JitTensor, JitTensor, JitTensor] | None:
        if not self._attention_takes(q, k, v, grad):
            return None
        grads = (self._new_heads(q.shape, q), self._new_heads(k.shape, k),
                 self._new_heads(v.shape, v))
        inputs = (q, k, v, grad) if mask is None else (q, k, v, grad, mask)
        self.host(_attention_backward, inputs, grads, causal, scale, self.native_attention)
        return grads

    @functools.cached_property
    def native_recurrent(self) -> NativeRecurrent:
        """Recurrent layers in compiled C over BLAS (made at the first use)."""
        return NativeRecurrent(self.compiler, self.gemm, self.threads)

    def library_recurrent(self, input_gates: JitTensor, hidden_weight: JitTensor,
                          hidden_bias: JitTensor | None, hidden: JitTensor,
                          cell: JitTensor | None, reverse: bool
                          ) -> tuple[JitTensor, ...] | None:
        """float32/float64 LSTM and GRU layers through ``burnish.cpu.recurrent``: every step
        in one call, each thread a block of hidden units."""
        if (not self.blas(hidden.dtype) or hidden.dtype.name not in self.native_recurrent.entries
                or weight_layout(hidden_weight.shape, hidden_weight.strides) is None):
            return None
        seq, batch, _ = input_gates.shape
        outputs = self._new((seq, *hidden.shape), hidden)
        states: tuple[JitTensor, ...] = (self._new(tuple(hidden.shape), hidden),)
        inputs: tuple[JitTensor, ...] = (input_gates, hidden_weight, hidden)
        if cell is not None:
            inputs, states = (*inputs, cell), (*states, self._new(tuple(hidden.shape), hidden))
        elif hidden_bias is not None:
            inputs = (*inputs, hidden_bias)
        self.host(_recurrent, inputs, (outputs, *states), cell is not None,
                  hidden_bias is not None, reverse, self.native_recurrent)
        return (outputs, *states)

    def library_cat(self, out: JitTensor, parts: Sequence[tuple[JitTensor, int]],
                    dim: int) -> bool:
        """A ``cat`` as one host call of NumPy's strided copies (rows at memcpy's speed; the
        generated ``cat_into`` works out every element's coordinates, several times slower)."""
        name = out.dtype.name
        if name not in _NUMPY_DTYPES or self.generator.storage_numpy(name) != np.dtype(name):
            return False
        self.host(_cat, [x for x, _ in parts], (out,), dim)
        return True

    def library_select(self, out: JitTensor, x: JitTensor, dim: int,
                       indices: JitTensor) -> bool:
        """A ``select`` (an embedding's rows) as one host call of NumPy's ``take``: whole rows
        copied at memcpy's speed (the generated ``gather`` works out every element's
        coordinates and its index, several times slower)."""
        name = x.dtype.name
        if (name not in _NUMPY_DTYPES or self.generator.storage_numpy(name) != np.dtype(name)
                or indices.dtype.name not in ("int32", "int64") or not x.shape[dim]):
            return False  # (an empty dim: every index is out of bounds, the kernel's check)
        self.host(_select, (x, indices), (out,), dim)
        return True

    @functools.cached_property
    def int8_gemm(self) -> Int8Gemm:
        """Products of 8-bit integers in compiled C (made at the first use)."""
        return Int8Gemm(self.compiler)

    @functools.cached_property
    def int8_quantize(self) -> Int8Quantize:
        """float32 to 8-bit integers in one compiled pass (made at the first use)."""
        return Int8Quantize(self.compiler)

    @functools.cached_property
    def gemm(self) -> Gemm:
        """Products on NumPy's BLAS from this runtime's threads (made at the first use)."""
        return Gemm(self.compiler, self.threads)

    def program(self, commands: Sequence[tuple]) -> list[tuple[Any, tuple]]:
        """``Runtime.program`` with each host call's arrays made once and each launch's C
        arguments converted once: a record's buffers stay where they are, so its replays call
        the function on the same arrays and addresses (``replayer`` sets NumPy's error state
        and the BLAS guard once around them all). A convolution followed by an elementwise
        op of its output alone (an activation) runs the op as its epilogue
        (``_with_epilogues``)."""
        program = self._with_epilogues(super().program(commands))
        for i, (fn, args) in enumerate(program):
            if fn is _on_arrays:
                host_fn, _, layouts, extra, *handles = args
                arrays = (*_arrays(layouts, handles), *extra)
                binder = _BINDERS.get(host_fn)
                program[i] = (binder(*arrays), ()) if binder else (host_fn, arrays)
            elif getattr(fn, "__func__", None) is CpuRuntime.dispatch:
                program[i] = (_bound_launch(*args), ())
        if any(isinstance(fn, BoundLayers) for fn, _ in program):
            program = _concurrent_layers(program, self.native_recurrent)
        return program

    def joined(self, commands: Sequence[tuple]) -> list[int]:
        """The convolutions whose next command runs as their epilogue (``_with_epilogues``):
        a capture keeps what they read from the memory that launch writes."""
        return list(self._epilogues(super().program(commands)))

    def _epilogues(self, program: list[tuple[Any, tuple]]) -> dict[int, tuple]:
        """Where in ``program`` a recorded convolution is followed at once by a launch of a
        flat elementwise kernel whose one input is the convolution's whole output, of its
        dtype (an activation, or a chain of them under fusion): index -> the launch's key
        (``kernels.elementwise``'s ``("elementwise", op, inputs, out, scalars, "flat",
        several)``)."""
        kernels: dict[int, tuple] | None = None
        found = {}
        for i in range(len(program) - 1):
            fn, args = program[i]
            follower, launch = program[i + 1]
            if (fn is not _on_arrays or args[0] is not _conv
                    or getattr(follower, "__func__", None) is not CpuRuntime.dispatch):
                continue
            if kernels is None:
                kernels = {id(entry[0]): key for key, entry in self._kernels.items()}
            key = kernels.get(id(launch[0]))
            if key is None or key[0] != "elementwise" or key[5] != "flat" or len(key[2]) != 1:
                continue
            shape, strides, offset, dtype = args[2][-1]  # the convolution's output
            _, (_, source), info, _ = launch
            if (source is args[-1] and int(info[1]) == offset and int(info[0]) == math.prod(shape)
                    and tuple(strides) == contiguous_strides(tuple(shape))
                    and key[2][0] == key[3] == dtype and len(info) <= EPILOGUE_WORDS):
                found[i] = key
        return found

    def _with_epilogues(self, program: list[tuple[Any, tuple]]) -> list[tuple[Any, tuple]]:
        """``program`` with each convolution that ``_epilogues`` finds and the launch after it
        bound as one call: the convolution runs the launch's kernel on each block of its
        output as soon as the block is written, while it is in the cache, instead of a pass
        of its own over the whole output afterwards (mobilenet_v3_small's hard-swish and ReLU
        launches). The kernel is the launch's own, with its info: the same values. Both
        outputs are still written (a later command may read either)."""
        pairs = self._epilogues(program)
        fused: list[tuple[Any, tuple]] = []
        i = 0
        while i < len(program):
            if i in pairs:
                bound = _conv_with_epilogue(program[i][1], program[i + 1][1], pairs[i])
                if bound is not None:
                    fused.append((bound, ()))
                    i += 2
                    continue
            fused.append(program[i])
            i += 1
        return fused

    def replayer(self, commands: Sequence[tuple]) -> Any:
        """The recorded launches and host calls in order, inside one BLAS guard and NumPy
        error state (a host call outside a replay enters both itself: ``host``) and one busy
        phase of the thread pool."""
        program = self.program(commands)
        copy = type(self).copy.__get__(self)
        guard = self.gemm.guard
        busy = self.compiler.threads.busy
        count = len(program)

        def replay(copies: Sequence[tuple]) -> None:
            # The pool's workers woken now and spinning until the last command is done (not
            # asleep between them, not spinning after: burnish.cpu.threads).
            with busy():
                for src, dst, start, end, _ in copies:
                    copy(src, start, dst, start, end - start)
                with np.errstate(all="ignore"), guard:  # NaN and inf propagate, as in kernels
                    for fn, args in program:
                        fn(*args)
            self.launches += count  # one launch or host call each, as when they ran eagerly

        return replay

    def host(self, fn: Any, inputs: Sequence[JitTensor], outputs: Sequence[JitTensor],
             *extra: Any) -> None:
        """Run ``fn(*arrays, *extra)`` on NumPy arrays over the memory of ``inputs`` and then
        ``outputs`` (no copies), through ``call``: a capture records it like a kernel launch
        and replays it on the buffers the replay uses."""
        tensors = (*inputs, *outputs)
        layouts = tuple((t.shape, t.strides, t.offset, t.dtype.name) for t in tensors)
        guard = self.gemm.guard
        self.call(_on_arrays, (fn, guard, layouts, extra, *[t.buffer.handle for t in tensors]),
                  [t.buffer.handle for t in inputs], [t.buffer.handle for t in outputs],
                  key=(fn, layouts, extra))
        self.launches += 1


def _bound_launch(compiled: Any, handles: Sequence[HostBuffer], info: np.ndarray,
                  groups: tuple[int, int, int]) -> Callable[[], None]:
    """``CpuRuntime.dispatch`` of a recorded launch as a call of no arguments: the addresses
    and grid as ctypes values made once (converting ten Python ints per call costs about what
    a small kernel's work does)."""
    args = (*[_VOID_P(h.address) for h in handles], _VOID_P(info.ctypes.data),
            *[_INT(g) for g in groups])
    launch = functools.partial(compiled, *args)
    launch.info = info  # type: ignore[attr-defined]  # C reads its memory: kept with the call
    return launch


def _arrays(layouts: tuple, handles: Sequence[HostBuffer]) -> list[np.ndarray]:
    """NumPy arrays over ``handles``' memory, each with its ``(shape, strides, offset, dtype)``
    (in elements) of ``layouts``."""
    arrays = []
    for handle, (shape, strides, offset, dtype) in zip(handles, layouts):
        kind = np.dtype(dtype)  # float32, float64 and the ints: NumPy's types are the storage
        size = kind.itemsize
        arrays.append(np.ndarray(shape, kind, buffer=handle.array, offset=offset * size,
                                 strides=tuple(s * size for s in strides)))
    return arrays


def _on_arrays(fn: Any, guard: AbstractContextManager[Any], layouts: tuple, extra: tuple,
               *handles: HostBuffer) -> None:
    arrays = _arrays(layouts, handles)
    with np.errstate(all="ignore"), guard:  # NaN and inf propagate, as in kernels
        fn(*arrays, *extra)


def _product(a: np.ndarray, b: np.ndarray, out: np.ndarray, gemm: Gemm) -> None:
    if not gemm.product(a, b, out):
        np.matmul(a, b, out=out)


def _product_bias(a: np.ndarray, b: np.ndarray, bias: np.ndarray, out: np.ndarray,
                  groups: int, gemm: Gemm) -> None:
    _product(a, b, out, gemm)
    rows = out.reshape(-1, groups, *out.shape[-2:])  # out is plain: a view
    rows += bias


def _words(x: JitTensor, out: JitTensor, kernel: tuple[int, ...], stride: tuple[int, ...],
           padding: tuple[int, ...], dilation: tuple[int, ...]) -> tuple[int, ...]:
    """``burnish.cpu.conv.geometry`` of a window op from ``x`` to ``out``, as a tuple (a host
    call's arguments are part of its key)."""
    return tuple(geometry(x.shape[2:], out.shape[2:], kernel, stride, padding, dilation,
                          x.strides[2:]).tolist())


def _conv(x: np.ndarray, matrix: np.ndarray, *rest: Any) -> None:
    """``NativeConv.forward`` with the arguments ``CpuRuntime.library_conv`` recorded."""
    _bind_conv(x, matrix, *rest)()


def _bind_conv(x: np.ndarray, matrix: np.ndarray, *rest: Any) -> Callable[[], None]:
    """``_conv`` of these arrays as a call of no arguments (``NativeConv.bind_forward``)."""
    *tensors, words, groups, transposed, native = rest
    bias, out = tensors if len(tensors) == 2 else (None, tensors[0])
    return native.bind_forward(x, matrix, bias, out, np.array(words, np.int64), groups,
                               transposed)


def _conv_with_epilogue(conv: tuple, launch: tuple, key: tuple) -> Callable[[], None] | None:
    """The recorded ``_conv`` call ``conv`` bound with the elementwise ``launch`` of key
    ``key`` that follows it as its epilogue (``CpuRuntime._with_epilogues``), or None where
    the convolution goes Winograd's way (``NativeConv.takes_epilogue``) or the launch's
    output overlaps the convolution's operands (memory it shares with the input,
    which the epilogue would write while other blocks still read it: a capture keeps them
    apart, ``Runtime.joined``)."""
    _, _, layouts, extra, *handles = conv
    x, matrix, *rest = [*_arrays(layouts, handles), *tuple(extra)]
    *tensors, words, groups, transposed, native = rest
    out = tensors[-1]
    words = np.array(words, np.int64)
    if not native.takes_epilogue(x, matrix, out, words, groups, transposed):
        return None
    compiled, (target, _), info, _ = launch
    start, end = target.address, target.address + out.nbytes
    for array in (x, matrix, *tensors):
        low, high = _bounds(array)
        if start < high and low < end and not (array is out and start == out.ctypes.data):
            return None
    epilogue = Epilogue(int(ctypes.cast(compiled, _VOID_P).value or 0), info,
                        start - out.ctypes.data, WORKGROUP * key[6], out.itemsize)
    bias = tensors[0] if len(tensors) == 2 else None
    return native.bind_forward(x, matrix, bias, out, words, groups, transposed, epilogue)


def _bounds(array: np.ndarray) -> tuple[int, int]:
    """The first and one past the last byte address ``array`` reads (any strides)."""
    low = high = array.ctypes.data
    if array.size:
        for n, stride in zip(array.shape, array.strides):
            if stride < 0:
                low += (n - 1) * stride
            else:
                high += (n - 1) * stride
        high += array.itemsize
    return low, high


def _max_pool(x: np.ndarray, *rest: Any) -> None:
    """``NativePool.forward`` with the arguments ``CpuRuntime.library_max_pool`` recorded."""
    *outputs, words, native = rest
    out, index = outputs if len(outputs) == 2 else (outputs[0], None)
    native.forward(x, out, index, np.array(words, np.int64))


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, *rest: Any) -> None:
    """``NativeAttention.forward`` with what ``CpuRuntime.library_attention`` recorded."""
    native, arguments = _attention_arguments(q, k, v, *rest)
    native.forward(*arguments)


def _bind_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                    *rest: Any) -> Callable[[], None]:
    """``_attention`` of these arrays as a call of no arguments
    (``NativeAttention.bind_forward``)."""
    native, arguments = _attention_arguments(q, k, v, *rest)
    return native.bind_forward(*arguments)


def _attention_arguments(q: np.ndarray, k: np.ndarray, v: np.ndarray,
                         *rest: Any) -> tuple[NativeAttention, tuple]:
    *tensors, causal, scale, native = rest
    mask, (out, lse) = (tensors[0], tensors[1:]) if len(tensors) == 3 else (None, tensors)
    return native, (q, k, v, mask, out, lse, causal, scale)


def _attention_backward(q: np.ndarray, k: np.ndarray, v: np.ndarray, grad: np.ndarray,
                        *rest: Any) -> None:
    *tensors, causal, scale, native = rest
    mask, (dq, dk, dv) = (tensors[0], tensors[1:]) if len(tensors) == 4 else (None, tensors)
    native.backward(q, k, v, mask, grad, dq, dk, dv, causal, scale)


def _cat(*rest: Any) -> None:
    """``CpuRuntime.library_cat``'s parts into ``out`` along ``dim``."""
    *parts, out, dim = rest
    np.concatenate(parts, axis=dim, out=out)


def _select(x: np.ndarray, indices: np.ndarray, out: np.ndarray, dim: int) -> None:
    """``CpuRuntime.library_select``: the slices of ``x`` along ``dim`` at ``indices``,
    clamped into the dim."""
    np.take(x, indices, axis=dim, out=out, mode="clip")


def _recurrent(x: np.ndarray, weight: np.ndarray, h0: np.ndarray, *rest: Any) -> None:
    """``NativeRecurrent.bind`` of what ``CpuRuntime.library_recurrent`` recorded, run."""
    _bind_recurrent(x, weight, h0, *rest)()


def _bind_recurrent(x: np.ndarray, weight: np.ndarray, h0: np.ndarray, *rest: Any
                    ) -> BoundLayers:
    """``_recurrent`` of these arrays as a call of no arguments (``NativeRecurrent.bind``)."""
    *arrays, lstm, biased, reverse, native = rest
    if lstm:
        c0, out, last_h, last_c = arrays
        return native.bind(x, weight, None, h0, c0, out, last_h, last_c, reverse)
    bias = arrays.pop(0) if biased else None
    out, last_h = arrays
    return native.bind(x, weight, bias, h0, None, out, last_h, None, reverse)


#: Host functions whose replays bind their arrays once: ``CpuRuntime.program`` replays
#: ``binder(*arrays, *extra)``, a call of no arguments, instead of the function (a
#: convolution's 14 C arguments, from NumPy's ``ctypes`` attributes, cost more than a small
#: one's work; a product's plan and a bias pass in NumPy, more than a small product).
_BINDERS: dict[Any, Callable[..., Callable[[], None]]] = {
    _conv: _bind_conv, _attention: _bind_attention, _recurrent: _bind_recurrent,
    **module_binders, **reduce_binders}


def _concurrent_layers(program: list[tuple[Any, tuple]], native: NativeRecurrent
                       ) -> list[tuple[Any, tuple]]:
    """``program`` with each run of adjacent independent recurrent layers (a bidirectional
    layer's two directions) as one call that runs them at once, one thread each
    (``NativeRecurrent.together``): one layer's steps on two threads meet at every step, two
    layers on one thread each never do (both directions of a 128-unit LSTM layer, batch 8, 32
    steps: 400 us at once, 2 x 239 one after the other on two threads each)."""
    merged: list[tuple[Any, tuple]] = []
    for fn, args in program:
        last = merged[-1][0] if merged else None
        if isinstance(fn, BoundLayers) and isinstance(last, BoundLayers) \
                and len(last.layers) < native.threads:
            both = native.together([last, fn])
            if both is not None:
                merged[-1] = (both, ())
                continue
        merged.append((fn, args))
    return merged
