"""What every code generator shares: walking the IR, indentation, and helpers emitted on demand."""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod

import numpy as np

from burnish.jit import ir, minifloat


class Generator(ABC):
    """Renders an ``ir.Kernel`` to source. Subclasses say how each node is spelled."""

    #: The language's name, part of every kernel cache key.
    language: str = ""
    #: The most elements an invocation of a large elementwise kernel computes
    #: (``kernels.elementwise.elements_per_invocation``): GPUs need several loads in flight.
    elements_per_invocation: int = 1
    #: Whether ``ir.SharedLoadRun`` is rendered as one wide load (``shared_run``); otherwise
    #: it is spelled as one load per word before the walk.
    wide_shared_loads: bool = False
    #: Whether broadcast elementwise ops run a row of their last dim per invocation
    #: (``kernels.elementwise.ROW_CHUNK``): for generators whose invocations are loop
    #: iterations (the CPU's), not for GPUs, whose neighbouring invocations read neighbours.
    elementwise_rows: bool = False

    def __init__(self) -> None:
        self._helpers: dict[str, str] = {}

    # -- what a subclass provides -----------------------------------------------------------------

    @abstractmethod
    def storage_numpy(self, dtype: str) -> np.dtype:
        """How a buffer of burnish dtype ``dtype`` is laid out on the device."""

    @abstractmethod
    def type_name(self, ty: str) -> str: ...

    @abstractmethod
    def literal(self, value, ty: str) -> str: ...

    @abstractmethod
    def render_kernel(self, kernel: ir.Kernel, body: list[str]) -> str:
        """The whole source: helpers, signature, workgroup memory, ``body`` (rendered lines)."""

    @abstractmethod
    def declare(self, var: ir.Var, value: str) -> str: ...

    @abstractmethod
    def load(self, buffer: ir.Buffer, index: str) -> str: ...

    @abstractmethod
    def store(self, buffer: ir.Buffer, index: str, value: str) -> str: ...

    @abstractmethod
    def call(self, fn: str, args: list[str], ty: str) -> str: ...

    @abstractmethod
    def cast(self, value: str, src: str, dst: str) -> str: ...

    @abstractmethod
    def narrow(self, value: str, dtype: str) -> str:
        """``value`` (in its compute type) rounded or wrapped to storage dtype ``dtype``."""

    @abstractmethod
    def bitcast(self, value: str, src: str, dst: str) -> str: ...

    @abstractmethod
    def select(self, cond: str, a: str, b: str, ty: str) -> str: ...

    @abstractmethod
    def builtin(self, which: str, axis: int) -> str: ...

    @abstractmethod
    def for_header(self, stmt: ir.For, start: str, stop: str, step: str) -> str: ...

    barrier_statement = ""

    def shared_run(self, s: ir.SharedLoadRun) -> str:
        """``s`` spelled for generators with ``wide_shared_loads`` (they render it as one wide
        load where they can): here, one load per word."""
        return " ".join(f"{v.name} = {self.expr(ir.SharedLoad(s.array, s.index + i))};"
                        for i, v in enumerate(s.vars))

    def binary(self, op: str, a: str, b: str, a_ty: str, b_ty: str) -> str:
        if op == "%" and ir.is_float(a_ty):
            return self.call("fmod", [a, b], a_ty)
        return f"({a} {op} {b})"

    def unary(self, op: str, a: str, ty: str) -> str:
        return f"({op}{a})"

    # -- the walk ---------------------------------------------------------------------------------

    def generate(self, kernel: ir.Kernel) -> str:
        self._helpers = {}
        lines: list[str] = []
        self._block(kernel.body if self.wide_shared_loads else ir.scalar_runs(kernel.body),
                    lines, 1)
        return self.render_kernel(kernel, lines)

    def helper(self, name: str, source: str) -> str:
        """Register a helper function (emitted once, before the kernel); returns ``name``."""
        self._helpers.setdefault(name, source)
        return name

    def helpers_source(self) -> str:
        return "\n".join(self._helpers.values())

    # -- helpers written as IR: one definition, every language ----------------------------------

    @abstractmethod
    def function_source(self, name: str, params: list[ir.Var], result: str, body: str) -> str:
        """A helper function ``name(params) -> result`` returning the expression ``body``."""

    def fresh(self) -> Generator:
        """A generator of the same language and settings with no kernel state: it renders the
        body of a helper function."""
        clone = copy.copy(self)
        clone._helpers = {}
        return clone

    def function(self, name: str, params: list[ir.Var], body: ir.Expr) -> str:
        """Register a helper function returning ``body`` (an expression over ``params``),
        rendered in this language; returns ``name``."""
        if name not in self._helpers:
            inner = self.fresh()
            text = inner.expr(body)
            for key, source in inner._helpers.items():  # the helpers the body calls go first
                self._helpers.setdefault(key, source)
            self._helpers[name] = self.function_source(name, params, body.ty, text)
        return name

    def decode_float(self, code: str, dtype: str) -> str:
        """The ``f32`` value of ``code`` (``u32``), a code of float8/float4 dtype ``dtype``."""
        arg = ir.Var("code", "u32")
        return f"{self.function(f'decode_{dtype}', [arg], minifloat.decode(arg, dtype))}({code})"

    def encode_float(self, value: str, dtype: str) -> str:
        """The code (``u32``) of float8/float4 dtype ``dtype`` nearest to ``value`` (``f32``)."""
        arg = ir.Var("value", "f32")
        return f"{self.function(f'encode_{dtype}', [arg], minifloat.encode(arg, dtype))}({value})"

    def round_float(self, value: str, dtype: str) -> str:
        """``value`` (``f32``) rounded to float8/float4 dtype ``dtype``, as ``f32``."""
        return self.decode_float(self.encode_float(value, dtype), dtype)

    def wrap_bits(self, value: str, dtype: str) -> str:
        """``value`` (``i32``) wrapped to sub-byte int ``dtype`` (``int4``, ``uint2``...) as
        NumPy with ml_dtypes casts: its low bits, sign-extended for the signed ones."""
        bits = SUB_BYTE_INTS[dtype]
        mask = f"({value} & {self.literal((1 << abs(bits)) - 1, 'i32')})"
        if bits > 0:
            return mask
        half = self.literal(1 << (-bits - 1), "i32")
        return f"(({mask} ^ {half}) - {half})"

    def _block(self, stmts: list, lines: list[str], depth: int) -> None:
        pad = "    " * depth
        for s in stmts:
            if isinstance(s, ir.Declare):
                lines.append(pad + self.declare(s.var, self.expr(s.value)))
            elif isinstance(s, ir.Assign):
                lines.append(f"{pad}{s.var.name} = {self.expr(s.value)};")
            elif isinstance(s, ir.Store):
                lines.append(pad + self.store(s.buffer, self.expr(s.index), self.expr(s.value)))
            elif isinstance(s, ir.SharedStore):
                lines.append(f"{pad}{s.array.name}[{self.expr(s.index)}] = {self.expr(s.value)};")
            elif isinstance(s, ir.If):
                lines.append(f"{pad}if ({self.expr(s.cond)}) {{")
                self._block(s.then, lines, depth + 1)
                if s.orelse:
                    lines.append(f"{pad}}} else {{")
                    self._block(s.orelse, lines, depth + 1)
                lines.append(pad + "}")
            elif isinstance(s, ir.For):
                header = self.for_header(s, self.expr(s.start), self.expr(s.stop),
                                         self.expr(s.step))
                lines.append(pad + header + " {")
                self._block(s.body, lines, depth + 1)
                lines.append(pad + "}")
            elif isinstance(s, ir.While):
                lines.append(f"{pad}while ({self.expr(s.cond)}) {{")
                self._block(s.body, lines, depth + 1)
                lines.append(pad + "}")
            elif isinstance(s, ir.Break):
                lines.append(pad + "break;")
            elif isinstance(s, ir.Return):
                lines.append(pad + "return;")
            elif isinstance(s, ir.Barrier):
                lines.append(pad + self.barrier_statement)
            elif isinstance(s, ir.SharedLoadRun):
                lines.append(pad + self.shared_run(s))
            else:
                raise TypeError(f"kernel IR: unknown statement {s!r}")

    def expr(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Var):
            return e.name
        if isinstance(e, ir.Const):
            return self.literal(e.value, e.ty)
        if isinstance(e, ir.Binary):
            return self.binary(e.op, self.expr(e.a), self.expr(e.b), e.a.ty, e.b.ty)
        if isinstance(e, ir.Unary):
            return self.unary(e.op, self.expr(e.a), e.ty)
        if isinstance(e, ir.Call):
            return self.call(e.fn, [self.expr(a) for a in e.args], e.args[0].ty)
        if isinstance(e, ir.Cast):
            value = self.cast(self.expr(e.a), e.a.ty, e.ty)
            return self.narrow(value, e.narrow) if e.narrow else value
        if isinstance(e, ir.Bitcast):
            return self.bitcast(self.expr(e.a), e.a.ty, e.ty)
        if isinstance(e, ir.Select):
            return self.select(self.expr(e.cond), self.expr(e.a), self.expr(e.b), e.ty)
        if isinstance(e, ir.Load):
            return self.load(e.buffer, self.expr(e.index))
        if isinstance(e, ir.SharedLoad):
            return f"{e.array.name}[{self.expr(e.index)}]"
        if isinstance(e, ir.InfoLoad):
            return f"info[{self.expr(e.index)}]"
        if isinstance(e, ir.Builtin):
            return self.builtin(e.which, e.axis)
        raise TypeError(f"kernel IR: unknown expression {e!r}")


#: The ints narrower than a byte, stored one per byte (or word): their bits, negative for the
#: signed ones.
SUB_BYTE_INTS = {"int4": -4, "uint4": 4, "int2": -2, "uint2": 2}


def float_literal(value: float) -> str | None:
    """A finite float's decimal spelling that round-trips, or None for inf/NaN."""
    if math.isnan(value) or math.isinf(value):
        return None
    text = repr(float(value))
    return text if ("." in text or "e" in text or "n" in text) else text + ".0"
