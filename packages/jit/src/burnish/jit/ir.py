"""The kernel IR: typed expressions and statements that every code generator renders.

A kernel is a list of statements over its parameters (storage buffers of one dtype each, and an
``int`` array ``info`` holding shapes, strides and counts). Expressions carry a *compute type*:
``bool``, ``i32``, ``u32``, ``i64``, ``f32`` or ``f64``. Buffers carry a *storage dtype* (any
burnish dtype); loading one gives its compute type (``f16``/``bf16``, float8 and float4 compute
in ``f32``; ``int8``, ``int16``, ``uint8``, ``uint16`` and the 4- and 2-bit ints in ``i32``;
``uint32`` in ``u32``; ``uint64`` in ``i64``, its bits) and storing converts back, so a kernel is
written once for every dtype and each language stores what it can.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from burnish.dtype import DType, get_dtype

#: The compute types, narrowest first within each kind.
COMPUTE_TYPES = ("bool", "i32", "u32", "i64", "f32", "f64")

_COMPUTE_OF = {
    "float64": "f64", "float32": "f32", "float16": "f32", "bfloat16": "f32",
    "int64": "i64", "int32": "i32", "int16": "i32", "int8": "i32", "uint8": "i32", "bool": "bool",
    "uint64": "i64", "uint32": "u32", "uint16": "i32", "int4": "i32", "uint4": "i32",
    "int2": "i32", "uint2": "i32", "float8_e4m3fn": "f32", "float8_e4m3fnuz": "f32",
    "float8_e5m2": "f32", "float8_e5m2fnuz": "f32", "float8_e8m0fnu": "f32",
    "float4_e2m1fn": "f32",
}


def compute_type(dtype: DType | str) -> str:
    """The compute type a value of storage dtype ``dtype`` has in a kernel."""
    name = dtype if isinstance(dtype, str) and dtype in COMPUTE_TYPES else get_dtype(dtype).name
    return _COMPUTE_OF.get(name, name)


def is_float(ty: str) -> bool:
    return ty in ("f32", "f64")


def is_int(ty: str) -> bool:
    return ty in ("i32", "u32", "i64")


# -- expressions -----------------------------------------------------------------------------


class Expr:
    """A typed value. Operators build new expressions; Python numbers take the other side's type."""

    __slots__ = ("ty",)
    ty: str

    def _bin(self, op: str, other, swap: bool = False) -> Expr:
        other = lift(other, self.ty)
        a, b = (other, self) if swap else (self, other)
        if a.ty != b.ty:
            raise TypeError(f"kernel IR: {op} between {a.ty} and {b.ty}; cast one side first")
        ty = "bool" if op in _COMPARISONS else a.ty
        return Binary(op, a, b, ty)

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __mod__(self, o): return self._bin("%", o)
    def __and__(self, o): return self._bin("&", o)
    def __or__(self, o): return self._bin("|", o)
    def __xor__(self, o): return self._bin("^", o)
    def __lshift__(self, o): return self._bin("<<", o)
    def __rshift__(self, o): return self._bin(">>", o)
    def __lt__(self, o): return self._bin("<", o)
    def __le__(self, o): return self._bin("<=", o)
    def __gt__(self, o): return self._bin(">", o)
    def __ge__(self, o): return self._bin(">=", o)
    def __neg__(self): return Unary("-", self, self.ty)
    def __invert__(self): return Unary("~", self, self.ty)

    def eq(self, o) -> Expr:
        """``self == o`` (``==`` itself keeps Python's identity meaning for IR nodes)."""
        return self._bin("==", o)

    def ne(self, o) -> Expr:
        return self._bin("!=", o)

    def and_(self, o) -> Expr:
        """Logical and of two bools."""
        return self._bin("&&", o)

    def or_(self, o) -> Expr:
        return self._bin("||", o)

    def not_(self) -> Expr:
        return Unary("!", self, "bool")

    def cast(self, dtype: DType | str) -> Expr:
        """The value converted as burnish casts convert (floats to ints truncate; nonzero is
        true); casting to a narrow storage dtype (``int8``, ``float16``...) rounds or wraps the
        value to that dtype and keeps its compute type."""
        target = dtype if isinstance(dtype, str) and dtype in COMPUTE_TYPES else get_dtype(dtype)
        ty = target if isinstance(target, str) else compute_type(target)
        narrow = None if isinstance(target, str) or target.name == _type_name(ty) else target.name
        if ty == self.ty and narrow is None:
            return self
        return Cast(self, ty, narrow)

    def bitcast(self, ty: str) -> Expr:
        """The same bits read as ``ty`` (same width)."""
        return Bitcast(self, ty)

    __hash__ = object.__hash__


_COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!=", "&&", "||"})


def _type_name(ty: str) -> str:
    return {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "u32": "uint32",
            "bool": "bool"}[ty]


class Const(Expr):
    __slots__ = ("value",)

    def __init__(self, value: bool | int | float, ty: str):
        self.value = value
        self.ty = ty


class Var(Expr):
    __slots__ = ("name",)

    def __init__(self, name: str, ty: str):
        self.name = name
        self.ty = ty


class Binary(Expr):
    __slots__ = ("op", "a", "b")

    def __init__(self, op: str, a: Expr, b: Expr, ty: str):
        self.op, self.a, self.b, self.ty = op, a, b, ty


class Unary(Expr):
    __slots__ = ("op", "a")

    def __init__(self, op: str, a: Expr, ty: str):
        self.op, self.a, self.ty = op, a, ty


class Call(Expr):
    """A math function of ``FUNCTIONS`` applied to same-typed arguments."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: str, args: tuple[Expr, ...], ty: str):
        self.fn, self.args, self.ty = fn, args, ty


class Cast(Expr):
    __slots__ = ("a", "narrow")

    def __init__(self, a: Expr, ty: str, narrow: str | None):
        self.a, self.ty, self.narrow = a, ty, narrow


class Bitcast(Expr):
    __slots__ = ("a",)

    def __init__(self, a: Expr, ty: str):
        self.a, self.ty = a, ty


class Select(Expr):
    """``cond ? a : b``."""

    __slots__ = ("cond", "a", "b")

    def __init__(self, cond: Expr, a: Expr, b: Expr):
        self.cond, self.a, self.b, self.ty = cond, a, b, a.ty


class Load(Expr):
    """``buffer[index]`` in its compute type (``index`` is i32)."""

    __slots__ = ("buffer", "index")

    def __init__(self, buffer: Buffer, index: Expr):
        self.buffer, self.index, self.ty = buffer, index, compute_type(buffer.dtype)


class SharedLoad(Expr):
    __slots__ = ("array", "index")

    def __init__(self, array: Shared, index: Expr):
        self.array, self.index, self.ty = array, index, array.ty


class InfoLoad(Expr):
    """``info[index]`` (i32)."""

    __slots__ = ("index",)

    def __init__(self, index: Expr):
        self.index, self.ty = index, "i32"


class Builtin(Expr):
    """A launch coordinate: ``local_id``, ``group_id`` or ``num_groups`` along ``axis`` (i32)."""

    __slots__ = ("which", "axis")

    def __init__(self, which: str, axis: int):
        self.which, self.axis, self.ty = which, axis, "i32"


#: Math functions every generator renders; the semantics are NumPy's.
FUNCTIONS = frozenset({
    "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "erf", "floor", "ceil",
    "round",  # half to even
    "trunc", "abs", "min", "max",  # min/max: plain (NaN handling is the kernel's business)
    "pow", "fmod", "isnan", "isinf", "atan2",
    "dot4i8",  # i32 words: the sum of the products of their four signed bytes (bits 8j..8j+7)
})


def call(fn: str, *args) -> Expr:
    """``fn(args...)``; Python numbers take the first expression argument's type."""
    if fn not in FUNCTIONS:
        raise ValueError(f"kernel IR: unknown function {fn!r}")
    ty = next(a.ty for a in args if isinstance(a, Expr))
    exprs = tuple(lift(a, ty) for a in args)
    out = "bool" if fn in ("isnan", "isinf") else ty
    return Call(fn, exprs, out)


def select(cond: Expr, a, b, ty: str | None = None) -> Expr:
    """``a`` where ``cond`` else ``b`` (``ty`` types the result when both are Python numbers)."""
    ty = a.ty if isinstance(a, Expr) else b.ty if isinstance(b, Expr) else ty
    if ty is None:
        raise TypeError("kernel IR: select of two Python numbers needs ty=")
    return Select(cond, lift(a, ty), lift(b, ty))


def const(value: bool | int | float, ty: str) -> Const:
    return Const(value, ty)


def lift(value, ty: str) -> Expr:
    """``value`` as an expression of ``ty`` (Python numbers become constants)."""
    if isinstance(value, Expr):
        return value
    if ty == "bool":
        return Const(bool(value), ty)
    if is_float(ty):
        return Const(float(value), ty)
    return Const(int(value), ty)


# -- parameters ------------------------------------------------------------------------------


@dataclass(eq=False)
class Buffer:
    """A storage buffer parameter of one storage dtype."""

    name: str
    dtype: str  # a burnish dtype name
    writable: bool = False

    def __getitem__(self, index) -> Expr:
        return Load(self, lift(index, "i32"))


@dataclass(eq=False)
class Shared:
    """Workgroup memory: ``size`` elements of a compute type, shared by one workgroup."""

    name: str
    ty: str
    size: int

    def __getitem__(self, index) -> Expr:
        return SharedLoad(self, lift(index, "i32"))


# -- statements ------------------------------------------------------------------------------


@dataclass(eq=False)
class Declare:
    var: Var
    value: Expr


@dataclass(eq=False)
class Assign:
    var: Var
    value: Expr


@dataclass(eq=False)
class Store:
    buffer: Buffer
    index: Expr
    value: Expr


@dataclass(eq=False)
class SharedStore:
    array: Shared
    index: Expr
    value: Expr


@dataclass(eq=False)
class SharedLoadRun:
    """``vars[i] = array[index + i]`` for each of the ``len(vars)`` (2 or 4) vars, ``index`` a
    multiple of ``len(vars)``: one wide load from workgroup memory where the language has them
    (``Generator.wide_shared_loads``), else one load each (``scalar_runs``). NVIDIA's OpenCL
    compiler leaves neighbouring scalar loads scalar, so an invocation reading a run of its
    tile spends an instruction per word."""

    array: Shared
    index: Expr
    vars: list


def scalar_runs(stmts: list) -> list:
    """``stmts`` with every ``SharedLoadRun`` spelled as one load per var."""
    out: list = []
    for s in stmts:
        if isinstance(s, SharedLoadRun):
            out += [Assign(v, SharedLoad(s.array, s.index + i if i else s.index))
                    for i, v in enumerate(s.vars)]
        elif isinstance(s, If):
            out.append(If(s.cond, scalar_runs(s.then), scalar_runs(s.orelse)))
        elif isinstance(s, For):
            out.append(For(s.var, s.start, s.stop, s.step, scalar_runs(s.body)))
        elif isinstance(s, While):
            out.append(While(s.cond, scalar_runs(s.body)))
        else:
            out.append(s)
    return out


@dataclass(eq=False)
class If:
    cond: Expr
    then: list = field(default_factory=list)
    orelse: list = field(default_factory=list)


@dataclass(eq=False)
class For:
    """``for (var = start; var < stop; var += step)`` over i32."""

    var: Var
    start: Expr
    stop: Expr
    step: Expr
    body: list = field(default_factory=list)


@dataclass(eq=False)
class While:
    cond: Expr
    body: list = field(default_factory=list)


@dataclass(eq=False)
class Break:
    pass


@dataclass(eq=False)
class Return:
    pass


@dataclass(eq=False)
class Barrier:
    """Every invocation of the workgroup waits here; workgroup memory writes become visible."""


@dataclass(eq=False)
class Kernel:
    """A whole kernel: its parameters, workgroup shape, workgroup memory and body."""

    name: str
    buffers: list[Buffer]
    workgroup: tuple[int, int, int]
    shared: list[Shared]
    body: list

    def dtypes(self) -> set[str]:
        return {b.dtype for b in self.buffers}
