"""Exporting a captured inference: the forward pass recorded on wgpu (``burnish.jit.capture``)
and written out as a folder a browser runs.

The folder holds:

- ``model.json``: the kernels (each one's WGSL, its bindings and workgroup shape), the buffers
  (sizes, and which hold constants), the commands in order (launches with their buffers,
  metadata words and grid; copies; host writes), the inputs and the outputs;
- ``weights.safetensors``: the constants (the module's parameters under their names, any other
  buffer the forward pass reads under ``constants.buffer<N>``);
- ``kernels.js``: the same kernels rendered from ``burnish.jit``'s IR as plain JavaScript, run by
  the fallback where the browser has no WebGPU (loaded only then);
- ``burnish.js``: the runtime, an ES module with no dependencies (``load``, ``Model.run``).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy

import burnish as bn
from burnish import Tensor
from burnish.errors import CaptureError
from burnish.jit import ir
from burnish.jit.capture import same_work
from burnish.jit.codegen.js import ARRAYS, HELPERS, JsGenerator
from burnish.jit.codegen.wgsl import WgslGenerator
from burnish.record.atomic import atomic_write
from burnish.web.narrow import as_int32, uses_int64

#: ``model.json``'s ``format`` and ``version``: what ``burnish.js`` checks before it runs one.
FORMAT = "burnish-web"
VERSION = 1

#: Storage dtypes the browser runs: WebGPU has no 64-bit types, and ``shader-f16`` is optional.
SUPPORTED = frozenset(ARRAYS)

_SAFETENSORS_DTYPES = {"float32": "F32", "int32": "I32", "uint32": "U32", "uint8": "U8"}


class ExportError(ValueError):
    """What makes a module's forward pass impossible to run in a browser."""


@dataclass
class Exported:
    """What ``export`` wrote: the folder, the example inputs it recorded with and the outputs
    burnish computed for them (what the browser must reproduce)."""

    path: Path
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    kernels: list[str] = field(default_factory=list)
    launches: int = 0


def export(model: Callable[..., Any], inputs: Sequence[Any], out: str | Path, *,
           device: Any = None, seed: int = 0) -> Exported:
    """Record ``model``'s forward pass on wgpu for ``inputs`` and write it to the folder ``out``.

    ``model`` is a module (moved to the wgpu device) or any function of tensors that returns a
    tensor or a sequence of tensors. Each of ``inputs`` is a shape (a tuple of ints: a random
    float32 example is drawn with ``seed``), a NumPy array or a ``Tensor``; the export runs for
    exactly these shapes and dtypes. ``device``: a wgpu device (default: wgpu's default).

    Raises ExportError naming the op when the forward pass cannot run in a browser: a library
    call with no WGSL, a read of values on the host, a number computed in Python that changes
    between calls, state updated in place, or a dtype that WebGPU lacks (float64, float16).
    int64 (burnish's indices) is held as int32 in the browser (``burnish.web.narrow``).
    """
    if device is None:
        device = bn.backend("wgpu").default_device()
    backend = device.backend
    if getattr(backend, "name", None) != "wgpu":
        raise ExportError(f"burnish.web exports from a wgpu device; got {device} "
                          f"(backend {getattr(backend, 'name', backend)!r})")
    if hasattr(model, "to_device"):
        model = model.to_device(device)
    rng = np.random.default_rng(seed)
    arrays = [_example(x, rng, i) for i, x in enumerate(inputs)]
    if not arrays:
        raise ExportError("export needs at least one input (a shape, an array or a tensor)")
    tensors = [Tensor.from_data(a, device=device) for a in arrays]
    expected = [t.to_numpy() for t in _outputs(model(*tensors))]  # warms caches and autotune

    # Recorded twice, as burnish.capture records: a number computed on the host that changes
    # from call to call (a counter, a seed kept in Python) would be frozen in the export, and
    # shows up as two recordings that differ.
    capturer = backend.capturer(device)
    runtime = capturer.runtime
    leaves = [capturer.leaf(t.primitive) for t in tensors]
    first, _ = _recorded(capturer, model, tensors, leaves)
    recorder, results = _recorded(capturer, model, tensors, leaves)
    problem = recorder.problem() or first.problem() or same_work(first, recorder)
    if problem is not None:
        raise ExportError(f"cannot export: {problem}")
    for command, where in zip(recorder.commands, recorder.locations):
        if command[0] == "call":
            name = getattr(command[1], "__name__", command[1])
            raise ExportError(f"cannot export: a library call ({name}) at {where} has no WGSL "
                              f"kernel")
    try:
        record = capturer.record(recorder, leaves, [r.primitive for r in results])
        record.prepare()  # the commands with their memory packed, as a replay runs them
    except CaptureError as error:
        raise ExportError(f"cannot export: {error}") from None
    try:
        return _write(Path(out), runtime, recorder, record, model, arrays, expected)
    finally:
        record.release()


def _recorded(capturer: Any, model: Callable[..., Any], tensors: list[Tensor],
              leaves: list[Any]) -> Any:
    """One call of ``model`` recorded: the recorder, and the call's outputs."""
    capturer.begin(leaves)
    try:
        results = _outputs(model(*tensors))
    except BaseException:
        capturer.abort()
        raise
    return capturer.finish([r.primitive for r in results]), results


def _example(x: Any, rng: np.random.Generator, i: int) -> np.ndarray:
    if isinstance(x, Tensor):
        return x.to_numpy()
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, Sequence) and all(isinstance(d, int) and d > 0 for d in x):
        return rng.standard_normal(tuple(x)).astype(np.float32)
    raise ExportError(f"input {i} must be a shape (positive ints), an array or a Tensor; got "
                      f"{x!r}")


def _outputs(result: Any) -> list[Tensor]:
    outputs = [result] if isinstance(result, Tensor) else list(result)
    for i, x in enumerate(outputs):
        if not isinstance(x, Tensor):
            raise ExportError(f"the model must return a tensor or a sequence of tensors; output "
                              f"{i} is {type(x).__name__}")
    return outputs


class _Buffers:
    """Numbers the device buffers the commands use, in order of first use."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.handles: list[Any] = []

    def __call__(self, handle: Any) -> int:
        key = id(handle)
        if key not in self.index:
            self.index[key] = len(self.handles)
            self.handles.append(handle)
        return self.index[key]


def _write(out: Path, runtime: Any, recorder: Any, record: Any, model: Any,
           inputs: list[np.ndarray], expected: list[np.ndarray]) -> Exported:
    from burnish.jit.capture import _ARGUMENT

    kernels_by_compiled = {id(entry[0]): (key, entry) for key, entry in runtime._kernels.items()}
    numbered = _Buffers()
    kernel_index: dict[int, int] = {}
    kernels: list[dict] = []
    js_sources: list[str | None] = []
    commands: list[dict] = []
    writes: dict[str, np.ndarray] = {}
    wgsl = WgslGenerator()
    # The buffers that hold int64 data at this point of the launch list, which the browser
    # holds as int32 (``narrow``): copies and writes of their bytes are halved.
    wide = {key for x, (key, _, _) in zip(inputs, record.input_order)
            if x.dtype == np.int64}
    wide = {id(record.inputs[key].handle) for key in wide}
    bound_wide: set[int] = set()  # buffers some launch binds as int64
    for i, command in enumerate(record.commands):
        where = recorder.locations[i]
        kind = command[0]
        if kind == "launch":
            compiled, handles, info, groups = command[1:]
            found = kernels_by_compiled.get(id(compiled))
            if found is None:
                raise ExportError(f"cannot export: a launch at {where} runs a kernel this "
                                  f"runtime did not compile")
            key, (_, kernel, source) = found
            for handle, binding in zip(handles, kernel.buffers):
                if binding.dtype == "int64":
                    bound_wide.add(id(handle))
                    wide.add(id(handle))
                elif binding.writable:
                    wide.discard(id(handle))
            if id(compiled) not in kernel_index:
                kernel_index[id(compiled)] = len(kernels)
                if uses_int64(kernel):
                    if wgsl.generate(kernel) != source:
                        raise ExportError(f"cannot export: kernel {kernel.name} (launched at "
                                          f"{where}) has hand-written WGSL that uses int64, "
                                          "which WebGPU in browsers lacks")
                    kernel = as_int32(kernel)
                    source = wgsl.generate(kernel)
                kernels.append(_kernel(kernel, source, where))
                js_sources.append(_javascript(kernel, source, wgsl, where))
            commands.append({"op": "launch", "kernel": kernel_index[id(compiled)],
                             "buffers": [numbered(h) for h in handles],
                             "info": [int(v) for v in info], "groups": list(groups)})
        elif kind == "copy":
            src, src_offset, dst, dst_offset, nbytes = command[1:]
            if id(src) in wide:
                src_offset, dst_offset, nbytes = src_offset // 2, dst_offset // 2, nbytes // 2
                wide.add(id(dst))
            else:
                wide.discard(id(dst))
            commands.append({"op": "copy", "src": numbered(src), "src_offset": src_offset,
                             "dst": numbered(dst), "dst_offset": dst_offset,
                             "size": -(-nbytes // 4) * 4})
        elif kind == "write":
            handle, offset, data = command[1:]
            if data.dtype == np.int64:
                data, offset = data.astype(np.int32), offset // 2
                wide.add(id(handle))
            else:
                wide.discard(id(handle))
            name = f"writes.w{len(writes)}"
            raw = np.ascontiguousarray(data).view(np.uint8).ravel()
            writes[name] = np.concatenate([raw, np.zeros(-raw.size % 4, np.uint8)])
            commands.append({"op": "write", "buffer": numbered(handle), "offset": offset,
                             "data": name})
        else:  # refused before the record was made
            raise ExportError(f"cannot export: a library call at {where}")

    # Inputs: where each argument lies in its buffer.
    specs_in = []
    for x, (key, start, _end) in zip(inputs, record.input_order):
        handle = record.inputs[key].handle
        dtype = _storage(x.dtype, "input")
        if x.dtype == np.int64:
            start //= 2
        specs_in.append({"buffer": numbered(handle), "offset": start, "shape": list(x.shape),
                         "dtype": dtype})
    # Outputs: a view (shape, strides, offset) of one of the record's output buffers.
    specs_out = []
    for i, plan in enumerate(record.output_plan):
        if plan.slots is _ARGUMENT:  # a view of an input (a reshape, a flip): read there
            handle = record.inputs[record.input_order[plan.slot][0]].handle
        elif plan.slots is None or plan.slots is record.inputs:
            raise ExportError(f"cannot export: output {i} is state the model holds, returned "
                              f"as it is (a parameter); compute something from it")
        else:
            handle = plan.slots[plan.slot].handle
        specs_out.append({"buffer": numbered(handle), "offset": int(plan.offset),
                          "shape": list(plan.shape), "strides": list(plan.strides),
                          "dtype": _storage(np.dtype(plan.dtype.numpy), f"output {i}")})

    # Constants: state the forward pass reads (parameters, buffers it holds).
    names = _parameter_names(model)
    state = {id(ref().handle): ref() for ref in record.state if ref() is not None}
    errors = id(runtime.device_errors.buffer.handle) if runtime.device_errors else None
    constants: dict[str, np.ndarray] = {}
    buffers = []
    # The bytes of state that is not a whole parameter (read back in one synchronisation).
    unnamed = [h for h in numbered.handles
               if id(h) in state and names.get(id(h), ("", None))[1] is None]
    raw = dict(zip(map(id, unnamed), runtime.read([(h, 0, h.size) for h in unnamed])))
    for n, handle in enumerate(numbered.handles):
        entry: dict[str, Any] = {"size": -(-int(handle.size) // 4) * 4}
        if id(handle) == errors:
            # Where kernels flag bad values (an index out of range) for burnish to raise at
            # the next read: the browser starts it at zero and never reads it.
            pass
        elif id(handle) in state:
            if id(handle) in recorder.written:
                raise ExportError("cannot export: the forward pass updates state it holds in "
                                  f"place (a buffer of {handle.size} bytes, "
                                  f"{names.get(id(handle), ('a tensor', None))[0]}); export "
                                  "the module in inference mode")
            name, values = names.get(id(handle), (f"constants.buffer{n}", None))
            if values is None:  # not a whole parameter: the buffer's bytes
                name, values = f"constants.buffer{n}", np.frombuffer(raw[id(handle)], np.uint8)
            elif values.dtype == np.int64:
                values = values.astype(np.int32)
            if id(handle) in bound_wide and values.dtype == np.uint8:
                values = values.view(np.int64).astype(np.int32).view(np.uint8)
            constants[name] = values
            entry["init"] = name
        buffers.append(entry)

    out.mkdir(parents=True, exist_ok=True)
    # Written as burnish's records are (atomically, readable by the web server's user).
    atomic_write(out / "weights.safetensors",
                 safetensors.numpy.save({**constants, **writes}, metadata={"format": FORMAT}))
    spec = {"format": FORMAT, "version": VERSION, "weights": "weights.safetensors",
            "cpu": "kernels.js", "kernels": kernels, "buffers": buffers, "commands": commands,
            "inputs": specs_in, "outputs": specs_out}
    (out / "model.json").write_text(json.dumps(spec, separators=(",", ":")), encoding="utf-8")
    (out / "kernels.js").write_text(_kernels_module(kernels, js_sources), encoding="utf-8")
    runtime_js = resources.files("burnish.web").joinpath("burnish.js")
    with resources.as_file(runtime_js) as source:
        shutil.copyfile(source, out / "burnish.js")
    return Exported(out, inputs, expected, [k["name"] for k in kernels],
                    sum(c["op"] == "launch" for c in commands))


def _storage(dtype: np.dtype, what: str) -> str:
    name = {np.dtype(np.float32): "float32", np.dtype(np.int32): "int32",
            np.dtype(np.int64): "int32", np.dtype(np.bool_): "bool"}.get(np.dtype(dtype))
    if name is None:
        raise ExportError(f"cannot export: {what} is {np.dtype(dtype)}; the browser runtime "
                          "takes float32, int32 (int64 is held as int32) and bool")
    return name


def _kernel(kernel: ir.Kernel, source: str, where: str) -> dict:
    for b in kernel.buffers:
        if b.dtype not in SUPPORTED:
            raise ExportError(f"cannot export: kernel {kernel.name} (launched at {where}) "
                              f"binds a buffer of {b.dtype}, which WebGPU in browsers lacks "
                              f"(supported: {', '.join(sorted(SUPPORTED))})")
    if re.search(r"\b(f16|i64|f64)\b", source):
        raise ExportError(f"cannot export: kernel {kernel.name} (launched at {where}) computes "
                          "in float16, int64 or float64, which WebGPU in browsers lacks")
    return {"name": kernel.name, "wgsl": browser_wgsl(source), "workgroup": list(kernel.workgroup),
            "bindings": [{"dtype": b.dtype, "writable": b.writable,
                          "array": ARRAYS[b.dtype]} for b in kernel.buffers]}


#: ``bitcast<f32>(WORD)`` of a constant word.
_BITCAST = re.compile(r"bitcast<f32>\((0x[0-9a-fA-F]+|\d+)u\)")


def browser_wgsl(source: str) -> str:
    """``source`` as browsers accept it. WGSL evaluates constant expressions when it compiles
    and rejects one whose value is infinite or NaN; naga lets ``bitcast<f32>(0x7f800000u)``
    pass, Chromium's Tint does not. Such bit patterns go through a function, which WGSL never
    evaluates as a constant."""

    def runtime(match: re.Match) -> str:
        word = int(match.group(1), 0)
        if (word & 0x7F800000) != 0x7F800000:
            return match.group(0)
        return f"bitcast<f32>(burnish_word({match.group(1)}u))"

    changed = _BITCAST.sub(runtime, source)
    if changed == source:
        return source
    return "fn burnish_word(x: u32) -> u32 { return x; }\n" + changed


def _javascript(kernel: ir.Kernel, source: str, wgsl: WgslGenerator, where: str) -> str | None:
    """The kernel as JavaScript; None for a kernel whose WGSL is hand-written (a custom
    kernel: its IR does not describe its body)."""
    if wgsl.generate(kernel) != source:
        return None
    try:
        return JsGenerator().generate(kernel)
    except TypeError as error:
        raise ExportError(f"cannot export: kernel {kernel.name} (launched at {where}): "
                          f"{error}") from None


def _kernels_module(kernels: list[dict], sources: list[str | None]) -> str:
    lines = ["// burnish.web: the model's kernels in plain JavaScript (the CPU fallback).",
             HELPERS, "export default ["]
    for kernel, source in zip(kernels, sources):
        if source is None:
            lines.append(f"null, // {kernel['name']}: hand-written WGSL, no JavaScript form")
        else:
            lines.append(f"// {kernel['name']}\n{source.rstrip()},")
    lines.append("];")
    return "\n".join(lines) + "\n"


def _parameter_names(model: Any) -> dict[int, tuple[str, np.ndarray | None]]:
    """id(device buffer) -> (the parameter's dotted name, its values), for a module's
    parameters that are whole, contiguous buffers."""
    found: dict[int, tuple[str, np.ndarray | None]] = {}
    named = getattr(model, "named_params", None)
    if named is None:
        return found
    for name, param in named():
        prim = param.val().primitive
        handle = getattr(getattr(prim, "buffer", None), "handle", None)
        if handle is None:
            continue
        whole = prim.offset == 0 and prim.is_contiguous()
        found[id(handle)] = (name, param.val().to_numpy() if whole else None)
    return found
