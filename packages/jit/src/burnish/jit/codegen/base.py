"""What every code generator shares: walking the IR, indentation, and helpers emitted on demand."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from burnish.jit import ir


class Generator(ABC):
    """Renders an ``ir.Kernel`` to source. Subclasses say how each node is spelled."""

    #: The language's name, part of every kernel cache key.
    language: str = ""

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

    def binary(self, op: str, a: str, b: str, a_ty: str, b_ty: str) -> str:
        if op == "%" and ir.is_float(a_ty):
            return self.call("fmod", [a, b], a_ty)
        return f"({a} {op} {b})"

    # -- the walk ---------------------------------------------------------------------------------

    def generate(self, kernel: ir.Kernel) -> str:
        self._helpers = {}
        lines: list[str] = []
        self._block(kernel.body, lines, 1)
        return self.render_kernel(kernel, lines)

    def helper(self, name: str, source: str) -> str:
        """Register a helper function (emitted once, before the kernel); returns ``name``."""
        self._helpers.setdefault(name, source)
        return name

    def helpers_source(self) -> str:
        return "\n".join(self._helpers.values())

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
            return f"({e.op}{self.expr(e.a)})"
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


def float_literal(value: float) -> str | None:
    """A finite float's decimal spelling that round-trips, or None for inf/NaN."""
    if math.isnan(value) or math.isinf(value):
        return None
    text = repr(float(value))
    return text if ("." in text or "e" in text or "n" in text) else text + ".0"


# fdlibm's erf (s_erf.c), the coefficients burnish.ndarray uses too; see there for the notice.
ERF = {
    "efx": 1.28379167095512586316e-01,
    "erx": 8.45062911510467529297e-01,
    "pp": (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
           -5.77027029648944159157e-03, -2.37630166566501626084e-05),
    "qq": (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
           5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06),
    "pa": (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
           3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
           -2.16637559486879084300e-03),
    "qa": (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
           7.18286544141962662868e-02, 1.26171219808761642112e-01, 1.36370839120290507362e-02,
           1.19844998467991074170e-02),
    "ra": (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e01,
           -6.23753324503260060396e01, -1.62396669462573470355e02, -1.84605092906711035994e02,
           -8.12874355063065934246e01, -9.81432934416914548592e00),
    "sa": (1.0, 1.96512716674392571292e01, 1.37657754143519042600e02, 4.34565877475229228821e02,
           6.45387271733267880336e02, 4.29008140027567833386e02, 1.08635005541779435134e02,
           6.57024977031928170135e00, -6.04244152148580987438e-02),
    "rb": (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e01,
           -1.60636384855821916062e02, -6.37566443368389627722e02, -1.02509513161107724954e03,
           -4.83519191608651397019e02),
    "sb": (1.0, 3.03380607434824582924e01, 3.25792512996573918826e02, 1.53672958608443695994e03,
           3.19985821950859553908e03, 2.55305040643316442583e03, 4.74528541206955367215e02,
           -2.24409524465858183362e01),
}


def horner(x: str, coefficients: tuple[float, ...], lit) -> str:
    """``c0 + x*(c1 + x*(c2 + ...))`` spelled with ``lit`` for the constants."""
    text = lit(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"({lit(c)} + {x} * {text})"
    return text
