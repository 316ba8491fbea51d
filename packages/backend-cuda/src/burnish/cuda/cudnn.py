"""Convolutions on cuDNN, where it is installed: NVIDIA's implicit-GEMM, Winograd and FFT kernels
instead of ``burnish.jit``'s patch gather and a cuBLAS product.

CuPy 14 no longer wraps cuDNN, so its C API is called through ``ctypes``, from the library of
the ``nvidia-cudnn-cu12``/``-cu13`` wheel (``pip install 'burnish-backend-cuda[cudnn12]'``), a
path in ``BURNISH_CUDNN_LIBRARY``, or the system's ``libcudnn.so.9``. Without it, or with
``BURNISH_CUDNN=0``, convolutions take the gather and cuBLAS. All three passes run here: the
forward pass (``conv``), backward data (``conv_transpose``, so every input gradient) and
backward filter (``conv_weight_grad``). Descriptors, the algorithm (the fastest of cuDNN's
deterministic candidates, timed once per shape as ``torch.backends.cudnn.benchmark`` does;
``BURNISH_CUDNN_BENCHMARK=0``: cuDNN's heuristics alone) and the workspace size are made once
per shape and pass and kept.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

from burnish.cuda import gemm
from burnish.jit.kernels.conv import output_size
from burnish.jit.tensor import JitTensor, contiguous_strides, numel

try:
    from cupy.cuda.runtime import getDevice as _get_device
except ImportError:  # nothing here runs without CuPy: the backend says what to install
    _get_device = None

# cudnnDataType_t, the compute type each storage type accumulates in, and alpha/beta's C type.
_TYPES = {
    "float32": (0, 0, ctypes.c_float),
    "float64": (1, 1, ctypes.c_double),
    "float16": (2, 0, ctypes.c_float),
    "bfloat16": (9, 0, ctypes.c_float),
}
_NCHW, _CROSS_CORRELATION = 0, 1
_DEFAULT_MATH, _TENSOR_OP_MATH, _FMA_MATH = 0, 1, 3
_ALGORITHMS = 8  # the forward algorithms cuDNN ranks
#: Convolution shapes whose plans a device keeps (then it starts over).
PLAN_LIMIT = 1024
#: The passes a plan is for, and the cuDNN functions that rank their algorithms (timed, then by
#: heuristics) and size their workspace.
_FORWARD, _DATA, _FILTER = "forward", "data", "filter"
_CALLS = {
    _FORWARD: ("cudnnFindConvolutionForwardAlgorithm", "cudnnGetConvolutionForwardAlgorithm_v7",
               "cudnnGetConvolutionForwardWorkspaceSize"),
    _DATA: ("cudnnFindConvolutionBackwardDataAlgorithm",
            "cudnnGetConvolutionBackwardDataAlgorithm_v7",
            "cudnnGetConvolutionBackwardDataWorkspaceSize"),
    _FILTER: ("cudnnFindConvolutionBackwardFilterAlgorithm",
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
              "cudnnGetConvolutionBackwardFilterWorkspaceSize"),
}
#: ``cudnnDeterminism_t``: only algorithms that give the same bits on every run are chosen (some
#: backward ones add with atomics, in whatever order the hardware runs them), so a training step
#: is reproducible and its captured replay matches the eager run bit for bit.
_DETERMINISTIC = 1
#: ``CUDNN_BATCHNORM_SPATIAL``: statistics per channel over batch and space (the persistent
#: variant may add with atomics, so its results could vary from run to run).
_BN_SPATIAL = 1
#: Whether a shape's algorithm is chosen by timing cuDNN's candidates once (``BURNISH_CUDNN_
#: BENCHMARK=0``: cuDNN's heuristics alone, as PyTorch's default).
BENCHMARK = os.environ.get("BURNISH_CUDNN_BENCHMARK", "1") != "0"
#: The most workspace an algorithm may ask for (faster ones needing more are passed over).
WORKSPACE_LIMIT = 256 * 2**20


class _AlgoPerf(ctypes.Structure):
    """``cudnnConvolutionFwdAlgoPerf_t``."""

    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int),
                ("math_type", ctypes.c_int), ("reserved", ctypes.c_int * 3)]


class CudnnError(RuntimeError):
    """A cuDNN call failed while running a convolution it had accepted."""


_lock = threading.Lock()
_library: Any = None  # the loaded library, False when there is none
_where = ""  # where it was loaded from, or why not


def library() -> Any:
    """The cuDNN library (``ctypes.CDLL``), or None when it is not installed or turned off."""
    global _library, _where
    if _library is None:
        with _lock:
            if _library is None:
                _library, _where = _load()
    return _library or None


def describe() -> str:
    """Where cuDNN was loaded from, or why it is not used (for ``python -m burnish info``)."""
    library()
    return _where


def refuse(reason: str) -> None:
    """Stop using cuDNN in this process (a device could not make a handle), saying why."""
    global _library, _where
    with _lock:
        _library, _where = False, f"unusable: {reason}"


def summary() -> str:
    """One line for device listings: the cuDNN version used, or what runs instead."""
    lib = library()
    if lib is None:
        return "patch gather and cuBLAS (no cuDNN: " + _where.split(":")[0] + ")"
    version = lib.cudnnGetVersion()  # 9.19.0 is 91900; 8.9.7 was 8907
    major = version // 10000 if version >= 90000 else version // 1000
    minor = version // 100 % 100 if version >= 90000 else version // 100 % 10
    return f"cuDNN {major}.{minor}.{version % 100}"


def _load() -> tuple[Any, str]:
    if os.environ.get("BURNISH_CUDNN", "1").lower() in ("0", "false", "off", "no"):
        return False, "turned off by BURNISH_CUDNN=0"
    candidates = []
    if os.environ.get("BURNISH_CUDNN_LIBRARY"):
        candidates.append(os.environ["BURNISH_CUDNN_LIBRARY"])
    try:
        spec = importlib.util.find_spec("nvidia.cudnn")
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidates += [str(p) for p in sorted(Path(folder, "lib").glob("libcudnn.so.*"))]
    candidates += ["libcudnn.so.9", "libcudnn.so"]
    errors = []
    for name in candidates:
        try:
            lib = ctypes.CDLL(name)
            version = lib.cudnnGetVersion()
        except (OSError, AttributeError) as error:
            errors.append(f"{name}: {error}")
            continue
        if version < 8000:
            errors.append(f"{name}: version {version}, 8.0 or newer needed")
            continue
        _declare(lib)
        return lib, f"cuDNN {version} ({name})"
    return False, "not found (pip install nvidia-cudnn-cu12 or -cu13): " + "; ".join(errors[-2:])


def _declare(lib: Any) -> None:
    p, i, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    ints = ctypes.POINTER(ctypes.c_int)
    signatures = {
        "cudnnCreate": [ctypes.POINTER(p)],
        "cudnnSetStream": [p, p],
        "cudnnCreateTensorDescriptor": [ctypes.POINTER(p)],
        "cudnnSetTensorNdDescriptor": [p, i, i, ints, ints],
        "cudnnCreateFilterDescriptor": [ctypes.POINTER(p)],
        "cudnnSetFilterNdDescriptor": [p, i, i, i, ints],
        "cudnnCreateConvolutionDescriptor": [ctypes.POINTER(p)],
        "cudnnSetConvolutionNdDescriptor": [p, i, ints, ints, ints, i, i],
        "cudnnSetConvolutionGroupCount": [p, i],
        "cudnnSetConvolutionMathType": [p, i],
        "cudnnGetConvolutionNdForwardOutputDim": [p, p, p, i, ints],
        "cudnnGetConvolutionForwardAlgorithm_v7": [p, p, p, p, p, i, ints,
                                                   ctypes.POINTER(_AlgoPerf)],
        "cudnnFindConvolutionForwardAlgorithm": [p, p, p, p, p, i, ints,
                                                 ctypes.POINTER(_AlgoPerf)],
        "cudnnGetConvolutionForwardWorkspaceSize": [p, p, p, p, p, i, ctypes.POINTER(s)],
        "cudnnConvolutionForward": [p, p, p, p, p, p, p, i, p, s, p, p, p],
        "cudnnFindConvolutionBackwardDataAlgorithm": [p, p, p, p, p, i, ints,
                                                      ctypes.POINTER(_AlgoPerf)],
        "cudnnGetConvolutionBackwardDataAlgorithm_v7": [p, p, p, p, p, i, ints,
                                                        ctypes.POINTER(_AlgoPerf)],
        "cudnnGetConvolutionBackwardDataWorkspaceSize": [p, p, p, p, p, i,
                                                         ctypes.POINTER(s)],
        "cudnnConvolutionBackwardData": [p, p, p, p, p, p, p, i, p, s, p, p, p],
        "cudnnFindConvolutionBackwardFilterAlgorithm": [p, p, p, p, p, i, ints,
                                                        ctypes.POINTER(_AlgoPerf)],
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7": [p, p, p, p, p, i, ints,
                                                          ctypes.POINTER(_AlgoPerf)],
        "cudnnGetConvolutionBackwardFilterWorkspaceSize": [p, p, p, p, p, i,
                                                           ctypes.POINTER(s)],
        "cudnnConvolutionBackwardFilter": [p, p, p, p, p, p, p, i, p, s, p, p, p],
        "cudnnAddTensor": [p, p, p, p, p, p, p],
        "cudnnDeriveBNTensorDescriptor": [p, p, i],
        "cudnnBatchNormalizationForwardTraining": [p, i, p, p, p, p, p, p, p, p, p,
                                                   ctypes.c_double, p, p, ctypes.c_double, p,
                                                   p],
        "cudnnBatchNormalizationBackward": [p, i, p, p, p, p, p, p, p, p, p, p, p, p, p, p,
                                            ctypes.c_double, p, p],
    }
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    lib.cudnnGetErrorString.argtypes, lib.cudnnGetErrorString.restype = [i], ctypes.c_char_p


def _ints(values) -> ctypes.Array:
    return (ctypes.c_int * len(values))(*values)


class _Plan:
    """What one convolution shape always uses: descriptors, algorithm, workspace size."""

    __slots__ = ("kind", "x", "w", "y", "conv", "bias", "algo", "workspace", "scalars", "alpha",
                 "beta")
    kind: str
    # cuDNN's descriptors, algorithm and scaling factors: ctypes values.
    x: Any
    w: Any
    y: Any
    conv: Any
    bias: Any
    algo: Any
    workspace: Any
    scalars: Any
    alpha: Any
    beta: Any


class Convolutions:
    """cuDNN on one device: its handle (on the runtime's stream) and a plan per shape."""

    def __init__(self, runtime: Any, lib: Any):
        self.runtime, self.lib = runtime, lib
        self.lock = threading.Lock()
        self.plans: dict[tuple, _Plan | None] = {}
        handle = ctypes.c_void_p()
        with runtime.cuda_device:
            self._check(lib.cudnnCreate(ctypes.byref(handle)), "cudnnCreate")
        self.handle = handle
        self._check(lib.cudnnSetStream(handle, ctypes.c_void_p(runtime.stream_ptr)),
                    "cudnnSetStream")

    def _check(self, status: int, what: str) -> None:
        if status:
            message = self.lib.cudnnGetErrorString(status).decode()
            raise CudnnError(f"cuda: cuDNN's {what} failed: {message} (status {status})")

    def forward(self, x: JitTensor, weight: JitTensor, bias: JitTensor | None,
                stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...],
                groups: int) -> JitTensor | None:
        """The convolution of plain ``x`` by plain ``weight`` (plus plain ``bias``), or None
        when cuDNN does not take it (then nothing was enqueued)."""
        out_size = output_size(x.shape[2:], weight.shape[2:], stride, padding, dilation)
        out_shape = (x.shape[0], weight.shape[0], *out_size)
        return self._run(_FORWARD, x, weight, bias, (x.shape, weight.shape, out_shape),
                         out_shape, stride, padding, dilation, groups)

    def transpose(self, x: JitTensor, weight: JitTensor, bias: JitTensor | None,
                  stride: tuple[int, ...], padding: tuple[int, ...],
                  output_padding: tuple[int, ...], dilation: tuple[int, ...],
                  groups: int) -> JitTensor | None:
        """The transposed convolution of plain ``x`` by plain ``weight`` (``[in_channels,
        out_channels / groups, *kernel]``) plus plain ``bias``: cuDNN's backward-data pass of
        the convolution whose output ``x`` would be (the input gradient of a convolution is
        this op). None when cuDNN does not take it."""
        out_size = tuple((n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in zip(
            x.shape[2:], stride, padding, dilation, weight.shape[2:], output_padding))
        out_shape = (x.shape[0], weight.shape[1] * groups, *out_size)
        return self._run(_DATA, x, weight, bias, (out_shape, weight.shape, x.shape), out_shape,
                         stride, padding, dilation, groups)

    def weight_grad(self, x: JitTensor, grad: JitTensor, kernel: tuple[int, ...],
                    stride: tuple[int, ...], padding: tuple[int, ...],
                    dilation: tuple[int, ...], groups: int) -> JitTensor | None:
        """The gradient of the convolution of plain ``x`` with respect to its weight,
        contracted with plain ``grad`` (the output's gradient): cuDNN's backward-filter pass,
        ``[out_channels, in_channels / groups, *kernel]``. None when cuDNN does not take it."""
        w_shape = (grad.shape[1], x.shape[1] // groups, *kernel)
        return self._run(_FILTER, x, grad, None, (x.shape, w_shape, grad.shape), w_shape,
                         stride, padding, dilation, groups)

    def batch_norm(self, x: JitTensor, weight: JitTensor, bias: JitTensor, epsilon: float
                   ) -> tuple[JitTensor, JitTensor, JitTensor] | None:
        """Training-mode batch normalisation of plain ``x`` (``[batch, channels, *spatial]``)
        by plain ``weight`` and ``bias`` (float32 for 16-bit ``x``, as cuDNN takes them):
        ``(y, mean, invstd)``, the statistics of ``weight``'s dtype, cuDNN's spatial mode (its
        deterministic one). None when cuDNN does not take it."""
        plan = self._bn_plan(x.dtype.name, x.shape, epsilon)
        if plan is None:
            return None
        y = self._new(x, x.shape)
        mean, invstd = self._new(weight, (x.shape[1],)), self._new(weight, (x.shape[1],))
        self.runtime.call(self._bn_forward, (plan, *(self._address(t) for t in (
            x, weight, bias, y, mean, invstd)), epsilon),
            [x.buffer.handle, weight.buffer.handle, bias.buffer.handle],
            [y.buffer.handle, mean.buffer.handle, invstd.buffer.handle], plan)
        self.runtime.launches += 1
        return y, mean, invstd

    def batch_norm_backward(self, x: JitTensor, weight: JitTensor, mean: JitTensor,
                            invstd: JitTensor, grad: JitTensor, epsilon: float
                            ) -> tuple[JitTensor, JitTensor, JitTensor] | None:
        """``(dx, dweight, dbias)`` of ``batch_norm`` (plain tensors; ``mean`` and ``invstd``
        as it returned them), cuDNN's backward pass. None when cuDNN does not take it."""
        plan = self._bn_plan(x.dtype.name, x.shape, epsilon)
        if plan is None:
            return None
        dx = self._new(x, x.shape)
        dweight, dbias = self._new(weight, (x.shape[1],)), self._new(weight, (x.shape[1],))
        self.runtime.call(self._bn_backward, (plan, *(self._address(t) for t in (
            x, weight, mean, invstd, grad, dx, dweight, dbias)), epsilon),
            [t.buffer.handle for t in (x, weight, mean, invstd, grad)],
            [dx.buffer.handle, dweight.buffer.handle, dbias.buffer.handle], plan)
        self.runtime.launches += 1
        return dx, dweight, dbias

    def _address(self, x: JitTensor) -> ctypes.c_void_p:
        """The device address of ``x``'s first element."""
        return _address(x, self.runtime.generator.storage_numpy(x.dtype.name).itemsize)

    def _new(self, like: JitTensor, shape: tuple[int, ...]) -> JitTensor:
        """A new plain tensor of ``shape`` with ``like``'s dtype and device, from the pool."""
        runtime = self.runtime
        itemsize = runtime.generator.storage_numpy(like.dtype.name).itemsize
        return JitTensor(runtime.pool.alloc(numel(shape) * itemsize), shape, like.dtype,
                         like.device, runtime)

    def _bn_plan(self, dtype: str, shape: tuple[int, ...], epsilon: float) -> _Plan | None:
        """The descriptors of a batch normalisation over ``shape``; None where cuDNN does not
        take it (fewer than 2 or more than 5 dims; an epsilon below cuDNN's minimum). For
        16-bit floats cuDNN's parameters and statistics are float32, as the protocol's."""
        if dtype not in _TYPES or not 2 <= len(shape) <= 5 or epsilon < 1e-5 \
                or min(shape) == 0:
            return None
        key = ("batch_norm", dtype, shape)
        with self.lock:
            plan = self.plans.get(key, False)
            if plan is not False:
                return plan
            if len(self.plans) >= PLAN_LIMIT:
                self.plans.clear()
            plan = self.plans[key] = self._make_bn_plan(dtype, shape)
        return plan

    def _make_bn_plan(self, dtype: str, shape: tuple[int, ...]) -> _Plan | None:
        data, _, scalar = _TYPES[dtype]
        if len(shape) < 4:  # cuDNN's tensors have 4 dims or more: [N, C] and [N, C, L] padded
            shape = shape[:2] + (1,) * (4 - len(shape)) + shape[2:]
        plan = _Plan()
        plan.kind = "batch_norm"
        plan.x = self._tensor(data, shape)
        plan.bias = ctypes.c_void_p()
        if plan.x is None or self.lib.cudnnCreateTensorDescriptor(ctypes.byref(plan.bias)) or \
                self.lib.cudnnDeriveBNTensorDescriptor(plan.bias, plan.x, _BN_SPATIAL):
            return None
        plan.scalars = (scalar(1.0), scalar(0.0))
        plan.alpha = ctypes.c_void_p(ctypes.addressof(plan.scalars[0]))
        plan.beta = ctypes.c_void_p(ctypes.addressof(plan.scalars[1]))
        return plan

    def _bn_forward(self, plan: _Plan, x, weight, bias, y, mean, invstd, epsilon) -> None:
        """Enqueue one batch normalisation (no running statistics: the caller moves them)."""
        with self.lock, _current(self.runtime):
            self._check(self.lib.cudnnBatchNormalizationForwardTraining(
                self.handle, _BN_SPATIAL, plan.alpha, plan.beta, plan.x, x, plan.x, y,
                plan.bias, weight, bias, 0.0, None, None, epsilon, mean, invstd),
                "cudnnBatchNormalizationForwardTraining")

    def _bn_backward(self, plan: _Plan, x, weight, mean, invstd, grad, dx, dweight, dbias,
                     epsilon) -> None:
        """Enqueue one batch normalisation's backward pass."""
        with self.lock, _current(self.runtime):
            self._check(self.lib.cudnnBatchNormalizationBackward(
                self.handle, _BN_SPATIAL, plan.alpha, plan.beta, plan.alpha, plan.beta, plan.x,
                x, plan.x, grad, plan.x, dx, plan.bias, weight, dweight, dbias, epsilon, mean,
                invstd), "cudnnBatchNormalizationBackward")

    def _run(self, kind: str, a: JitTensor, b: JitTensor, bias: JitTensor | None,
             shapes: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]],
             out_shape: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
             dilation: tuple[int, ...], groups: int) -> JitTensor | None:
        """Enqueue pass ``kind`` of the convolution whose input, weight and output have
        ``shapes``, reading ``a`` and ``b`` (forward: input and weight; data: output gradient
        and weight; filter: input and output gradient), writing a new tensor of ``out_shape``
        (plus ``bias``, broadcast over its channels)."""
        dtype = a.dtype.name
        key = (kind, dtype, shapes, stride, padding, dilation, groups, bias is not None,
               gemm.tf32_allowed())
        with self.lock:
            plan = self.plans.get(key, False)
            if plan is False:
                if len(self.plans) >= PLAN_LIMIT:
                    self.plans.clear()
                plan = self.plans[key] = self._plan(kind, dtype, *shapes, stride, padding,
                                                    dilation, groups, bias is not None)
        if plan is None:
            return None
        runtime = self.runtime
        itemsize = runtime.generator.storage_numpy(dtype).itemsize
        out = self._new(a, out_shape)
        workspace = runtime.pool.alloc(plan.workspace) if plan.workspace else None
        reads = [a.buffer.handle, b.buffer.handle]
        writes = [out.buffer.handle] + ([workspace.handle] if workspace else [])
        if bias is not None:
            reads.append(bias.buffer.handle)
        runtime.call(self._enqueue, (plan, _address(a, itemsize), _address(b, itemsize),
                                     workspace.handle.ptr if workspace else 0,
                                     None if bias is None else _address(bias, itemsize),
                                     _address(out, itemsize)),
                     reads, writes, plan)
        runtime.launches += 1 + (bias is not None)
        return out

    def _enqueue(self, plan: _Plan, a: ctypes.c_void_p, b: ctypes.c_void_p, workspace: int,
                 bias: ctypes.c_void_p | None, out: ctypes.c_void_p) -> None:
        """Enqueue one planned pass (and its bias) on the runtime's stream."""
        lib, work = self.lib, ctypes.c_void_p(workspace)
        with self.lock, _current(self.runtime):
            if plan.kind == _FORWARD:  # y = conv(x, w)
                self._check(lib.cudnnConvolutionForward(
                    self.handle, plan.alpha, plan.x, a, plan.w, b, plan.conv, plan.algo, work,
                    plan.workspace, plan.beta, plan.y, out), "cudnnConvolutionForward")
                out_desc = plan.y
            elif plan.kind == _DATA:  # dx from dy and w
                self._check(lib.cudnnConvolutionBackwardData(
                    self.handle, plan.alpha, plan.w, b, plan.y, a, plan.conv, plan.algo, work,
                    plan.workspace, plan.beta, plan.x, out), "cudnnConvolutionBackwardData")
                out_desc = plan.x
            else:  # dw from x and dy
                self._check(lib.cudnnConvolutionBackwardFilter(
                    self.handle, plan.alpha, plan.x, a, plan.y, b, plan.conv, plan.algo, work,
                    plan.workspace, plan.beta, plan.w, out), "cudnnConvolutionBackwardFilter")
                out_desc = None
            if bias is not None:
                self._check(lib.cudnnAddTensor(
                    self.handle, plan.alpha, plan.bias, bias, plan.alpha, out_desc, out),
                    "cudnnAddTensor")

    def _plan(self, kind, dtype, x_shape, w_shape, out_shape, stride, padding, dilation,
              groups, has_bias) -> _Plan | None:
        """Descriptors, algorithm and workspace of pass ``kind`` for one shape; None where
        cuDNN refuses."""
        spatial = len(x_shape) - 2
        if dtype not in _TYPES or not 1 <= spatial <= 3 or min(x_shape + w_shape) == 0 \
                or min(out_shape) <= 0:
            return None
        data, compute, scalar = _TYPES[dtype]
        if spatial == 1:  # as 2-d with a height of 1: cuDNN's tensors have 4 dims or more
            x_shape, w_shape, out_shape = (x_shape[:2] + (1,) + x_shape[2:],
                                           w_shape[:2] + (1,) + w_shape[2:],
                                           out_shape[:2] + (1,) + out_shape[2:])
            stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
        lib, ok = self.lib, 0
        plan = _Plan()
        plan.kind = kind
        plan.x, plan.y = self._tensor(data, x_shape), self._tensor(data, out_shape)
        plan.w = ctypes.c_void_p()
        ok |= lib.cudnnCreateFilterDescriptor(ctypes.byref(plan.w))
        ok |= lib.cudnnSetFilterNdDescriptor(plan.w, data, _NCHW, len(w_shape), _ints(w_shape))
        plan.conv = ctypes.c_void_p()
        ok |= lib.cudnnCreateConvolutionDescriptor(ctypes.byref(plan.conv))
        ok |= lib.cudnnSetConvolutionNdDescriptor(plan.conv, len(stride), _ints(padding),
                                                  _ints(stride), _ints(dilation),
                                                  _CROSS_CORRELATION, compute)
        ok |= lib.cudnnSetConvolutionGroupCount(plan.conv, groups)
        if dtype == "float32":  # TF32 only where the user allowed it, as for products
            math = _DEFAULT_MATH if gemm.tf32_allowed() else _FMA_MATH
        else:
            math = _TENSOR_OP_MATH if dtype in ("float16", "bfloat16") else _DEFAULT_MATH
        ok |= lib.cudnnSetConvolutionMathType(plan.conv, math)
        if ok or plan.x is None or plan.y is None:
            return None
        dims = (ctypes.c_int * len(out_shape))()
        if lib.cudnnGetConvolutionNdForwardOutputDim(plan.conv, plan.x, plan.w, len(out_shape),
                                                     dims) or tuple(dims) != out_shape:
            return None
        perf, count = (_AlgoPerf * _ALGORITHMS)(), ctypes.c_int()
        with _current(self.runtime):
            # Timed (as torch.backends.cudnn.benchmark): cuDNN's heuristics pick kernels several
            # times slower than the best for some shapes (ResNet-18's 3x3 convolutions in float32
            # without TF32). Once per shape; the ranking comes fastest first.
            find, heuristics, workspace_of = (getattr(lib, name) for name in _CALLS[kind])
            # Forward: (x, w, conv, y); backward data: (w, dy, conv, dx); filter: (x, dy, conv,
            # dw).
            descriptors = {_FORWARD: (plan.x, plan.w, plan.conv, plan.y),
                           _DATA: (plan.w, plan.y, plan.conv, plan.x),
                           _FILTER: (plan.x, plan.y, plan.conv, plan.w)}[kind]
            if not BENCHMARK or find(self.handle, *descriptors, _ALGORITHMS,
                                     ctypes.byref(count), perf):
                if heuristics(self.handle, *descriptors, _ALGORITHMS, ctypes.byref(count),
                              perf):
                    return None
            for choice in perf[:count.value]:
                if choice.status == 0 and (
                        choice.memory > WORKSPACE_LIMIT or choice.determinism != _DETERMINISTIC
                        or (choice.math_type == _TENSOR_OP_MATH and math != _TENSOR_OP_MATH)):
                    # Too much workspace, results that vary from run to run, or tensor cores
                    # where TF32 is not allowed.
                    continue
                size = ctypes.c_size_t()
                if choice.status == 0 and not workspace_of(self.handle, *descriptors,
                                                           choice.algo, ctypes.byref(size)):
                    plan.algo, plan.workspace = choice.algo, size.value
                    break
            else:
                return None
        if has_bias:
            channels = out_shape[1] if kind == _FORWARD else x_shape[1]
            plan.bias = self._tensor(data, (1, channels) + (1,) * (len(out_shape) - 2))
            if plan.bias is None:
                return None
        # alpha and beta live as long as the plan; the calls take their addresses.
        plan.scalars = (scalar(1.0), scalar(0.0))
        plan.alpha = ctypes.c_void_p(ctypes.addressof(plan.scalars[0]))
        plan.beta = ctypes.c_void_p(ctypes.addressof(plan.scalars[1]))
        return plan

    def _tensor(self, data: int, shape: tuple[int, ...]) -> ctypes.c_void_p | None:
        desc = ctypes.c_void_p()
        if self.lib.cudnnCreateTensorDescriptor(ctypes.byref(desc)) or \
                self.lib.cudnnSetTensorNdDescriptor(desc, data, len(shape), _ints(shape),
                                                    _ints(contiguous_strides(shape))):
            return None
        return desc


def _address(x: JitTensor, itemsize: int) -> ctypes.c_void_p:
    return ctypes.c_void_p(x.buffer.handle.ptr + x.offset * itemsize)


class _current:
    """The runtime's device made current for the calls inside (cuDNN runs on the device its
    handle was made on), at the cost of a check where it already is."""

    __slots__ = ("runtime", "switched")

    def __init__(self, runtime: Any):
        self.runtime = runtime

    def __enter__(self) -> None:
        runtime = self.runtime
        self.switched = _get_device() != runtime.index
        if self.switched:
            runtime.cuda_device.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self.switched:
            self.runtime.cuda_device.__exit__(*exc)
