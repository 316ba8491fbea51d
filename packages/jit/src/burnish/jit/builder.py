"""``KernelBuilder``: kernels written once, in Python, as IR that every generator renders.

::

    k = KernelBuilder("add", workgroup=(256, 1, 1))
    out, a, b = k.buffer("out", "float32", writable=True), k.buffer("a", "float32"), ...
    i = k.global_index()
    with k.if_(i >= k.info(0)):
        k.return_()
    k.store(out, i, a[i] + b[i])
    kernel = k.build()

Launch coordinates are linear: ``global_index()`` counts invocations across a grid of up to
65535 x 65535 workgroups, so kernels never care how a runtime splits a large launch.
"""

from __future__ import annotations

from contextlib import contextmanager

from burnish.jit import ir
from burnish.jit.ir import Expr, Var, lift


class KernelBuilder:
    """Collects a kernel's parameters and statements; ``build()`` gives the ``ir.Kernel``."""

    def __init__(self, name: str, workgroup: tuple[int, int, int] = (256, 1, 1)):
        self.name = name
        self.workgroup = workgroup
        self._buffers: list[ir.Buffer] = []
        self._shared: list[ir.Shared] = []
        self._blocks: list[list] = [[]]
        self._names = 0

    # -- parameters ------------------------------------------------------------------------------

    def buffer(self, name: str, dtype, writable: bool = False) -> ir.Buffer:
        """A storage buffer parameter; launches pass buffers in declaration order."""
        dtype_name = dtype if isinstance(dtype, str) else dtype.name
        buf = ir.Buffer(f"{name}_{len(self._buffers)}", dtype_name, writable)
        self._buffers.append(buf)
        return buf

    def shared(self, ty: str, size: int) -> ir.Shared:
        """``size`` elements of workgroup memory of compute type ``ty``."""
        arr = ir.Shared(f"sh{len(self._shared)}", ty, size)
        self._shared.append(arr)
        return arr

    def info(self, index) -> Expr:
        """``info[index]``: the launch's int metadata (shapes, strides, counts)."""
        return ir.InfoLoad(lift(index, "i32"))

    # -- coordinates -----------------------------------------------------------------------------

    def local_id(self, axis: int = 0) -> Expr:
        return ir.Builtin("local_id", axis)

    def group_id(self, axis: int = 0) -> Expr:
        return ir.Builtin("group_id", axis)

    def num_groups(self, axis: int = 0) -> Expr:
        return ir.Builtin("num_groups", axis)

    def group_index(self) -> Expr:
        """The workgroup's linear index (x + y * groups_x)."""
        return self.let(self.group_id(0) + self.group_id(1) * self.num_groups(0), "group")

    def global_index(self) -> Expr:
        """This invocation's linear index over the whole launch (1-d workgroups)."""
        group = self.group_index()
        return self.let(group * self.workgroup[0] + self.local_id(0), "gid")

    # -- statements ------------------------------------------------------------------------------

    def _emit(self, stmt) -> None:
        self._blocks[-1].append(stmt)

    def let(self, value, name: str = "v", ty: str | None = None) -> Var:
        """A new mutable variable initialised to ``value``."""
        value = lift(value, ty or "i32")
        var = Var(self._fresh(name), value.ty)
        self._emit(ir.Declare(var, value))
        return var

    def _fresh(self, name: str) -> str:
        """A new variable name: ``name`` and a counter, never a type name (``f32``, ``u8``)."""
        self._names += 1
        fresh = f"{name}{self._names}"
        return fresh + "_" if fresh[:1] in "fiu" and fresh[1:].isdigit() else fresh

    def assign(self, var: Var, value) -> None:
        self._emit(ir.Assign(var, lift(value, var.ty)))

    def store(self, buffer: ir.Buffer, index, value) -> None:
        """``buffer[index] = value`` (converted to the buffer's storage dtype)."""
        value = lift(value, ir.compute_type(buffer.dtype))
        if value.ty != ir.compute_type(buffer.dtype):
            raise TypeError(f"kernel IR: storing {value.ty} into a {buffer.dtype} buffer")
        self._emit(ir.Store(buffer, lift(index, "i32"), value))

    def shared_store(self, array: ir.Shared, index, value) -> None:
        self._emit(ir.SharedStore(array, lift(index, "i32"), lift(value, array.ty)))

    def shared_load_run(self, array: ir.Shared, index, targets: list) -> None:
        """``targets[i] = array[index + i]`` (vars of ``array``'s type, 2 or 4 of them),
        ``index`` a multiple of their count: one wide load where the language has them."""
        if len(targets) not in (2, 4) or any(v.ty != array.ty for v in targets):
            raise ValueError(f"a run of workgroup memory loads 2 or 4 vars of {array.ty}, "
                             f"got {[v.ty for v in targets]}")
        self._emit(ir.SharedLoadRun(array, lift(index, "i32"), list(targets)))

    def barrier(self) -> None:
        self._emit(ir.Barrier())

    def return_(self) -> None:
        self._emit(ir.Return())

    def break_(self) -> None:
        self._emit(ir.Break())

    @contextmanager
    def if_(self, cond: Expr):
        stmt = ir.If(cond)
        self._emit(stmt)
        self._blocks.append(stmt.then)
        try:
            yield
        finally:
            self._blocks.pop()

    @contextmanager
    def else_(self):
        """The else branch of the ``if_`` just closed."""
        stmt = self._blocks[-1][-1]
        if not isinstance(stmt, ir.If):
            raise RuntimeError("kernel IR: else_() must follow an if_() block")
        self._blocks.append(stmt.orelse)
        try:
            yield
        finally:
            self._blocks.pop()

    @contextmanager
    def for_(self, start, stop, step=1, name: str = "i"):
        """``for var in range(start, stop, step)`` (i32, positive step); yields the variable."""
        var = Var(self._fresh(name), "i32")
        stmt = ir.For(var, lift(start, "i32"), lift(stop, "i32"), lift(step, "i32"))
        self._emit(stmt)
        self._blocks.append(stmt.body)
        try:
            yield var
        finally:
            self._blocks.pop()

    @contextmanager
    def while_(self, cond: Expr):
        stmt = ir.While(cond)
        self._emit(stmt)
        self._blocks.append(stmt.body)
        try:
            yield
        finally:
            self._blocks.pop()

    def build(self) -> ir.Kernel:
        if len(self._blocks) != 1:
            raise RuntimeError("kernel IR: build() inside an open block")
        return ir.Kernel(self.name, list(self._buffers), self.workgroup, list(self._shared),
                         self._blocks[0])
