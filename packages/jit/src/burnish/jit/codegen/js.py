"""JavaScript for the CPU: a kernel as a function that runs a whole launch in plain JavaScript
(``burnish.web``'s fallback where a browser has no WebGPU).

The rendered source is a function expression ``(buffers, info, gx, gy, gz) => void``:
``buffers`` are typed arrays over each binding's memory laid out as WGSL lays it out (``f32``
in a ``Float32Array``; ``int8``, ``int16``, ``uint8`` and ``int32`` in an ``Int32Array``;
``bool`` in a ``Uint32Array``), ``info`` an ``Int32Array`` and ``g*`` the grid. It loops over
the workgroups, and in each over its invocations. A kernel with barriers runs each invocation
as a generator that yields at every barrier, all of a workgroup's invocations stepped in turn:
every one reaches a barrier before any goes past it, which is what a barrier promises.

Values compute in JavaScript's numbers: ``f32`` in doubles rounded to float32 where a variable
takes a value and at every store (so sums may carry more precision than the GPU's, within float
tolerance), ``i32`` and ``u32`` wrapped to 32 bits at every operation, as WGSL wraps them.
``i64`` and ``f64`` are refused: WebGPU has neither.
"""

from __future__ import annotations

import numpy as np

from burnish.jit import ir
from burnish.jit.codegen.base import Generator, float_literal
from burnish.jit.codegen.cpu import has_barrier

#: The typed array each storage dtype lives in (the WGSL layout, ``wgsl.py``).
ARRAYS = {"float32": "Float32Array", "bfloat16": "Float32Array", "int32": "Int32Array",
          "int16": "Int32Array", "int8": "Int32Array", "uint8": "Int32Array",
          "bool": "Uint32Array"}
_SHARED_ARRAYS = {"f32": "Float32Array", "i32": "Int32Array", "u32": "Uint32Array"}
_STORAGE_NUMPY = {"float32": np.float32, "bfloat16": np.float32, "int32": np.int32,
                  "int16": np.int32, "int8": np.int32, "uint8": np.int32, "bool": np.uint32}

#: Helpers every kernel may call, defined once by the runtime that evaluates the kernels
#: (``burnish.web``'s ``burnish.js`` defines them as ``H``).
HELPERS = """\
const H = (() => {
  const f = new Float32Array(1), u = new Uint32Array(f.buffer), i = new Int32Array(f.buffer);
  const isnan = (x) => x !== x;
  return {
    f2u(x) { f[0] = x; return u[0]; },
    f2i(x) { f[0] = x; return i[0]; },
    u2f(x) { u[0] = x; return f[0]; },
    i2f(x) { i[0] = x; return f[0]; },
    toI32(x) { return isnan(x) ? 0 : x >= 2147483647 ? 2147483647 : x <= -2147483648
      ? -2147483648 : Math.trunc(x) | 0; },
    toU32(x) { return isnan(x) || x <= 0 ? 0 : x >= 4294967295 ? 4294967295
      : Math.trunc(x) >>> 0; },
    round(x) { const r = Math.round(x); return (r - x === 0.5 && r % 2 !== 0) ? r - 1 : r; },
    bf16(x) { if (isnan(x)) return x; f[0] = x; const b = u[0];
      u[0] = ((b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000) >>> 0; return f[0]; },
    f16(x) { return Math.f16round ? Math.f16round(x) : x; },
    erf(x) {
      if (isnan(x)) return x;
      const t = 1 / (1 + 0.5 * Math.abs(x));
      const y = 1 - t * Math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196
        + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398
        + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
      return x >= 0 ? y : -y;
    },
    pow(a, b) { return Math.pow(a, b); },
  };
})();
"""

_FUNCTIONS = {"exp": "Math.exp", "log": "Math.log", "log1p": "Math.log1p",
              "expm1": "Math.expm1", "sqrt": "Math.sqrt", "sin": "Math.sin", "cos": "Math.cos",
              "tan": "Math.tan", "tanh": "Math.tanh", "floor": "Math.floor",
              "ceil": "Math.ceil", "trunc": "Math.trunc", "abs": "Math.abs",
              "min": "Math.min", "max": "Math.max", "atan2": "Math.atan2", "erf": "H.erf",
              "round": "H.round", "pow": "H.pow"}


class JsGenerator(Generator):
    """Renders an ``ir.Kernel`` as a JavaScript function expression that runs one launch."""

    language = "js"
    barrier_statement = "yield;"

    def storage_numpy(self, dtype: str) -> np.dtype:
        if dtype not in _STORAGE_NUMPY:
            raise TypeError(f"JavaScript: {dtype} buffers are not supported (WebGPU has no "
                            f"{dtype})")
        return np.dtype(_STORAGE_NUMPY[dtype])

    def type_name(self, ty: str) -> str:
        return ty

    def function_source(self, name: str, params: list[ir.Var], result: str, body: str) -> str:
        # Only the float8/float4 conversions are helpers, and their buffers are refused above.
        raise TypeError(f"JavaScript: helper function {name} is not supported")

    def literal(self, value, ty: str) -> str:
        if ty == "bool":
            return "true" if value else "false"
        if ty in ("i64", "f64"):
            raise TypeError(f"JavaScript: {ty} values are not supported (WebGPU has no {ty})")
        if ir.is_float(ty):
            text = float_literal(value)
            if text is None:
                return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
            return f"({text})" if text.startswith("-") else text
        return f"({int(value)})" if int(value) < 0 else str(int(value))

    def expr(self, e: ir.Expr) -> str:
        if e.ty in ("i64", "f64"):
            raise TypeError(f"JavaScript: {e.ty} values are not supported (WebGPU has no "
                            f"{e.ty})")
        if isinstance(e, ir.Var):
            return "v_" + e.name
        if isinstance(e, ir.SharedLoad):
            return f"s_{e.array.name}[{self.expr(e.index)}]"
        if isinstance(e, ir.Unary):
            a = self.expr(e.a)
            if e.op == "-":
                return f"(-{a} | 0)" if e.ty == "i32" else f"((-{a}) >>> 0)" \
                    if e.ty == "u32" else f"(-{a})"
            if e.op == "~":
                return f"(~{a} >>> 0)" if e.ty == "u32" else f"(~{a})"
            return f"(!{a})"
        return super().expr(e)

    def declare(self, var: ir.Var, value: str) -> str:
        if var.ty == "f32":
            value = f"Math.fround({value})"
        return f"let v_{var.name} = {value};"

    def load(self, buffer: ir.Buffer, index: str) -> str:
        ref = f"b_{buffer.name}[{index}]"
        return f"({ref} !== 0)" if buffer.dtype == "bool" else ref

    def store(self, buffer: ir.Buffer, index: str, value: str) -> str:
        if buffer.dtype == "bool":
            value = f"({value} ? 1 : 0)"
        elif buffer.dtype in ("bfloat16", "int16", "int8", "uint8"):
            value = self.narrow(value, buffer.dtype)
        return f"b_{buffer.name}[{index}] = {value};"

    def binary(self, op: str, a: str, b: str, a_ty: str, b_ty: str) -> str:
        if a_ty == "bool":
            spelled = {"&": "&&", "|": "||", "^": "!==", "==": "===", "!=": "!=="}.get(op, op)
            return f"({a} {spelled} {b})"
        if op == "==":
            return f"({a} === {b})"
        if op == "!=":
            return f"({a} !== {b})"
        if op in ("<", "<=", ">", ">=", "&&", "||"):
            return f"({a} {op} {b})"
        if ir.is_float(a_ty):
            if op == "%":
                return f"({a} % {b})"
            return f"({a} {op} {b})"
        wrap = " | 0" if a_ty == "i32" else " >>> 0"
        if op == "*":
            return f"(Math.imul({a}, {b}){wrap})"
        if op == "/":
            return f"(Math.trunc({a} / {b}){wrap})"
        if op == ">>":
            return f"({a} >> {b})" if a_ty == "i32" else f"({a} >>> {b})"
        return f"(({a} {op} {b}){wrap})"

    def call(self, fn: str, args: list[str], ty: str) -> str:
        if fn == "isnan":
            return f"Number.isNaN({args[0]})"
        if fn == "isinf":
            return f"(Math.abs({args[0]}) === Infinity)"
        if fn == "fmod":
            return f"({args[0]} % {args[1]})"
        if fn == "dot4i8":
            terms = " + ".join(f"((({args[0]} << {24 - 8 * j}) >> 24) * "
                               f"(({args[1]} << {24 - 8 * j}) >> 24))" for j in range(4))
            return f"(({terms}) | 0)"
        if ty in ("i32", "u32") and fn == "abs":
            return f"(Math.abs({args[0]}){' | 0' if ty == 'i32' else ' >>> 0'})"
        return f"{_FUNCTIONS[fn]}({', '.join(args)})"

    def cast(self, value: str, src: str, dst: str) -> str:
        if src == dst:
            return value
        if dst == "bool":
            return f"({value} !== 0)"
        if src == "bool":
            return f"({value} ? 1 : 0)"
        if dst == "f32":
            return f"Math.fround({value})"
        if dst == "i32":
            return f"H.toI32({value})" if src == "f32" else f"({value} | 0)"
        if dst == "u32":
            return f"H.toU32({value})" if src == "f32" else f"({value} >>> 0)"
        raise TypeError(f"JavaScript: no cast from {src} to {dst} (WebGPU has no {dst})")

    def narrow(self, value: str, dtype: str) -> str:
        if dtype == "int8":
            return f"(({value} << 24) >> 24)"
        if dtype == "int16":
            return f"(({value} << 16) >> 16)"
        if dtype == "uint8":
            return f"({value} & 255)"
        if dtype == "bfloat16":
            return f"H.bf16({value})"
        if dtype == "float16":
            return f"H.f16({value})"
        return value

    def bitcast(self, value: str, src: str, dst: str) -> str:
        if src == dst:
            return value
        if src == "f32":
            return f"H.f2{dst[0]}({value})"
        if dst == "f32":
            return f"H.{src[0]}2f({value})"
        return f"({value} | 0)" if dst == "i32" else f"({value} >>> 0)"

    def select(self, cond: str, a: str, b: str, ty: str) -> str:
        return f"({cond} ? {a} : {b})"

    def builtin(self, which: str, axis: int) -> str:
        return {"local_id": "l", "group_id": "w", "num_groups": "g"}[which] + "xyz"[axis]

    def for_header(self, stmt: ir.For, start: str, stop: str, step: str) -> str:
        v = "v_" + stmt.var.name
        return f"for (let {v} = {start}; {v} < {stop}; {v} = ({v} + {step}) | 0)"

    def _block(self, stmts: list, lines: list[str], depth: int) -> None:
        pad = "    " * depth
        for s in stmts:  # the statements whose spelling differs from the C family's
            if isinstance(s, ir.Assign):
                value = self.expr(s.value)
                if s.var.ty == "f32":
                    value = f"Math.fround({value})"
                lines.append(f"{pad}v_{s.var.name} = {value};")
            elif isinstance(s, ir.SharedStore):
                lines.append(f"{pad}s_{s.array.name}[{self.expr(s.index)}] = "
                             f"{self.expr(s.value)};")
            else:
                super()._block([s], lines, depth)

    def render_kernel(self, kernel: ir.Kernel, body: list[str]) -> str:
        for b in kernel.buffers:
            self.storage_numpy(b.dtype)
        barriers = has_barrier(kernel.body)
        x, y, z = kernel.workgroup
        names = ", ".join(f"b_{b.name}" for b in kernel.buffers)
        lines = ["(buffers, info, gx, gy, gz) => {",
                 f"  const [{names}] = buffers;"]
        if kernel.shared:
            lines.append("  " + " ".join(f"let s_{s.name};" for s in kernel.shared))
        star = "*" if barriers else ""
        lines.append(f"  function{star} invocation(lx, ly, lz, wx, wy, wz) {{")
        lines += ["  " + line for line in body]
        lines.append("  }")
        for s in kernel.shared:  # made once, zeroed for each workgroup as WGSL zeroes it
            array = _SHARED_ARRAYS.get(s.ty)
            if array is None and s.ty != "bool":
                raise TypeError(f"JavaScript: workgroup memory of {s.ty} is not supported")
            make = f"new {array}({s.size})" if array else f"new Array({s.size})"
            lines.append(f"  s_{s.name} = {make};")
        lines.append("  for (let wz = 0; wz < gz; wz++) for (let wy = 0; wy < gy; wy++) "
                     "for (let wx = 0; wx < gx; wx++) {")
        for s in kernel.shared:
            lines.append(f"    s_{s.name}.fill({'false' if s.ty == 'bool' else '0'});")
        loops = (f"for (let lz = 0; lz < {z}; lz++) for (let ly = 0; ly < {y}; ly++) "
                 f"for (let lx = 0; lx < {x}; lx++)")
        if barriers:
            lines += ["    const running = [];",
                      f"    {loops} running.push(invocation(lx, ly, lz, wx, wy, wz));",
                      "    let live = running.length;",
                      "    while (live > 0) {",
                      "      live = 0;",
                      "      for (const it of running) if (!it.next().done) live++;",
                      "    }"]
        else:
            lines.append(f"    {loops} invocation(lx, ly, lz, wx, wy, wz);")
        lines.append("  }")
        lines.append("}")
        return "\n".join(lines) + "\n"

