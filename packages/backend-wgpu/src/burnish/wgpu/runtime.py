"""``WgpuRuntime``: one WebGPU adapter through wgpu-py; launches are recorded and submitted in
batches, and reading data back is the one synchronisation."""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from burnish.jit import ir
from burnish.jit.codegen.wgsl import WgslGenerator
from burnish.jit.runtime import Runtime

# wgpu-py logs a harmless complaint from Mesa's loader when this is unset (headless machines).
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import wgpu  # noqa: E402  (the environment above must be set first)

_STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST

#: Optional adapter features burnish uses when the adapter has them.
OPTIONAL_FEATURES = ("shader-f16", "shader-int64")

#: Recorded launches are submitted once this many are waiting...
SUBMIT_EVERY = 64
#: ... or once they add up to this many workgroups (a few hundred thousand invocations).
SUBMIT_GROUPS = 1024
#: Metadata buffers and bind groups kept for reuse, each (the oldest go first).
CACHED = 1024


def adapters() -> list[Any]:
    """Every compute-capable adapter, discrete GPUs first, then integrated, virtual and CPU."""
    order = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "CPU": 3}
    found = [a for a in wgpu.gpu.enumerate_adapters_sync()
             if a.info.get("backend_type") not in ("OpenGL", "Empty")]
    return sorted(found, key=lambda a: order.get(a.info.get("adapter_type"), 4))


def _checks_wanted() -> bool:
    """``BURNISH_WGPU_CHECKED=1``: every kernel keeps wgpu's runtime checks."""
    return os.environ.get("BURNISH_WGPU_CHECKED", "0").lower() not in ("0", "false", "off", "no")


#: A shader that compiles where naga has WGSL's packed 8-bit dot products (quantized products
#: multiply with them; older wgpu-py versions' naga lacks them).
PACKED_DOT_PROBE = """@compute @workgroup_size(1) fn probe() {
    _ = dot4I8Packed(1u, 1u);
}"""


def _compiles(device: Any, source: str) -> bool:
    """Whether ``source`` compiles on ``device``."""
    try:
        device.create_shader_module(code=source)
    except Exception:  # wgpu's validation error, whatever this version calls it
        return False
    return True


def _unchecked_module(device: Any, source: str) -> Any:
    """``source`` as a shader module without wgpu's injected runtime checks, through
    wgpu-native's ``wgpuDeviceCreateShaderModuleTrusted`` (which wgpu-py does not wrap); None
    where this wgpu-py cannot make one (the caller then makes a checked one)."""
    if _checks_wanted():
        return None
    try:
        from wgpu.backends.wgpu_native import _api

        ffi, lib = _api.ffi, _api.lib
        create = _api.libf.wgpuDeviceCreateShaderModuleTrusted
        wgsl = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(source))
        wgsl[0].chain.next = ffi.NULL
        wgsl[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
        descriptor = _api.new_struct_p("WGPUShaderModuleDescriptor *",
                                       nextInChain=ffi.cast("WGPUChainedStruct *", wgsl),
                                       label=_api.to_c_string_view(""))
        handle = create(device._internal, descriptor, lib.WGPUShaderRuntimeChecks_None)
        if handle == ffi.NULL:
            return None
        return _api.GPUShaderModule("", handle, device)
    except (ImportError, AttributeError, TypeError):  # another wgpu-py's internals
        return None


def _locked(method):
    """``method`` under the runtime's lock: one command encoder is shared by every thread."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


class WgpuRuntime(Runtime):
    """One adapter's device and queue."""

    generator = WgslGenerator()

    def __init__(self, adapter: Any):
        super().__init__()
        self.adapter = adapter
        self.features = {f for f in OPTIONAL_FEATURES if f in adapter.features}
        limits = dict(adapter.limits)
        wanted = {k: limits[k] for k in (
            "max-storage-buffers-per-shader-stage", "max-storage-buffer-binding-size",
            "max-buffer-size", "max-compute-workgroup-storage-size",
            "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
            "max-bind-groups", "max-bindings-per-bind-group") if k in limits}
        self.device = adapter.request_device_sync(required_features=sorted(self.features),
                                                  required_limits=wanted)
        self.limits = dict(self.device.limits)
        # Every kernel binds its info buffer beside its data buffers.
        self.max_buffers = self.limits.get("max-storage-buffers-per-shader-stage", 8) - 1
        self.queue = self.device.queue
        self._encoder = None
        self._pending = 0
        self._work = 0
        self._keepalive: list[Any] = []
        self._checked = True  # compile with wgpu's runtime checks (see ``kernel``)
        self._infos: OrderedDict[bytes, Any] = OrderedDict()
        self._binds: OrderedDict[tuple, Any] = OrderedDict()
        if not _compiles(self.device, PACKED_DOT_PROBE):
            self.generator = WgslGenerator(packed_dot=False)

    def describe(self) -> str:
        info = self.adapter.info
        return f"{info.get('device', '?')} ({info.get('backend_type', '?')})"

    def kernel_checks(self) -> str:
        """How burnish.jit's kernels are compiled here (``python -m burnish info``)."""
        if _checks_wanted():
            return "with wgpu's runtime checks (BURNISH_WGPU_CHECKED=1)"
        if _unchecked_module(self.device, "@compute @workgroup_size(1) fn probe() {}") is None:
            return "with wgpu's runtime checks (this wgpu-py cannot compile without them)"
        return "without wgpu's runtime checks"

    # -- buffers --------------------------------------------------------------------------------

    def allocate(self, nbytes: int) -> Any:
        return self.device.create_buffer(size=max(nbytes, 16), usage=_STORAGE)

    @_locked
    def free(self, handle: Any) -> None:
        # Destroying a buffer that recorded work still uses would break that work; waiting for
        # it first is rare (only when the pool trims) and keeps this simple.
        self.flush()
        handle.destroy()

    def _encoder_now(self):
        if self._encoder is None:
            self._encoder = self.device.create_command_encoder()
        return self._encoder

    @_locked
    def write(self, handle: Any, offset: int, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).ravel()
        size = raw.nbytes
        if size == 0:
            return
        padded = -(-size // 4) * 4
        if padded != size:
            raw = np.concatenate([raw, np.zeros(padded - size, np.uint8)])
        # A staging buffer copied by a recorded command keeps the write in order with the
        # launches around it (queue.write_buffer would run before everything recorded).
        staging = self.device.create_buffer_with_data(data=raw, usage=wgpu.BufferUsage.COPY_SRC)
        self._encoder_now().copy_buffer_to_buffer(staging, 0, handle, offset, padded)
        self._keepalive.append(staging)
        self._count()

    @_locked
    def copy(self, src: Any, src_offset: int, dst: Any, dst_offset: int, nbytes: int) -> None:
        if nbytes:
            self._encoder_now().copy_buffer_to_buffer(src, src_offset, dst, dst_offset,
                                                      -(-nbytes // 4) * 4)
            self._count()

    @_locked
    def read(self, items: Sequence[tuple[Any, int, int]]) -> list[bytes]:
        # Copies start and end on 4-byte boundaries: 2-byte items may start mid-word.
        skips = [offset % 4 if n else 0 for _, offset, n in items]
        sizes = [-(-(n + skip) // 4) * 4 for (_, _, n), skip in zip(items, skips)]
        total = sum(sizes)
        if total == 0:
            return [b"" for _ in items]
        staging = self.device.create_buffer(
            size=total, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        encoder = self._encoder_now()
        at = 0
        for (handle, offset, _), skip, size in zip(items, skips, sizes):
            if size:
                encoder.copy_buffer_to_buffer(handle, offset - skip, staging, at, size)
            at += size
        self.flush()
        staging.map_sync(mode=wgpu.MapMode.READ)
        data = bytes(staging.read_mapped())
        staging.unmap()
        staging.destroy()
        out, at = [], 0
        for (_, _, n), skip, size in zip(items, skips, sizes):
            out.append(data[at + skip:at + skip + n])
            at += size
        return out

    # -- kernels --------------------------------------------------------------------------------

    def kernel(self, key: Any, build) -> tuple[Any, ir.Kernel]:
        # burnish.jit's own kernels never index outside their bindings or loop without bound,
        # so wgpu compiles them without the bounds checks and loop counters it injects into
        # arbitrary shaders (OpenCL and CUDA kernels have none either); custom kernels, whose
        # keys start with "custom", keep them, and BURNISH_WGPU_CHECKED=1 keeps them for all.
        entry = self._kernels.get(key)
        if entry is not None:
            return entry[0], entry[1]
        with self._lock:
            self._checked = isinstance(key, tuple) and key[:1] == ("custom",)
            try:
                return super().kernel(key, build)
            finally:
                self._checked = True

    def compile(self, kernel: ir.Kernel, source: str) -> Any:
        entries = [{"binding": i, "visibility": wgpu.ShaderStage.COMPUTE,
                    "buffer": {"type": "storage" if b.writable else "read-only-storage"}}
                   for i, b in enumerate(kernel.buffers)]
        entries.append({"binding": len(kernel.buffers), "visibility": wgpu.ShaderStage.COMPUTE,
                        "buffer": {"type": "read-only-storage"}})
        layout = self.device.create_bind_group_layout(entries=entries)
        module = (None if self._checked else _unchecked_module(self.device, source)) \
            or self.device.create_shader_module(code=source)
        pipeline = self.device.create_compute_pipeline(
            layout=self.device.create_pipeline_layout(bind_group_layouts=[layout]),
            compute={"module": module, "entry_point": kernel.name})
        return pipeline, layout

    @_locked
    def dispatch(self, compiled: Any, handles: Sequence[Any], info: np.ndarray,
                 groups: tuple[int, int, int]) -> None:
        pipeline, layout = compiled
        self.launches += 1
        # Metadata buffers and bind groups are kept and reused: a training loop launches the
        # same kernels on the same pooled buffers with the same shapes, step after step.
        info_key = info.tobytes()
        info_buffer = self._infos.get(info_key)
        if info_buffer is None:
            info_buffer = self._info_buffer(info)
            self._remember(self._infos, info_key, info_buffer)
        bind_key = (id(layout), id(info_buffer), *map(id, handles))
        found = self._binds.get(bind_key)
        if found is None:
            bind_group = self._bind_group(layout, handles, info_buffer)
            # The entry holds what its key names, so no id in it can be reused meanwhile.
            self._remember(self._binds, bind_key, (bind_group, layout, info_buffer, *handles))
        else:
            bind_group = found[0]
        compute = self._encoder_now().begin_compute_pass()
        try:
            compute.set_pipeline(pipeline)
            compute.set_bind_group(0, bind_group)
            compute.dispatch_workgroups(*groups)
        finally:
            compute.end()
        # A large launch is submitted at once, so the GPU starts on it while Python records
        # the next ones; small ones wait to go together.
        self._work += groups[0] * groups[1] * groups[2]
        if self._work >= SUBMIT_GROUPS:
            self.flush()
        else:
            self._count()

    def _info_buffer(self, info: np.ndarray) -> Any:
        """A launch's metadata words in a buffer of their own."""
        return self.device.create_buffer_with_data(data=info, usage=wgpu.BufferUsage.STORAGE)

    def _bind_group(self, layout: Any, handles: Sequence[Any], info_buffer: Any) -> Any:
        """The bind group of a launch: its buffers in order, then its metadata."""
        entries = [{"binding": i, "resource": {"buffer": h}} for i, h in enumerate(handles)]
        entries.append({"binding": len(handles), "resource": {"buffer": info_buffer}})
        return self.device.create_bind_group(layout=layout, entries=entries)

    def replayer(self, commands: Sequence[tuple]):
        """A capture's commands encoded again on every replay (WebGPU's command buffers run
        once), with all that can be made once made once: each launch's metadata buffer and
        bind group. Consecutive launches share one compute pass, and the work goes to the
        queue every ``SUBMIT_EVERY`` launches (the GPU starts while the rest is encoded)
        rather than after every large launch, as eager launches go."""
        steps: list[tuple] = []  # (pipeline, bind group, grid) or (function, arguments)
        for command in commands:
            if command[0] != "launch":
                steps.append(self.program([command])[0])
                continue
            (pipeline, layout), handles, info, groups = command[1:]
            bind_group = self._bind_group(layout, handles, self._info_buffer(info))
            steps.append((pipeline, bind_group, groups))
        copy = type(self).copy.__get__(self)

        @_locked
        def replay(runtime: WgpuRuntime, copies: Sequence[tuple]) -> None:
            for src, dst, start, end, _ in copies:
                copy(src, start, dst, start, end - start)
            compute, launched = None, 0
            try:
                for step in steps:
                    if len(step) == 2:  # a write or copy: outside any compute pass
                        if compute is not None:
                            compute.end()
                            compute = None
                        step[0](*step[1])
                        continue
                    if compute is None:
                        compute = runtime._encoder_now().begin_compute_pass()
                    compute.set_pipeline(step[0])
                    compute.set_bind_group(0, step[1])
                    compute.dispatch_workgroups(*step[2])
                    launched += 1
                    if launched % SUBMIT_EVERY == 0:
                        compute.end()
                        compute = None
                        runtime.flush()
            finally:
                if compute is not None:
                    compute.end()
                runtime.launches += launched
            runtime.flush()

        return lambda copies: replay(self, copies)

    def _remember(self, cache: OrderedDict, key: Any, value: Any) -> None:
        """Keep ``value`` in ``cache``; the oldest entry beyond ``CACHED`` is let go once the
        work recorded so far is submitted."""
        cache[key] = value
        if len(cache) > CACHED:
            self._keepalive.append(cache.popitem(last=False)[1])

    def _count(self) -> None:
        self._pending += 1
        if self._pending >= SUBMIT_EVERY:
            self.flush()

    @_locked
    def flush(self) -> None:
        """Submit what is recorded (without waiting for it)."""
        encoder, self._encoder = self._encoder, None
        self._pending = 0
        self._work = 0
        self._keepalive = []
        if encoder is not None:
            self.queue.submit([encoder.finish()])

    def sync(self) -> None:
        # Reading back a few bytes waits for everything submitted before it.
        self.read([(self._probe(), 0, 4)])

    def _probe(self) -> Any:
        buf = getattr(self, "_probe_buffer", None)
        if buf is None:
            buf = self._probe_buffer = self.device.create_buffer(size=16, usage=_STORAGE)
        return buf
