"""The C-family generator: OpenCL C and CUDA C are two dialects of one renderer.

Storage: every burnish dtype is stored natively (``bfloat16`` as its 16 bits in an unsigned
short, ``bool`` as one byte); ``float16`` and ``bfloat16`` compute in ``float``. The float8 and
float4 formats are stored as their code in one byte and compute in ``float`` (decoded at every
load, encoded at every store: ``burnish.jit.minifloat``); ``int4``/``uint4``/``int2``/``uint2``
take one byte per value (as ml_dtypes holds them on the host) and compute in ``int``, wrapped to
their bits at every store; ``uint16`` computes in ``int``, ``uint32`` in ``uint`` and ``uint64``
in ``long`` (the same bits: values from 2**63 up compare and convert as negative ``long``).
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from burnish.jit import ir
from burnish.jit.codegen.base import SUB_BYTE_INTS, Generator, float_literal
from burnish.jit.minifloat import DTYPES as SMALL_FLOATS

#: The storage dtypes that load as ``int`` from a narrower C type.
_NARROW_INTS = frozenset({"int16", "int8", "uint8", "uint16", *SUB_BYTE_INTS})


class CGenerator(Generator):
    """The shared renderer; ``OpenCLGenerator`` and ``CudaGenerator`` fill in the dialect."""

    TYPES = {"bool": "bool", "i32": "int", "u32": "uint", "i64": "long", "f32": "float",
             "f64": "double"}
    STORAGE = {"float64": "double", "float32": "float", "float16": "half", "bfloat16": "ushort",
               "int64": "long", "int32": "int", "int16": "short", "int8": "char",
               "uint8": "uchar", "bool": "uchar", "uint64": "ulong", "uint32": "uint",
               "uint16": "ushort", "int4": "char", "uint4": "uchar", "int2": "char",
               "uint2": "uchar", **dict.fromkeys(SMALL_FLOATS, "uchar")}
    STORAGE_NUMPY = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
                     "bfloat16": np.uint16, "int64": np.int64, "int32": np.int32,
                     "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.uint8,
                     "uint64": np.uint64, "uint32": np.uint32, "uint16": np.uint16,
                     "int4": np.int8, "uint4": np.uint8, "int2": np.int8, "uint2": np.uint8,
                     **dict.fromkeys(SMALL_FLOATS, np.uint8)}
    INT_SUFFIX = {"i32": "", "u32": "u", "i64": "L"}

    def storage_numpy(self, dtype: str) -> np.dtype:
        return np.dtype(self.STORAGE_NUMPY[dtype])

    def type_name(self, ty: str) -> str:
        return self.TYPES[ty]

    def literal(self, value, ty: str) -> str:
        if ty == "bool":
            return "true" if value else "false"
        if ir.is_float(ty):
            text = float_literal(value)
            if text is None:
                bits = np.array(value, dtype=np.float64 if ty == "f64" else np.float32)
                word = bits.view(np.uint64 if ty == "f64" else np.uint32).item()
                return self.bitcast(f"{word}{self.INT_SUFFIX['u32']}" if ty == "f32"
                                    else f"{word}UL", "u32" if ty == "f32" else "u64", ty)
            return text + ("f" if ty == "f32" else "")
        if ty == "i32" and value == -(2**31):
            return "(-2147483647 - 1)"
        if ty == "i64" and value == -(2**63):
            return f"(-9223372036854775807{self.INT_SUFFIX['i64']} - 1)"
        return f"{int(value)}{self.INT_SUFFIX[ty]}"

    def declare(self, var: ir.Var, value: str) -> str:
        return f"{self.type_name(var.ty)} {var.name} = {value};"

    def for_header(self, stmt: ir.For, start: str, stop: str, step: str) -> str:
        v = stmt.var.name
        return f"for (int {v} = {start}; {v} < {stop}; {v} += {step})"

    def select(self, cond: str, a: str, b: str, ty: str) -> str:
        return f"({cond} ? {a} : {b})"

    def load(self, buffer: ir.Buffer, index: str) -> str:
        ref = f"{buffer.name}[{index}]"
        if buffer.dtype == "bool":
            return f"({ref} != 0)"
        if buffer.dtype == "bfloat16":
            return self.bitcast(f"((uint){ref} << 16)", "u32", "f32")
        if buffer.dtype == "float16":
            return self.load_half(buffer.name, index)
        if buffer.dtype in SMALL_FLOATS:
            return self.decode_float(f"(({self.TYPES['u32']}){ref})", buffer.dtype)
        if buffer.dtype in _NARROW_INTS:
            return f"(({self.TYPES['i32']}){ref})"
        if buffer.dtype == "uint64":
            return f"(({self.TYPES['i64']}){ref})"
        return ref

    def store(self, buffer: ir.Buffer, index: str, value: str) -> str:
        if buffer.dtype == "float16":
            return self.store_half(buffer.name, index, value) + ";"
        if buffer.dtype == "bfloat16":
            rounded = self.bitcast(self.narrow(value, "bfloat16"), "f32", "u32")
            value = f"(ushort)({rounded} >> 16)"
        elif buffer.dtype in SMALL_FLOATS:
            value = f"({self.STORAGE[buffer.dtype]})({self.encode_float(value, buffer.dtype)})"
        elif buffer.dtype in SUB_BYTE_INTS:
            value = f"({self.STORAGE[buffer.dtype]})({self.wrap_bits(value, buffer.dtype)})"
        elif buffer.dtype in ("bool", "uint64", *_NARROW_INTS):
            value = f"({self.STORAGE[buffer.dtype]})({value})"
        return f"{buffer.name}[{index}] = {value};"

    def cast(self, value: str, src: str, dst: str) -> str:
        if dst == "bool":
            return f"({value} != {self.literal(0, src)})" if src != "bool" else value
        return f"(({self.type_name(dst)})({value}))"

    def narrow(self, value: str, dtype: str) -> str:
        if dtype in SUB_BYTE_INTS:
            return self.wrap_bits(value, dtype)
        if dtype in _NARROW_INTS:
            return f"(({self.TYPES['i32']})({self.STORAGE[dtype]})({value}))"
        if dtype in SMALL_FLOATS:
            return self.round_float(value, dtype)
        if dtype == "bfloat16":
            return f"{self._round_bf16()}({value})"
        if dtype == "float16":
            return f"{self._round_f16()}({value})"
        return value

    FUNCTIONS = {"round": "rint", "min": "fmin", "max": "fmax", "abs": "fabs"}

    def call(self, fn: str, args: list[str], ty: str) -> str:
        if fn == "dot4i8":
            return f"{self._dot4i8()}({args[0]}, {args[1]})"
        if ir.is_int(ty):
            if fn == "abs":
                return f"(({args[0]}) < 0 ? -({args[0]}) : ({args[0]}))"
            if fn in ("min", "max"):
                op = "<" if fn == "min" else ">"
                return f"(({args[0]}) {op} ({args[1]}) ? ({args[0]}) : ({args[1]}))"
            raise TypeError(f"kernel IR: {fn} is not defined for {ty}")
        if fn in ("isnan", "isinf"):
            return f"({fn}({args[0]}) != 0)"
        return f"{self.FUNCTIONS.get(fn, fn)}({', '.join(args)})"

    def _dot4i8(self) -> str:
        # Byte j of a word whatever a signed right shift fills in, sign-extended with defined
        # arithmetic only.
        terms = " + ".join(f"((((a >> {8 * j}) & 255) ^ 128) - 128) * "
                           f"((((b >> {8 * j}) & 255) ^ 128) - 128)" for j in range(4))
        return self.helper("dot4i8", f"""
{self.FUNCTION_QUALIFIER}int dot4i8(int a, int b) {{
    return {terms};
}}""")

    def _round_bf16(self) -> str:
        return self.helper("round_bf16", f"""
{self.FUNCTION_QUALIFIER}float round_bf16(float x) {{
    if (isnan(x)) return x;
    uint b = {self.bitcast("x", "f32", "u32")};
    b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    return {self.bitcast("b", "u32", "f32")};
}}""")

    def _round_f16(self) -> str:
        return self.helper("round_f16", f"""
{self.FUNCTION_QUALIFIER}float round_f16(float x) {{
    float a = fabs(x);
    if (isnan(x)) return x;
    if (a >= 65520.0f) return copysign(INFINITY, x);
    if (a < 6.103515625e-05f) return copysign(rint(a * 16777216.0f) / 16777216.0f, x);
    uint b = {self.bitcast("a", "f32", "u32")};
    b = (b + 0x0fffu + ((b >> 13) & 1u)) & 0xffffe000u;
    return copysign({self.bitcast("b", "u32", "f32")}, x);
}}""")

    FUNCTION_QUALIFIER = ""

    def function_source(self, name: str, params: list[ir.Var], result: str, body: str) -> str:
        args = ", ".join(f"{self.type_name(p.ty)} {p.name}" for p in params)
        return (f"{self.FUNCTION_QUALIFIER}{self.type_name(result)} {name}({args}) {{\n"
                f"    return {body};\n}}")

    @abstractmethod
    def load_half(self, name: str, index: str) -> str:
        """A ``float16`` element read as ``float``."""

    @abstractmethod
    def store_half(self, name: str, index: str, value: str) -> str:
        """A ``float`` written as a ``float16`` element, rounded to nearest even."""

    @abstractmethod
    def signature(self, kernel: ir.Kernel) -> str:
        """The kernel's qualifiers, name and parameters."""

    @abstractmethod
    def shared_declaration(self, array: ir.Shared) -> str:
        """A workgroup-memory array, declared in the kernel's body."""

    def preamble(self, kernel: ir.Kernel) -> str:
        return ""

    def body_prelude(self, kernel: ir.Kernel) -> list[str]:
        """Lines that open the kernel's body (before workgroup memory)."""
        return []

    #: The vector types of wide workgroup-memory loads: ``<name><width>`` per compute type.
    VECTOR_NAMES = {"f32": "float", "i32": "int", "u32": "uint"}
    #: How a wide load of ``{vector}`` from ``{array} + {index}`` is spelled (None: the
    #: language has none here, and runs are one load per word).
    WIDE_LOAD: str | None = None

    def shared_run(self, s: ir.SharedLoadRun) -> str:
        """``{ float4 r_ = <wide load of array + index>; a = r_.x; ... }``: 32-bit words
        (arrays declared 16-byte aligned), else one load each."""
        if self.WIDE_LOAD is None or s.array.ty not in self.VECTOR_NAMES:
            return super().shared_run(s)
        vector = f"{self.VECTOR_NAMES[s.array.ty]}{len(s.vars)}"
        load = self.WIDE_LOAD.format(vector=vector, array=s.array.name, index=self.expr(s.index))
        parts = " ".join(f"{v.name} = r_.{'xyzw'[i]};" for i, v in enumerate(s.vars))
        return f"{{ {vector} r_ = {load}; {parts} }}"

    def render_kernel(self, kernel: ir.Kernel, body: list[str]) -> str:
        shared = ["    " + self.shared_declaration(s) for s in kernel.shared]
        parts = [self.preamble(kernel), self.helpers_source(), self.signature(kernel) + " {",
                 *self.body_prelude(kernel), *shared, *body, "}", ""]
        return "\n".join(p for p in parts if p is not None)


class OpenCLGenerator(CGenerator):
    """OpenCL C 1.2: ``float16`` through ``vload_half``/``vstore_half_rte`` (no extension
    needed), ``float64`` with ``cl_khr_fp64``."""

    language = "opencl"
    elements_per_invocation = 8
    barrier_statement = "barrier(CLK_LOCAL_MEM_FENCE);"

    def preamble(self, kernel: ir.Kernel) -> str:
        if "float64" in kernel.dtypes() or _uses_f64(kernel):
            return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
        return ""

    def bitcast(self, value: str, src: str, dst: str) -> str:
        name = {"u32": "uint", "i32": "int", "f32": "float", "i64": "long", "u64": "ulong",
                "f64": "double"}[dst]
        return f"as_{name}({value})"

    def load_half(self, name: str, index: str) -> str:
        return f"vload_half({index}, {name})"

    def store_half(self, name: str, index: str, value: str) -> str:
        return f"vstore_half_rte({value}, {index}, {name})"

    def builtin(self, which: str, axis: int) -> str:
        fn = {"local_id": "get_local_id", "group_id": "get_group_id",
              "num_groups": "get_num_groups"}[which]
        return f"((int){fn}({axis}))"

    def signature(self, kernel: ir.Kernel) -> str:
        params = []
        for b in kernel.buffers:
            const = "" if b.writable else "const "
            params.append(f"__global {const}{self.STORAGE[b.dtype]}* restrict {b.name}"
                          if b.dtype != "float16" else
                          f"__global {const}half* {b.name}")
        # Global, not __constant: on NVIDIA's OpenCL a 64M-element add reached 91% of the copy
        # rate with info in global memory and 81% with it in __constant (same kernel otherwise).
        params.append("__global const int* restrict info")
        x, y, z = kernel.workgroup
        return (f"__kernel __attribute__((reqd_work_group_size({x}, {y}, {z})))\n"
                f"void {kernel.name}({', '.join(params)})")

    wide_shared_loads = True
    WIDE_LOAD = "*(__local const {vector}*)({array} + {index})"

    def shared_declaration(self, array: ir.Shared) -> str:
        return (f"__local {self.type_name(array.ty)} {array.name}[{array.size}] "
                f"__attribute__((aligned(16)));")


#: The int words of ``info`` a CUDA launch passes by value (a kernel parameter struct).
CUDA_INFO_WORDS = 128


class CudaGenerator(CGenerator):
    """CUDA C++ for NVRTC (CuPy's RawModule): ``extern "C"`` kernels."""

    language = "cuda"
    elements_per_invocation = 8
    barrier_statement = "__syncthreads();"
    TYPES = {**CGenerator.TYPES, "u32": "unsigned int", "i64": "long long"}
    STORAGE = {**CGenerator.STORAGE, "float16": "__half", "bfloat16": "unsigned short",
               "int64": "long long", "int8": "signed char", "uint8": "unsigned char",
               "bool": "unsigned char", "uint64": "unsigned long long",
               "uint32": "unsigned int", "uint16": "unsigned short", "int4": "signed char",
               "uint4": "unsigned char", "int2": "signed char", "uint2": "unsigned char",
               **dict.fromkeys(SMALL_FLOATS, "unsigned char")}
    INT_SUFFIX = {"i32": "", "u32": "u", "i64": "LL"}
    FUNCTION_QUALIFIER = "__device__ "

    def preamble(self, kernel: ir.Kernel) -> str:
        return ("#include <cuda_fp16.h>\n"
                "typedef unsigned short ushort;\ntypedef unsigned int uint;\n"
                "#define INFINITY __int_as_float(0x7f800000)\n"
                "#define NAN __int_as_float(0x7fffffff)\n"
                f"struct BurnishInfo {{ int v[{CUDA_INFO_WORDS}]; }};\n")

    def body_prelude(self, kernel: ir.Kernel) -> list[str]:
        return ["    const int* info = info_args.v;"]

    def bitcast(self, value: str, src: str, dst: str) -> str:
        ints = {"i32": "int", "u32": "unsigned int", "i64": "long long",
                "u64": "unsigned long long"}
        if src in ints and dst in ints:  # same width: a C cast keeps the bits
            return f"(({ints[dst]})({value}))"
        fn = {("f32", "u32"): "__float_as_uint", ("u32", "f32"): "__uint_as_float",
              ("f32", "i32"): "__float_as_int", ("i32", "f32"): "__int_as_float",
              ("f64", "i64"): "__double_as_longlong", ("i64", "f64"): "__longlong_as_double",
              ("u64", "f64"): "__longlong_as_double"}[(src, dst)]
        return f"{fn}({value})"

    def call(self, fn: str, args: list[str], ty: str) -> str:
        if fn == "dot4i8":
            return f"__dp4a({args[0]}, {args[1]}, 0)"
        return super().call(fn, args, ty)

    def load_half(self, name: str, index: str) -> str:
        return f"__half2float({name}[{index}])"

    def store_half(self, name: str, index: str, value: str) -> str:
        return f"{name}[{index}] = __float2half_rn({value})"

    def builtin(self, which: str, axis: int) -> str:
        var = {"local_id": "threadIdx", "group_id": "blockIdx", "num_groups": "gridDim"}[which]
        return f"((int){var}.{'xyz'[axis]})"

    def signature(self, kernel: ir.Kernel) -> str:
        params = []
        for b in kernel.buffers:
            const = "" if b.writable else "const "
            params.append(f"{const}{self.STORAGE[b.dtype]}* __restrict__ {b.name}")
        # info travels by value in the launch's parameters: no copy to the device per launch.
        params.append("const BurnishInfo info_args")
        return f'extern "C" __global__ void {kernel.name}({", ".join(params)})'

    wide_shared_loads = True
    WIDE_LOAD = "*reinterpret_cast<const {vector}*>({array} + {index})"

    def shared_declaration(self, array: ir.Shared) -> str:
        return f"__shared__ __align__(16) {self.type_name(array.ty)} {array.name}[{array.size}];"


def _uses_f64(kernel: ir.Kernel) -> bool:
    found = False

    def visit(stmts):
        nonlocal found
        for s in stmts:
            if isinstance(s, ir.Expr):  # a list of vars (``SharedLoadRun``)
                found = found or _expr_uses_f64(s)
                continue
            for value in vars(s).values():
                if isinstance(value, ir.Var) and value.ty == "f64":
                    found = True
                elif isinstance(value, list):
                    visit(value)
                elif isinstance(value, ir.Expr) and _expr_uses_f64(value):
                    found = True

    visit(kernel.body)
    return found or any(s.ty == "f64" for s in kernel.shared)


def _expr_uses_f64(e: ir.Expr) -> bool:
    if e.ty == "f64":
        return True
    return any(_expr_uses_f64(v) for name in getattr(type(e), "__slots__", ())
               for v in [getattr(e, name)] if isinstance(v, ir.Expr)) or (
        isinstance(e, ir.Call) and any(_expr_uses_f64(a) for a in e.args))
