"""The WGSL generator (WebGPU's shading language, compiled by wgpu's naga).

Storage: WGSL has no 8/16-bit integers, no ``bool`` in buffers and no ``bfloat16``, so ``int8``,
``int16`` and ``uint8`` are stored in ``i32`` (wrapped at every store), ``bool`` in ``u32`` and
``bfloat16`` in ``f32`` (rounded to bfloat16 at every store). The extended dtypes follow the
same rules: ``uint16`` and the 4- and 2-bit ints in ``i32`` (wrapped at every store), ``uint32``
in ``u32``, ``uint64`` as its bits in ``i64``, and the float8 and float4 formats in ``f32``,
rounded to the format at every store (``burnish.jit.minifloat``). ``float16`` needs the
adapter's ``shader-f16``, ``int64`` and ``uint64`` its ``shader-int64``. Math that WGSL lacks or
leaves undefined (``erf``, ``log1p``, ``pow`` of negative bases, NaN tests) comes from helpers
written here.
"""

from __future__ import annotations

import numpy as np

from burnish.jit import ir
from burnish.jit.codegen.base import SUB_BYTE_INTS, Generator, float_literal
from burnish.jit.minifloat import DTYPES as SMALL_FLOATS

_BINDING_TYPES = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "f32",
                  "int64": "i64", "int32": "i32", "int16": "i32", "int8": "i32", "uint8": "i32",
                  "bool": "u32", "uint64": "i64", "uint32": "u32", "uint16": "i32",
                  **dict.fromkeys(SUB_BYTE_INTS, "i32"), **dict.fromkeys(SMALL_FLOATS, "f32")}
_STORAGE_NUMPY = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
                  "bfloat16": np.float32, "int64": np.int64, "int32": np.int32,
                  "int16": np.int32, "int8": np.int32, "uint8": np.int32, "bool": np.uint32,
                  "uint64": np.int64, "uint32": np.uint32, "uint16": np.int32,
                  **dict.fromkeys(SUB_BYTE_INTS, np.int32),
                  **dict.fromkeys(SMALL_FLOATS, np.float32)}
#: The storage dtypes kept in a wider type of the same kind, narrowed at every store.
_NARROWED = frozenset({"bfloat16", "int16", "int8", "uint8", "uint16", *SUB_BYTE_INTS,
                       *SMALL_FLOATS})
_FLOAT_COMPARISONS = {"<": ("lt_f32", "<"), "<=": ("le_f32", "<="), ">": ("gt_f32", ">"),
                      ">=": ("ge_f32", ">="), "==": ("eq_f32", "=="), "!=": ("ne_f32", "!=")}
_SUFFIX = {"i32": "i", "u32": "u", "i64": "li", "f32": "f", "f64": "lf"}


class WgslGenerator(Generator):
    language = "wgsl"
    elements_per_invocation = 8
    barrier_statement = "workgroupBarrier();"

    def __init__(self, packed_dot: bool = True) -> None:
        """``packed_dot``: whether the compiler takes WGSL's ``dot4I8Packed`` (the runtime
        asks it once; older naga lacks it): ``dot4i8`` is that built-in, else shifts."""
        super().__init__()
        self.packed_dot = packed_dot

    def storage_numpy(self, dtype: str) -> np.dtype:
        return np.dtype(_STORAGE_NUMPY[dtype])

    def type_name(self, ty: str) -> str:
        return ty

    def literal(self, value, ty: str) -> str:
        if ty == "bool":
            return "true" if value else "false"
        if ir.is_float(ty):
            text = float_literal(value)
            if text is None:
                if ty != "f32":
                    raise TypeError("WGSL: infinite or NaN f64 constants are not supported")
                word = np.array(value, dtype=np.float32).view(np.uint32).item()
                return f"bitcast<f32>({word}u)"
            return text + _SUFFIX[ty]
        value = int(value)
        if ty == "i32" and value == -(2**31):
            return "(-2147483647i - 1i)"
        if ty == "i64" and value == -(2**63):
            return "(-9223372036854775807li - 1li)"
        text = f"{value}{_SUFFIX[ty]}"
        return f"({text})" if value < 0 else text

    def declare(self, var: ir.Var, value: str) -> str:
        return f"var {var.name}: {var.ty} = {value};"

    def for_header(self, stmt: ir.For, start: str, stop: str, step: str) -> str:
        v = stmt.var.name
        return f"for (var {v}: i32 = {start}; {v} < {stop}; {v} += {step})"

    def unary(self, op: str, a: str, ty: str) -> str:
        if op == "-" and ty == "u32":  # WGSL negates signed types only; C's u32 wraps
            return f"(0u - {a})"
        return super().unary(op, a, ty)

    def binary(self, op: str, a: str, b: str, a_ty: str, b_ty: str) -> str:
        if op in ("<<", ">>"):
            # naga will not convert an i64 literal: spell constant shift amounts as u32.
            amount = b.strip("()")
            if amount.rstrip("liu").isdigit():
                return f"({a} {op} {amount.rstrip('liu')}u)"
            return f"({a} {op} u32({b}))"
        if a_ty == "f32" and op in _FLOAT_COMPARISONS:
            # WGSL lets drivers assume no NaN, and NVIDIA's Vulkan does (it rewrites a < b as
            # !(a >= b)): comparisons test NaN on the bits, so NaN compares as NumPy says.
            return f"{self._comparison(op)}({a}, {b})"
        return f"({a} {op} {b})"

    def _comparison(self, op: str) -> str:
        isnan = self._nan_tests()["isnan"]
        name, test = _FLOAT_COMPARISONS[op]
        if op == "!=":
            body = f"return {isnan}(a) || {isnan}(b) || a != b;"
        else:
            body = f"return !{isnan}(a) && !{isnan}(b) && a {test} b;"
        return self.helper(name, f"\nfn {name}(a: f32, b: f32) -> bool {{ {body} }}")

    def select(self, cond: str, a: str, b: str, ty: str) -> str:
        if ty == "f32":
            # Some drivers (NVIDIA's Vulkan) turn a float select on a comparison into min/max,
            # which drops NaN; selecting the bits keeps NumPy's NaN rules.
            return f"bitcast<f32>(select(bitcast<u32>({b}), bitcast<u32>({a}), {cond}))"
        return f"select({b}, {a}, {cond})"

    def load(self, buffer: ir.Buffer, index: str) -> str:
        ref = f"{buffer.name}[{index}]"
        if buffer.dtype == "bool":
            return f"({ref} != 0u)"
        if buffer.dtype == "float16":
            return f"f32({ref})"
        return ref

    def store(self, buffer: ir.Buffer, index: str, value: str) -> str:
        ref = f"{buffer.name}[{index}]"
        if buffer.dtype == "bool":
            value = f"select(0u, 1u, {value})"
        elif buffer.dtype == "float16":
            value = f"f16({self.narrow(value, 'float16')})"
        elif buffer.dtype in _NARROWED:
            value = self.narrow(value, buffer.dtype)
        return f"{ref} = {value};"

    def cast(self, value: str, src: str, dst: str) -> str:
        if dst == "bool":
            if src == "bool":
                return value
            if src == "f32":
                return f"{self._comparison('!=')}({value}, 0.0f)"  # NaN is true
            return f"({value} != {self.literal(0, src)})"
        if src == "bool":
            return f"select({self.literal(0, dst)}, {self.literal(1, dst)}, {value})"
        return f"{dst}({value})"

    def narrow(self, value: str, dtype: str) -> str:
        if dtype == "int8":
            return f"(({value} << 24u) >> 24u)"
        if dtype == "int16":
            return f"(({value} << 16u) >> 16u)"
        if dtype == "uint8":
            return f"({value} & 255i)"
        if dtype == "uint16":
            return f"({value} & 65535i)"
        if dtype in SUB_BYTE_INTS:
            return self.wrap_bits(value, dtype)
        if dtype in SMALL_FLOATS:
            return self.round_float(value, dtype)
        if dtype == "bfloat16":
            return f"{self._round_bf16()}({value})"
        if dtype == "float16":
            return f"{self._round_f16()}({value})"
        return value

    def bitcast(self, value: str, src: str, dst: str) -> str:
        return f"bitcast<{dst}>({value})"

    def function_source(self, name: str, params: list[ir.Var], result: str, body: str) -> str:
        args = ", ".join(f"{p.name}: {p.ty}" for p in params)
        return f"\nfn {name}({args}) -> {result} {{ return {body}; }}"

    def builtin(self, which: str, axis: int) -> str:
        var = {"local_id": "lid", "group_id": "wid", "num_groups": "nwg"}[which]
        return f"i32({var}.{'xyz'[axis]})"

    def call(self, fn: str, args: list[str], ty: str) -> str:
        if ty == "f64" and fn not in ("abs", "min", "max", "floor", "ceil", "trunc", "round",
                                      "sqrt", "fmod"):
            raise TypeError(f"WGSL: {fn} is not available for f64 on WebGPU")
        if fn in ("isnan", "isinf"):
            return f"{self._nan_tests()[fn]}({args[0]})"
        if fn == "dot4i8":
            if self.packed_dot:  # naga lowers it to the device's instruction, or to shifts
                return f"dot4I8Packed(bitcast<u32>({args[0]}), bitcast<u32>({args[1]}))"
            return f"{self._dot4i8()}({args[0]}, {args[1]})"
        if fn == "fmod":
            return f"({args[0]} % {args[1]})"
        if fn == "erf":
            return f"{self._erf()}({args[0]})"
        if fn == "log1p":
            return f"{self._log1p()}({args[0]})"
        if fn == "expm1":
            return f"{self._expm1()}({args[0]})"
        if fn == "pow":
            return f"{self._pow()}({args[0]}, {args[1]})"
        if fn == "tanh":
            return f"{self._tanh()}({args[0]})"
        return f"{fn}({', '.join(args)})"

    # -- helpers --------------------------------------------------------------------------------

    def _nan_tests(self) -> dict[str, str]:
        self.helper("isnan_f32", """
fn isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }""")
        self.helper("isinf_f32", """
fn isinf_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }""")
        return {"isnan": "isnan_f32", "isinf": "isinf_f32"}

    def _dot4i8(self) -> str:
        # Byte j sign-extended: shifted to the top, then arithmetically back down.
        terms = " + ".join(f"((a << {24 - 8 * j}u) >> 24u) * ((b << {24 - 8 * j}u) >> 24u)"
                           for j in range(4))
        return self.helper("dot4i8", f"""
fn dot4i8(a: i32, b: i32) -> i32 {{ return {terms}; }}""")

    def _round_bf16(self) -> str:
        isnan = self._nan_tests()["isnan"]
        return self.helper("round_bf16", f"""
fn round_bf16(x: f32) -> f32 {{
    if ({isnan}(x)) {{ return x; }}
    let b = bitcast<u32>(x);
    return bitcast<f32>((b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u);
}}""")

    def _round_f16(self) -> str:
        isnan = self._nan_tests()["isnan"]
        return self.helper("round_f16", f"""
fn round_f16(x: f32) -> f32 {{
    let a = abs(x);
    if ({isnan}(x)) {{ return x; }}
    if (a >= 65520.0f) {{
        return select(bitcast<f32>(0x7f800000u), bitcast<f32>(0xff800000u), x < 0.0f);
    }}
    var r: f32;
    if (a < 6.103515625e-05f) {{
        r = round(a * 16777216.0f) / 16777216.0f;
    }} else {{
        let b = bitcast<u32>(a);
        r = bitcast<f32>((b + 0x0fffu + ((b >> 13u) & 1u)) & 0xffffe000u);
    }}
    return select(r, -r, x < 0.0f);
}}""")

    def _tanh(self) -> str:
        # Some drivers compute tanh through exp and return NaN once exp overflows.
        return self.helper("tanh_f32", """
fn tanh_f32(x: f32) -> f32 {
    if (abs(x) > 15.0f) { return sign(x); }
    return tanh(x);
}""")

    def _log1p(self) -> str:
        isinf = self._nan_tests()["isinf"]
        return self.helper("log1p_f32", f"""
fn log1p_f32(x: f32) -> f32 {{
    let u = 1.0f + x;
    if (u == 1.0f) {{ return x; }}
    if ({isinf}(u) && u > 0.0f) {{ return u; }}
    if (u < 0.0f) {{ return bitcast<f32>(0x7fc00000u); }}
    return log(u) * (x / (u - 1.0f));
}}""")

    def _expm1(self) -> str:
        isinf = self._nan_tests()["isinf"]
        return self.helper("expm1_f32", f"""
fn expm1_f32(x: f32) -> f32 {{
    let u = exp(x);
    if (u == 1.0f) {{ return x; }}
    let um1 = u - 1.0f;
    if (um1 == -1.0f) {{ return -1.0f; }}
    if ({isinf}(u)) {{ return u; }}
    return um1 * x / log(u);
}}""")

    def _pow(self) -> str:
        tests = self._nan_tests()
        return self.helper("pow_f32", f"""
fn pow_f32(a: f32, b: f32) -> f32 {{
    if (b == 0.0f || a == 1.0f) {{ return 1.0f; }}
    if ({tests["isnan"]}(a) || {tests["isnan"]}(b)) {{ return a + b; }}
    let ab = abs(a);
    var r: f32;
    if (ab == 0.0f) {{
        r = select(bitcast<f32>(0x7f800000u), 0.0f, b > 0.0f);
    }} else if ({tests["isinf"]}(b)) {{
        if (ab == 1.0f) {{ return 1.0f; }}
        r = select(0.0f, bitcast<f32>(0x7f800000u), (ab > 1.0f) == (b > 0.0f));
        return r;
    }} else {{
        r = pow(ab, b);
    }}
    let negative = a < 0.0f || (a == 0.0f && (bitcast<u32>(a) & 0x80000000u) != 0u);
    if (negative) {{
        if (b != trunc(b)) {{ return bitcast<f32>(0x7fc00000u); }}
        let half = b * 0.5f;
        if (half != trunc(half)) {{ r = -r; }}
    }}
    return r;
}}""")

    def _erf(self) -> str:
        isnan = self._nan_tests()["isnan"]
        # A float32 erf within about 1 ulp (N. Juffa's minimax fits): one exp and one branch,
        # where fdlibm's double-precision algorithm takes two exps, a division and four.
        return self.helper("erf_f32", f"""
fn erf_f32(x: f32) -> f32 {{
    if ({isnan}(x)) {{ return x; }}
    let t = abs(x);
    let s = x * x;
    if (t > 0.927734375f) {{
        var r = fma(-1.72853470e-5f, t, 3.83197126e-4f);
        let u = fma(-3.88396438e-3f, t, 2.42546219e-2f);
        r = fma(r, s, u);
        r = fma(r, t, -1.06777877e-1f);
        r = fma(r, t, -6.34846687e-1f);
        r = fma(r, t, -1.28717512e-1f);
        r = fma(r, t, -t);
        let e = 1.0f - exp(r);
        return select(e, -e, x < 0.0f);
    }}
    var r = -5.96761703e-4f;
    r = fma(r, s, 4.99119423e-3f);
    r = fma(r, s, -2.67681349e-2f);
    r = fma(r, s, 1.12819925e-1f);
    r = fma(r, s, -3.76125336e-1f);
    r = fma(r, s, 1.28379166e-1f);
    return fma(r, x, x);
}}""")

    # -- the module -----------------------------------------------------------------------------

    def render_kernel(self, kernel: ir.Kernel, body: list[str]) -> str:
        lines = []
        if any(b.dtype == "float16" for b in kernel.buffers):
            lines.append("enable f16;")
        for i, b in enumerate(kernel.buffers):
            access = "read_write" if b.writable else "read"
            lines.append(f"@group(0) @binding({i}) var<storage, {access}> {b.name}: "
                         f"array<{_BINDING_TYPES[b.dtype]}>;")
        lines.append(f"@group(0) @binding({len(kernel.buffers)}) var<storage, read> info: "
                     "array<i32>;")
        for s in kernel.shared:
            lines.append(f"var<workgroup> {s.name}: array<{s.ty}, {s.size}>;")
        lines.append(self.helpers_source())
        x, y, z = kernel.workgroup
        lines.append(f"@compute @workgroup_size({x}, {y}, {z})")
        lines.append(f"fn {kernel.name}(@builtin(local_invocation_id) lid: vec3<u32>, "
                     "@builtin(workgroup_id) wid: vec3<u32>, "
                     "@builtin(num_workgroups) nwg: vec3<u32>) {")
        lines += body
        lines.append("}")
        return "\n".join(lines) + "\n"
