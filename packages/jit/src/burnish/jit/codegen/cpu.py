"""C for the CPU: the C-family renderer's third dialect, with each workgroup run as loops.

A kernel becomes a function that runs one workgroup, called for every workgroup of a launch
from a parallel loop on the cpu backend's thread pool (``PARALLEL_HEADER``). Inside it the
workgroup's invocations are a loop over the local id (a *work-item loop*, as CPU OpenCL
drivers compile kernels). Barriers split a kernel into
regions, each its own work-item loop: every invocation finishes one region before any starts
the next, which is what a barrier promises. The statements that hold a barrier (loops and
branches around it) run once per workgroup, between the loops: their conditions are the same
for every invocation of a workgroup (as they must be on a GPU too, where an invocation that
skips a barrier is undefined), so the first invocation's values decide them. A variable that
lives across regions (or decides such a statement) becomes an array with one element per
invocation; the others stay scalars, local to their loop.

Storage is native except ``float16`` and ``bfloat16``, held as their 16 bits and computed in
``float``; ``bool`` is one byte; the float8, float4 and sub-byte int dtypes are stored as the
C-family renderer stores them (one byte per value).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from burnish.jit import ir
from burnish.jit.codegen.c import CGenerator
from burnish.jit.minifloat import DTYPES as SMALL_FLOATS

_HEADERS = """\
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
"""
# After the declarations of vector math: tgmath.h makes ``exp`` a macro.
_PRELUDE = """\
#include <tgmath.h>
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
"""

#: Declarations of every kernel source that runs parallel loops: ``burnish_parallel(task,
#: context, n, parts)`` runs ``task(context, begin, end)`` over ``parts`` ranges of ``[0, n)``
#: on the cpu backend's thread pool (set by ``burnish.cpu.threads.Threads.attach`` when the
#: library loads; in a library not attached, one serial call); ``burnish_threads`` is the
#: pool's thread count, and ``burnish_parts(worth)`` the parts of a loop worth running on
#: several threads (a few per thread, so that a thread that starts late still gets some).
PARALLEL_HEADER = r"""
#include <stddef.h>
#include <stdint.h>
typedef void (*burnish_task)(void *context, int64_t begin, int64_t end);
typedef void (*burnish_parallel_fn)(burnish_task task, void *context, int64_t n,
                                    int64_t parts);
static void burnish_serial(burnish_task task, void *context, int64_t n, int64_t parts) {
    (void)parts;
    task(context, 0, n);
}
static burnish_parallel_fn burnish_parallel = burnish_serial;
static int burnish_threads = 1;
void burnish_threads_attach(void *parallel, int threads) {
    burnish_parallel = (burnish_parallel_fn)parallel;
    burnish_threads = threads;
}
static inline int64_t burnish_parts(int worth) {
    return worth ? 4 * (int64_t)burnish_threads : 1;
}
"""

#: Most ``info`` words an epilogue's launch may have (``EPILOGUE_HEADER``).
EPILOGUE_WORDS = 64

#: For C code of the cpu backend that runs a generated elementwise kernel as the epilogue of
#: its own work (a convolution's activation): ``burnish_epilogue(e, start, count)`` runs the
#: flat elementwise kernel of one input ``e->fn`` (``<name>(out, in, info, groups...)``, as
#: ``CpuGenerator`` renders it) on ``count`` elements from ``start``, just written, into the
#: kernel's output ``e->shift`` bytes on; with the launch's own ``info`` (its scalars) but its
#: element count and input offset. Nothing where ``e`` is NULL. In a loop on the thread pool
#: the kernel runs on the calling thread (a nested loop runs serially).
EPILOGUE_HEADER = r"""
#include <string.h>
typedef void (*burnish_elementwise_fn)(void *out, const void *in, const int32_t *info, int ngx,
                                       int ngy, int ngz);
struct burnish_epilogue {
    burnish_elementwise_fn fn;
    const int32_t *info; /* the launch's: [elements, the input's offset, scalars...] */
    int64_t words;       /* info's length, at most BURNISH_EPILOGUE_WORDS */
    int64_t shift;       /* bytes from an element of the input to its output */
    int64_t group;       /* elements a workgroup takes */
    int64_t size;        /* bytes an element */
};
#define BURNISH_EPILOGUE_WORDS """ + str(EPILOGUE_WORDS) + r"""
static __attribute__((unused)) void burnish_epilogue(const struct burnish_epilogue *e,
                                                     void *start, int64_t count) {
    if (!e || count <= 0) return;
    int32_t info[BURNISH_EPILOGUE_WORDS];
    memcpy(info, e->info, sizeof(int32_t) * (size_t)e->words);
    info[0] = (int32_t)count;
    info[1] = 0;
    e->fn((char *)start + e->shift, start, info, (int)((count + e->group - 1) / e->group), 1, 1);
}
/* The same on rows elements of width, ld apart. */
static __attribute__((unused)) void burnish_epilogue_rows(const struct burnish_epilogue *e,
                                                          void *start, int64_t rows,
                                                          int64_t width, int64_t ld) {
    if (!e) return;
    if (width == ld) {
        burnish_epilogue(e, start, rows * width);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        burnish_epilogue(e, (char *)start + r * ld * e->size, width);
}
"""

_BITS = {"u32": "uint32_t", "i32": "int32_t", "f32": "float", "u64": "uint64_t",
         "i64": "int64_t", "f64": "double"}


#: Math functions with vector forms in glibc's libmvec: declared ``omp declare simd`` (where
#: the compiler has it), a loop calling them is vectorized like any other.
VECTOR_MATH = ("exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "erf")


#: Launches of fewer workgroups run on the calling thread: waking the other threads costs more
#: than they would save.
PARALLEL_GROUPS = 16


def vector_math_declarations() -> str:
    """C declarations that let the compiler call libmvec's vector forms of ``VECTOR_MATH``."""
    lines = []
    for fn in VECTOR_MATH:
        lines += ["#pragma omp declare simd notinbranch", f"float {fn}f(float);",
                  "#pragma omp declare simd notinbranch", f"double {fn}(double);"]
    return "\n".join(lines) + "\n"


def has_barrier(stmts: list) -> bool:
    """Whether any of ``stmts`` is or holds a barrier."""
    for s in stmts:
        if isinstance(s, ir.Barrier):
            return True
        if isinstance(s, ir.If) and (has_barrier(s.then) or has_barrier(s.orelse)):
            return True
        if isinstance(s, (ir.For, ir.While)) and has_barrier(s.body):
            return True
    return False


class CpuGenerator(CGenerator):
    """C99 (GCC and Clang) with OpenMP's ``simd`` pragmas: ``<name>(buffers..., info,
    groups_x, groups_y, groups_z)`` runs a whole launch, its workgroups spread over the CPU's
    cores by ``PARALLEL_HEADER``'s parallel loop."""

    language = "c-cpu"
    TYPES = {"bool": "bool", "i32": "int32_t", "u32": "uint32_t", "i64": "int64_t",
             "f32": "float", "f64": "double"}
    STORAGE = {"float64": "double", "float32": "float", "float16": "uint16_t",
               "bfloat16": "uint16_t", "int64": "int64_t", "int32": "int32_t",
               "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t", "bool": "uint8_t",
               "uint64": "uint64_t", "uint32": "uint32_t", "uint16": "uint16_t",
               "int4": "int8_t", "uint4": "uint8_t", "int2": "int8_t", "uint2": "uint8_t",
               **dict.fromkeys(SMALL_FLOATS, "uint8_t")}
    INT_SUFFIX = {"i32": "", "u32": "u", "i64": "LL"}
    FUNCTION_QUALIFIER = "static inline "
    elementwise_rows = True

    def __init__(self, vector_math: bool = False) -> None:
        super().__init__()
        #: Whether kernels declare libmvec's vector math (``vector_math_declarations``).
        self.vector_math = vector_math
        self._promoted: set[str] = set()
        self._uses: dict[str, set] = {}
        self._context: object = None
        self._exit = "item_end"
        self._regions = 0
        self._barriers = False
        self._workgroup = (1, 1, 1)
        self._loop_vars: set[str] = set()
        self._limit: tuple[str, str] | None = None

    # -- spelling ---------------------------------------------------------------------------------

    def bitcast(self, value: str, src: str, dst: str) -> str:
        if src[0] in "iu" and dst[0] in "iu":  # same width: a C cast keeps the bits
            return f"(({_BITS[dst]})({value}))"
        name = f"bits_{src}_{dst}"
        self.helper(name, f"static inline {_BITS[dst]} {name}({_BITS[src]} x) "
                          f"{{ {_BITS[dst]} y; memcpy(&y, &x, sizeof y); return y; }}")
        return f"{name}({value})"

    def binary(self, op: str, a: str, b: str, a_ty: str, b_ty: str) -> str:
        if op in ("/", "%") and a_ty in ("i32", "u32"):
            # 32-bit quotients through double division, which is exact for them (the distance
            # of a quotient to the next integer, at least 1/|b|, is above half an ulp) and
            # which vectorizes where integer division does not: index arithmetic is made of
            # these. Division by zero gives a value instead of a trap, as on a GPU.
            t = self.TYPES[a_ty]
            name = f"div_{a_ty}"
            self.helper(name, f"static inline {t} {name}({t} a, {t} b) "
                              f"{{ return ({t})((double)a / (double)b); }}")
            if op == "/":
                return f"{name}({a}, {b})"
            mod = f"mod_{a_ty}"
            self.helper(mod, f"static inline {t} {mod}({t} a, {t} b) "
                             f"{{ return a - b * {name}(a, b); }}")
            return f"{mod}({a}, {b})"
        return super().binary(op, a, b, a_ty, b_ty)

    def call(self, fn: str, args: list[str], ty: str) -> str:
        if fn == "erf" and ty == "f32":
            return f"{self._erf_f32()}({args[0]})"
        return super().call(fn, args, ty)

    def _erf_f32(self) -> str:
        # float32 erf inline, within 1 ulp (N. Juffa's minimax fits, as the WGSL generator's)
        # with its exp inline too (Cephes' expf polynomial) and both sides of its branch
        # computed and selected: a loop of it vectorizes as plain arithmetic, where libmvec's
        # erff is a call per vector that spills whatever the loop keeps live across it, and
        # costs about 10% more per element.
        return self.helper("erf_f32", """
static inline float erf_f32(float x) {
    const float t = fabsf(x), s = x * x;
    /* |x| > 0.927734375: 1 - exp(r), r a polynomial in |x| */
    float r = fmaf(-1.72853470e-5f, t, 3.83197126e-4f);
    const float u = fmaf(-3.88396438e-3f, t, 2.42546219e-2f);
    r = fmaf(r, s, u);
    r = fmaf(r, t, -1.06777877e-1f);
    r = fmaf(r, t, -6.34846687e-1f);
    r = fmaf(r, t, -1.28717512e-1f);
    r = fmaf(r, t, -t);
    r = r < -87.0f ? -87.0f : r;  /* exp(r) = 2^k exp(f), |f| <= ln(2) / 2 */
    /* k = rint(r / ln(2)) by adding 1.5 * 2^23 + 127: j's low bits are k + 127 */
    const float j = fmaf(r, 1.44269504f, 12583039.0f);
    const float k = j - 12583039.0f;
    float f = fmaf(k, -0.693359375f, r);
    f = fmaf(k, 2.12194440e-4f, f);
    float e = 1.9875691500e-4f;
    e = fmaf(e, f, 1.3981999507e-3f);
    e = fmaf(e, f, 8.3334519073e-3f);
    e = fmaf(e, f, 4.1665795894e-2f);
    e = fmaf(e, f, 1.6666665459e-1f);
    e = fmaf(e, f, 5.0000001201e-1f);
    e = fmaf(e, f * f, f) + 1.0f;
    uint32_t bits;
    memcpy(&bits, &j, sizeof bits);
    bits <<= 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    const float large = copysignf(fmaf(-e, scale, 1.0f), x);
    /* |x| <= 0.927734375 (and NaN): x + x * q(x^2) */
    float q = -5.96761703e-4f;
    q = fmaf(q, s, 4.99119423e-3f);
    q = fmaf(q, s, -2.67681349e-2f);
    q = fmaf(q, s, 1.12819925e-1f);
    q = fmaf(q, s, -3.76125336e-1f);
    q = fmaf(q, s, 1.28379166e-1f);
    const float small = fmaf(q, x, x);
    return t > 0.927734375f ? large : small;
}""")

    def load_half(self, name: str, index: str) -> str:
        self.helper("half_to_float", f"""
static inline float half_to_float(uint16_t h) {{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, bits = h & 0x7fffu;
    if (bits >= 0x7c00u) return {self.bitcast("sign | 0x7f800000u | (bits & 0x3ffu) << 13",
                                              "u32", "f32")};
    if (bits < 0x400u) {{
        float f = (float)bits * 5.9604644775390625e-08f;
        return sign ? -f : f;
    }}
    return {self.bitcast("sign | ((bits + 0x1c000u) << 13)", "u32", "f32")};
}}""")
        return f"half_to_float({name}[{index}])"

    def store_half(self, name: str, index: str, value: str) -> str:
        rounded = self._round_f16()
        self.helper("float_to_half", f"""
static inline uint16_t float_to_half(float x) {{
    float r = {rounded}(x);
    uint32_t b = {self.bitcast("r", "f32", "u32")};
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
    float a = fabs(r);
    if (isnan(a)) return sign | 0x7e00u;
    if (a >= 65536.0f) return sign | 0x7c00u;
    if (a < 6.103515625e-05f) return sign | (uint16_t)(a * 16777216.0f);
    return sign | (uint16_t)(((b & 0x7fffffffu) - 0x38000000u) >> 13);
}}""")
        return f"{name}[{index}] = float_to_half({value})"

    def builtin(self, which: str, axis: int) -> str:
        if which == "local_id":
            if self._context == "uniform":
                raise ValueError(
                    "kernel IR: a loop or branch around a barrier depends on the local id "
                    "(it must be the same for every invocation of a workgroup)")
            return ("lx", "ly", "lz")[axis]
        return {"group_id": "gx", "num_groups": "ngx"}[which][:-1] + "xyz"[axis]

    def fresh(self) -> CpuGenerator:
        clone = super().fresh()
        assert isinstance(clone, CpuGenerator)
        # A helper's parameters are plain scalars, whatever the kernel promotes.
        clone._promoted, clone._uses, clone._context = set(), {}, None
        return clone

    def signature(self, kernel: ir.Kernel) -> str:  # the entry point's: see render_kernel
        return ""

    def shared_declaration(self, array: ir.Shared) -> str:
        return f"{self.type_name(array.ty)} {array.name}[{array.size}];"

    def storage_numpy(self, dtype: str) -> np.dtype:
        return np.dtype(self.STORAGE_NUMPY[dtype])

    # -- variables: scalars in one work-item loop, arrays across several -----------------------

    def expr(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Var):
            return self._var(e.name)
        return super().expr(e)

    def _var(self, name: str) -> str:
        self._uses.setdefault(name, set()).add(self._context)
        if name in self._promoted:
            return f"{name}[{'0' if self._context == 'uniform' else 'lid'}]"
        return name

    def declare(self, var: ir.Var, value: str) -> str:
        self._uses.setdefault(var.name, set()).add(self._context)
        if var.name in self._promoted:
            return f"{var.name}[lid] = {value};"
        return f"{self.type_name(var.ty)} {var.name} = {value};"

    def for_header(self, stmt: ir.For, start: str, stop: str, step: str) -> str:
        header = super().for_header(stmt, start, stop, step)
        total = _sum_into(stmt)
        if total is not None and total not in self._promoted:
            # Nothing but the sum crosses iterations: it may be added in any order, so the
            # loop vectorizes (its math calls through libmvec), as a float sum would not.
            return f"#pragma omp simd reduction(+:{total})\n{header}"
        return header

    # -- the walk ---------------------------------------------------------------------------------

    def generate(self, kernel: ir.Kernel) -> str:
        kernel = dataclasses.replace(kernel, body=ir.scalar_runs(kernel.body))
        self._workgroup = kernel.workgroup
        self._barriers = has_barrier(kernel.body)
        self._promoted = set()
        self._loop_vars = set()
        if self._barriers:
            # First walk: which regions use each variable; then promote those used in several.
            self._uses = {}
            self._walk(kernel)
            self._promoted = {name for name, where in self._uses.items()
                              if (len(where) > 1 or "uniform" in where)
                              and name not in self._loop_vars}
        return self._walk(kernel)

    def _walk(self, kernel: ir.Kernel) -> str:
        self._helpers = {}
        self._regions = 0
        self._limit = None
        lines: list[str] = []
        if self._barriers:
            self._uniform(kernel.body, lines, 1)
        else:
            self._items(self._bounded(kernel, lines), lines, 1)
        return self.render_kernel(kernel, lines)

    def _bounded(self, kernel: ir.Kernel, lines: list[str]) -> list:
        """The statements left for the work-item loop once a kernel's leading bounds check
        (``i = group * size + local_id; if (i >= n) return``) is made its loop's bound: a loop
        with no way out but its end is one the compiler vectorizes. Declarations before the
        check that are the same for every invocation move before the loop."""
        body, x = kernel.body, kernel.workgroup[0]
        self._limit = None
        if kernel.workgroup[1:] != (1, 1):
            return body
        uniform: set[str] = set()
        for at, s in enumerate(body):
            if isinstance(s, ir.Declare) and _uniform_expr(s.value, uniform):
                uniform.add(s.var.name)
                continue
            if not (isinstance(s, ir.Declare) and isinstance(s.value, ir.Binary)
                    and s.value.op == "+" and _is_local_x(s.value.b)
                    and _uniform_expr(s.value.a, uniform) and at + 1 < len(body)):
                return body
            guard = body[at + 1]
            if not (isinstance(guard, ir.If) and not guard.orelse
                    and len(guard.then) == 1 and isinstance(guard.then[0], ir.Return)
                    and isinstance(guard.cond, ir.Binary) and guard.cond.op == ">="
                    and isinstance(guard.cond.a, ir.Var) and guard.cond.a.name == s.var.name
                    and _uniform_expr(guard.cond.b, uniform)):
                return body
            self._context = "uniform"
            self._block(body[:at], lines, 1)
            lines.append(f"    const int32_t item_base = {self.expr(s.value.a)};")
            lines.append(f"    int32_t item_limit = {self.expr(guard.cond.b)} - item_base;")
            lines.append(f"    if (item_limit > {x}) item_limit = {x};")
            self._limit = ("item_limit", s.var.name)
            return body[at + 2:]
        return body

    def _block(self, stmts: list, lines: list[str], depth: int) -> None:
        for s in stmts:
            if isinstance(s, ir.Assign):
                lines.append(f"{'    ' * depth}{self._var(s.var.name)} = "
                             f"{self.expr(s.value)};")
            elif isinstance(s, ir.Return):
                pad = "    " * depth
                if self._barriers:
                    lines.append(f"{pad}done[lid] = 1;")
                lines.append(f"{pad}goto {self._exit};")
            else:
                super()._block([s], lines, depth)

    def _items(self, stmts: list, lines: list[str], depth: int) -> None:
        """A work-item loop running ``stmts`` (no barrier among them) for each invocation."""
        if not stmts:
            return
        _check_breaks(stmts)
        self._regions += 1
        self._context = self._regions
        self._exit = f"item_end{self._regions}"
        pad = "    " * depth
        x, y, z = self._workgroup
        bound, index = self._limit or (str(x * y * z), None)
        lines.append(f"{pad}for (int lid = 0; lid < {bound}; lid++) {{")
        inner = pad + "    "
        lines.append(f"{inner}const int lx = lid % {x}, ly = (lid / {x}) % {y}, "
                     f"lz = lid / {x * y};")
        lines.append(f"{inner}(void)lx; (void)ly; (void)lz;")
        if index is not None:
            lines.append(f"{inner}const int32_t {index} = item_base + lid;")
        if self._barriers:
            lines.append(f"{inner}if (done[lid]) continue;")
        self._block(stmts, lines, depth + 1)
        lines.append(f"{inner}{self._exit}: ;")
        lines.append(pad + "}")

    def _uniform(self, stmts: list, lines: list[str], depth: int) -> None:
        """``stmts`` of a kernel with barriers: the barrier-free runs as work-item loops, the
        statements holding barriers once, between them."""
        pad = "    " * depth
        pending: list = []
        for s in stmts:
            if not has_barrier([s]):
                pending.append(s)
                continue
            self._items(pending, lines, depth)
            pending = []
            self._context = "uniform"
            if isinstance(s, ir.Barrier):
                continue
            if isinstance(s, ir.If):
                lines.append(f"{pad}if ({self.expr(s.cond)}) {{")
                self._uniform(s.then, lines, depth + 1)
                if s.orelse:
                    lines.append(f"{pad}}} else {{")
                    self._uniform(s.orelse, lines, depth + 1)
            elif isinstance(s, ir.For):
                self._loop_vars.add(s.var.name)  # the same for every invocation: a scalar
                lines.append(pad + self.for_header(s, self.expr(s.start), self.expr(s.stop),
                                                   self.expr(s.step)) + " {")
                self._uniform(s.body, lines, depth + 1)
            else:  # While
                lines.append(f"{pad}while ({self.expr(s.cond)}) {{")
                self._uniform(s.body, lines, depth + 1)
                self._context = "uniform"  # the condition is read again after the body
                self.expr(s.cond)
            lines.append(pad + "}")
        self._items(pending, lines, depth)

    def render_kernel(self, kernel: ir.Kernel, body: list[str]) -> str:
        x, y, z = kernel.workgroup
        items = x * y * z
        params = []
        for b in kernel.buffers:
            const = "" if b.writable else "const "
            params.append(f"{const}{self.STORAGE[b.dtype]}* restrict {b.name}")
        params.append("const int32_t* restrict info")
        names = [b.name for b in kernel.buffers] + ["info"]
        group = [f"static void {kernel.name}_group({', '.join(params)}, int gx, int gy, int gz, "
                 "int ngx, int ngy, int ngz) {",
                 "    (void)gx; (void)gy; (void)gz; (void)ngx; (void)ngy; (void)ngz;"]
        group += ["    " + self.shared_declaration(s) for s in kernel.shared]
        if self._barriers:
            types = _types(kernel.body)
            group += [f"    {self.type_name(types[name])} {name}[{items}];"
                      for name in sorted(self._promoted)]
            group.append(f"    uchar done[{items}] = {{0}};")
        # The launch's arguments in a struct, its workgroups in ranges on the thread pool.
        launch = f"{kernel.name}_launch"
        entry = [
            f"struct {launch} {{",
            *[f"    {p};" for p in params],
            "    int ngx, ngy, ngz;",
            "};",
            f"static void {kernel.name}_range(void *context, int64_t begin, int64_t end) {{",
            f"    const struct {launch} *l = context;",
            *[f"    {p} = l->{name};" for p, name in zip(params, names)],
            "    const int ngx = l->ngx, ngy = l->ngy, ngz = l->ngz;",
            "    for (long g = begin; g < end; g++) {",
            f"        {kernel.name}_group({', '.join(names)}, (int)(g % ngx), "
            "(int)(g / ngx % ngy), (int)(g / ((long)ngx * ngy)), ngx, ngy, ngz);",
            "    }",
            "}",
            f"void {kernel.name}({', '.join(params)}, int ngx, int ngy, int ngz) {{",
            f"    struct {launch} l = {{{', '.join(names)}, ngx, ngy, ngz}};",
            "    const long total = (long)ngx * ngy * ngz;",
            f"    burnish_parallel({kernel.name}_range, &l, total, "
            f"burnish_parts(total >= {PARALLEL_GROUPS}));",
            "}",
        ]
        prelude = (_HEADERS + PARALLEL_HEADER
                   + (vector_math_declarations() if self.vector_math else "") + _PRELUDE)
        parts = [prelude, self.helpers_source(), *group, *body, "}", *entry, ""]
        return "\n".join(parts)


def _types(stmts: list) -> dict[str, str]:
    """Every declared variable's compute type, by name."""
    found: dict[str, str] = {}
    for s in stmts:
        if isinstance(s, ir.Declare):
            found[s.var.name] = s.var.ty
        for child in (getattr(s, "then", None), getattr(s, "orelse", None),
                      getattr(s, "body", None)):
            if child:
                found.update(_types(child))
    return found


def _is_local_x(e: ir.Expr) -> bool:
    return isinstance(e, ir.Builtin) and e.which == "local_id" and e.axis == 0


def _uniform_expr(e: ir.Expr, uniform: set[str]) -> bool:
    """Whether ``e`` is the same for every invocation of a workgroup: built of constants, the
    launch's info, group coordinates and ``uniform`` variables (no buffer reads)."""
    if isinstance(e, (ir.Const, ir.InfoLoad)):
        return isinstance(e, ir.Const) or _uniform_expr(e.index, uniform)
    if isinstance(e, ir.Builtin):
        return e.which != "local_id"
    if isinstance(e, ir.Var):
        return e.name in uniform
    if isinstance(e, (ir.Binary, ir.Unary, ir.Cast, ir.Bitcast, ir.Select, ir.Call)):
        parts = e.args if isinstance(e, ir.Call) else [
            getattr(e, name) for name in ("a", "b", "cond") if hasattr(e, name)]
        return all(_uniform_expr(p, uniform) for p in parts)
    return False


def _check_breaks(stmts: list) -> None:
    """A ``break`` in a work-item loop must leave a loop inside it, not the loop around it."""
    for s in stmts:
        if isinstance(s, ir.Break):
            raise ValueError(
                "kernel IR: a break out of a loop that holds a barrier, from code that runs "
                "per invocation (the C generator runs such loops once per workgroup)")
        if isinstance(s, ir.If):
            _check_breaks(s.then)
            _check_breaks(s.orelse)


def _sum_into(loop: ir.For) -> str | None:
    """The variable a loop only adds terms to (its body one ``total = total + term``, the term
    free of ``total``), else None."""
    if len(loop.body) != 1 or not isinstance(loop.body[0], ir.Assign):
        return None
    target, value = loop.body[0].var.name, loop.body[0].value
    if not isinstance(value, ir.Binary) or value.op != "+":
        return None
    for mine, term in ((value.a, value.b), (value.b, value.a)):
        if isinstance(mine, ir.Var) and mine.name == target and not _reads(term, target):
            return target
    return None


def _reads(e: object, name: str) -> bool:
    """Whether expression ``e`` reads the variable ``name``."""
    if isinstance(e, ir.Var):
        return e.name == name
    if isinstance(e, tuple):
        return any(_reads(x, name) for x in e)
    if isinstance(e, ir.Expr):
        return any(_reads(getattr(e, slot, None), name)
                   for cls in type(e).__mro__ for slot in getattr(cls, "__slots__", ()))
    return False
