"""Custom kernels: a user's own kernel, hand-written in a backend's language or built in the IR,
called on tensors like any tensor op.

::

    @custom_kernel("scale_add", build=build_ir)          # IR: runs on wgpu, rocm (and cuda)
    def scale_add(x, y):
        return Launch(x.dims(), x.dtype, info=[x.numel()], invocations=x.numel())

    out = scale_add(a, b)                                 # Tensors in, a Tensor out

Parameters, in order: the output buffer (written), the inputs (read, plain row-major with no
offset: views are copied first) and last the ``info`` words (int32). In WGSL they are
``@group(0) @binding(0..n+1)`` (``var<storage, read_write>`` for the output, ``var<storage,
read>`` for the inputs and ``info: array<i32>``); in OpenCL C the kernel's parameters
(``__global T* out, __global const T* in..., __global const int* info``); in CUDA C as the
CUDA generator declares them (``CudaGenerator().generate`` of any kernel shows how). The entry
point is the kernel's name.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from burnish.backend import AutodiffOps
from burnish.dtype import DType, get_dtype
from burnish.errors import AutodiffError, DeviceError, DTypeError, UnsupportedError
from burnish.jit import ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels.elementwise import elementwise
from burnish.jit.runtime import MAX_GROUPS_X

_ids = itertools.count()


@dataclass(frozen=True)
class Launch:
    """What one call of a custom kernel computes: the output's ``shape`` and ``dtype``, the
    ``info`` words the kernel reads, and its grid: ``invocations`` (a 1-d count, rounded up to
    whole workgroups and split across x and y like the built-in kernels; ``KernelBuilder``'s
    ``global_index()`` undoes the split), ``groups`` (that many 1-d workgroups, split the same
    way) or ``groups=(x, y, z)`` (exactly that grid)."""

    shape: Sequence[int]
    dtype: DType | str
    info: Sequence[int] = ()
    invocations: int | None = None
    groups: int | tuple[int, int, int] | None = None


class CustomKernel:
    """A kernel called as a tensor op; made by ``custom_kernel``, which documents the
    arguments."""

    def __init__(self, name: str, launch: Callable[..., Launch], *,
                 build: Callable[..., None] | None = None,
                 sources: Mapping[str, str] | None = None,
                 workgroup: tuple[int, int, int] = (256, 1, 1),
                 dtypes: Sequence[DType | str] | None = None):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"custom kernel: the name is the entry point and must be an "
                             f"identifier, got {name!r}")
        sources = {lang: text for lang, text in (sources or {}).items() if text is not None}
        if build is None and not sources:
            raise ValueError(f"custom kernel {name!r}: give build= (an IR kernel) or the source "
                             "in at least one language (wgsl=, opencl=, cuda=)")
        if sources and build is None and dtypes is None:
            raise ValueError(f"custom kernel {name!r}: hand-written source is written for given "
                             "storage types; say which with dtypes=")
        if len(workgroup) != 3:
            raise ValueError(f"custom kernel {name!r}: workgroup is (x, y, z), got {workgroup}")
        self.name = name
        self.launch = launch
        self.build = build
        self.sources = sources
        self.workgroup = tuple(int(w) for w in workgroup)
        self.dtypes = None if dtypes is None else tuple(get_dtype(d) for d in dtypes)
        self._id = next(_ids)
        self.__doc__ = launch.__doc__
        self.__name__ = getattr(launch, "__name__", name)

    def __repr__(self) -> str:
        languages = sorted(self.sources) + (["IR: every backend"] if self.build else [])
        return f"CustomKernel({self.name!r}, {', '.join(languages)})"

    # -- calling --------------------------------------------------------------------------------

    def __call__(self, *inputs: Any) -> Any:
        """The kernel's output for ``inputs`` (tensors of one device of a ``burnish.jit``
        backend), as a new tensor. Enqueued like every op: reading the result waits for it."""
        plain, wrap = self._unwrap(inputs)
        device = plain[0].device
        backend = device.backend
        plan, out_dtype = self._plan(plain)
        shape = tuple(int(s) for s in plan.shape)
        runtime = backend.runtime(device)
        out = backend._new(shape, out_dtype, device, runtime)
        prims = [self._plain_primitive(t.primitive) for t in plain]
        if out.numel:
            key, build = self._compiled(runtime, [t.dtype for t in plain], out_dtype)
            buffers = [out.buffer, *(p.buffer for p in prims)]
            info = [int(w) for w in plan.info]
            if isinstance(plan.groups, tuple):
                groups = tuple(int(g) for g in plan.groups)
                if len(groups) != 3 or min(groups) < 1 or max(groups) > MAX_GROUPS_X:
                    raise UnsupportedError(
                        f"custom kernel {self.name!r}: groups must be three counts in "
                        f"1..{MAX_GROUPS_X}, got {plan.groups}")
                compiled, _ = runtime.kernel(key, build)
                meta = np.asarray(info if info else [0], dtype=np.int32)
                runtime.dispatch(compiled, [b.handle for b in buffers], meta, groups)
            else:
                runtime.launch(key, build, buffers, info, invocations=plan.invocations,
                               groups=plan.groups)
        from burnish import Tensor

        result = Tensor.from_primitive(out, device, out_dtype)
        return wrap(result)

    def source(self, *inputs: Any) -> str:
        """The source that runs for ``inputs`` on their device (compiled now if it was not):
        the hand-written source, or the one generated from the IR for the inputs' dtypes."""
        plain, _ = self._unwrap(inputs)
        device = plain[0].device
        _, out_dtype = self._plan(plain)
        runtime = device.backend.runtime(device)
        key, build = self._compiled(runtime, [t.dtype for t in plain], out_dtype)
        runtime.kernel(key, build)
        return runtime.source_of(key)

    # -- checks ---------------------------------------------------------------------------------

    def _unwrap(self, inputs: Sequence[Any]) -> tuple[list[Any], Callable[[Any], Any]]:
        """The inputs as tensors of a jit backend, and how to wrap the output back (an autodiff
        backend's inputs run on its inner backend; they must not need gradients)."""
        from burnish import Tensor
        from burnish.jit.backend.base import JitBase

        if not inputs:
            raise TypeError(f"custom kernel {self.name!r}: called with no tensors")
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError(f"custom kernel {self.name!r}: input {i} is a "
                                f"{type(t).__name__}, not a Tensor")
        first = inputs[0]
        for i, t in enumerate(inputs[1:], 1):
            if t.device != first.device:
                raise DeviceError(f"custom kernel {self.name!r}: input 0 is on "
                                  f"{first.backend.name} {first.device}, input {i} on "
                                  f"{t.backend.name} {t.device}")
        backend = first.backend
        plain, wrap = list(inputs), _identity
        if isinstance(backend, AutodiffOps):
            tracked = [i for i, t in enumerate(inputs) if t.is_require_grad()]
            if tracked:
                raise AutodiffError(
                    f"custom kernel {self.name!r} has no gradient, and input {tracked[0]} "
                    "requires grad: detach() the inputs (inference), or write the op from "
                    "tensor ops to get gradients")
            plain = [t.inner() for t in inputs]
            wrap = _rewrap(backend)
        inner = plain[0].backend
        if not isinstance(inner, JitBase):
            raise UnsupportedError(
                f"custom kernel {self.name!r} runs on the GPU backends of burnish.jit (wgpu, "
                f"rocm), not on backend {backend.name!r}: move the tensors with "
                "to_device(burnish.backend('wgpu').default_device())")
        language = inner.runtime(plain[0].device).generator.language
        if self.build is None and language not in self.sources:
            have = ", ".join(sorted(self.sources))
            raise UnsupportedError(
                f"custom kernel {self.name!r} is written in {have} only, and backend "
                f"{inner.name!r} compiles {language}: add {language}= source, or write the "
                "kernel in the IR (build=) to run it on every backend")
        if self.dtypes is not None:
            for i, t in enumerate(plain):
                if t.dtype not in self.dtypes:
                    allowed = ", ".join(d.name for d in self.dtypes)
                    raise DTypeError(f"custom kernel {self.name!r} takes {allowed}; input {i} "
                                     f"is {t.dtype}")
        return plain, wrap

    def _plan(self, plain: list[Any]) -> tuple[Launch, DType]:
        plan = self.launch(*plain)
        if not isinstance(plan, Launch):
            raise TypeError(f"custom kernel {self.name!r}: the launch function must return a "
                            f"Launch, got {type(plan).__name__}")
        if (plan.invocations is None) == (plan.groups is None):
            raise ValueError(f"custom kernel {self.name!r}: Launch needs exactly one of "
                             "invocations= and groups=")
        out_dtype = get_dtype(plan.dtype)
        device = plain[0].device
        supported = device.backend.dtypes(device)
        if out_dtype not in supported:
            raise DTypeError(f"custom kernel {self.name!r}: output dtype {out_dtype} is not "
                             f"available on {device.backend.name} {device}")
        return plan, out_dtype

    @staticmethod
    def _plain_primitive(x: Any) -> Any:
        """``x`` row-major from element 0 of its buffer (a copy when it is a view)."""
        if x.is_contiguous() and x.offset == 0:
            return x
        return elementwise("copy", lambda v, s: v[0], [x], x.dtype)

    # -- compiling ------------------------------------------------------------------------------

    def _compiled(self, runtime: Any, in_dtypes: list[DType], out_dtype: DType
                  ) -> tuple[tuple, Callable[[], Any]]:
        """The cache key and build function of this kernel for these dtypes on ``runtime``."""
        language = runtime.generator.language
        names = tuple(d.name for d in in_dtypes)
        if language in self.sources:
            source = self.sources[language]
            digest = hashlib.sha256(source.encode()).hexdigest()[:16]
            key = ("custom", self.name, self._id, digest, names, out_dtype.name)

            def build() -> tuple[ir.Kernel, str]:
                buffers = [ir.Buffer("out", out_dtype.name, True),
                           *(ir.Buffer(f"in{i}", n) for i, n in enumerate(names))]
                return ir.Kernel(self.name, buffers, self.workgroup, [], []), source

            return key, build
        key = ("custom", self.name, self._id, "ir", names, out_dtype.name)

        def build_ir() -> ir.Kernel:
            k = KernelBuilder(self.name, self.workgroup)
            out = k.buffer("out", out_dtype, writable=True)
            ins = [k.buffer("in", n) for n in names]
            self.build(k, out, *ins)
            return k.build()

        return key, build_ir


def custom_kernel(name: str, *, build: Callable[..., None] | None = None,
                  wgsl: str | None = None, opencl: str | None = None, cuda: str | None = None,
                  workgroup: tuple[int, int, int] = (256, 1, 1),
                  dtypes: Sequence[DType | str] | None = None
                  ) -> Callable[[Callable[..., Launch]], CustomKernel]:
    """Decorate a launch function to make a custom kernel, called on tensors as a tensor op.

    The decorated function receives the input tensors (already checked to share one device of a
    ``burnish.jit`` backend), checks their shapes (raise ``burnish.ShapeError``) and returns a
    ``Launch``: the output's shape and dtype, the ``info`` words and the grid.

    The kernel is either built in the IR, ``build(k, out, *inputs)`` with a ``KernelBuilder``
    ``k`` and the ``ir.Buffer`` parameters (the output and one per input, typed by the call's
    dtypes), which runs on every backend, compiled once per dtypes; or hand-written source in
    one or more languages (``wgsl=`` for wgpu, ``opencl=`` for rocm, ``cuda=``), with
    ``dtypes=`` naming the input dtypes it is written for (a call with others raises
    ``DTypeError``). When both are given, a backend uses its language's source and falls back
    to the IR. ``workgroup`` is the workgroup shape the source declares (or the IR kernel uses).

    Errors at call time: ``UnsupportedError`` for a backend outside ``burnish.jit`` or whose
    language the kernel lacks, ``DeviceError`` for inputs on different devices, ``DTypeError``
    for a dtype outside ``dtypes=`` or an output dtype the device lacks, ``AutodiffError`` when
    an input of an autodiff backend requires grad (custom kernels have no gradient; inputs that
    do not require grad run on the inner backend and give an untracked tensor).
    """
    sources = {"wgsl": wgsl, "opencl": opencl, "cuda": cuda}

    def decorate(launch: Callable[..., Launch]) -> CustomKernel:
        return CustomKernel(name, launch, build=build, sources=sources, workgroup=workgroup,
                            dtypes=dtypes)

    return decorate


def _identity(x: Any) -> Any:
    return x


def _rewrap(backend: Any) -> Callable[[Any], Any]:
    def wrap(result: Any) -> Any:
        from burnish import Tensor

        return Tensor.from_inner(result, backend)

    return wrap
