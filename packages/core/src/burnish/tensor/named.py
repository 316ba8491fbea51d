"""NamedTensor: a Tensor with a name for each dim, whose operations match dims by name."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from burnish.errors import ArgumentTypeError, ShapeError
from burnish.shape import show
from burnish.tensor import core as _core
from burnish.tensor.display import format_tensor

if TYPE_CHECKING:
    from burnish.backend import Backend
    from burnish.device import Device
    from burnish.distribution import Distribution
    from burnish.dtype import DType, Kind
    from burnish.tensor.tensor import Tensor
    from burnish.tensor_data import TensorData

Names = tuple[str, ...]
NameArg = str | Sequence[str] | None
_SCALARS = (bool, int, float)
_new = object.__new__


def _named(tensor: Tensor, names: Names) -> NamedTensor:
    """A NamedTensor around ``tensor``, without checks (names already fit)."""
    out = _new(NamedTensor)
    out._tensor = tensor
    out._names = names
    return out


def _unary(method: str, doc: str) -> Callable[..., NamedTensor]:
    """A NamedTensor method for a Tensor method that keeps the shape: the names stay."""

    def forward(self: NamedTensor, *args: Any, **kwargs: Any) -> NamedTensor:
        return _named(getattr(self._tensor, method)(*args, **kwargs), self._names)

    forward.__name__, forward.__qualname__ = method, f"NamedTensor.{method}"
    forward.__doc__ = doc
    return forward


def _binary(method: str, doc: str) -> Callable[[NamedTensor, Any], NamedTensor]:
    """A NamedTensor method for an elementwise Tensor method of two operands."""

    def forward(self: NamedTensor, other: Any) -> NamedTensor:
        return self._elementwise(other, method)

    forward.__name__, forward.__qualname__ = method, f"NamedTensor.{method}"
    forward.__doc__ = doc
    return forward


def _reflected(method: str) -> Callable[[NamedTensor, Any], NamedTensor]:
    """``scalar OP named``: the Tensor's reflected operator, the names kept."""

    def forward(self: NamedTensor, other: Any) -> NamedTensor:
        if not isinstance(other, _SCALARS):
            return NotImplemented
        return _named(getattr(self._tensor, method)(other), self._names)

    forward.__name__, forward.__qualname__ = method, f"NamedTensor.{method}"
    return forward


class NamedTensor:
    """A tensor with a name for each dim: ``NamedTensor(x, ("batch", "seq", "d_model"))`` or
    ``x.named("batch", "seq", "d_model")``. It wraps a ``Tensor`` and works on every backend,
    autodiff included (gradients flow through it as through the tensor it wraps).

    Operations take dims by name and check names where tensors meet:

    - Elementwise operations (``+ - * / ** maximum minimum``, comparisons, ``mask_fill``) match
      dims **by name**, wherever they sit; one side's names must include all of the other's, and
      a name the other side lacks is broadcast over. The result has the larger side's order (the
      left's when both have the same names). Dims of one name must have equal sizes, or size 1.
      Python scalars and 0-d tensors combine with anything.
    - ``matmul`` contracts the left's last dim with the right's second-to-last (its only dim
      when 1-d): their names must be the same. The leading (batch) dims match by name as above;
      the result is named ``(*batch, left rows, right columns)``, and its names must differ.
    - Reductions (``sum``, ``mean``, ``max``...) and ``softmax`` take dims by name.

    Mismatches raise ``ShapeError`` naming both sides; a plain Tensor with dims as the other
    operand raises ``ArgumentTypeError`` (name it, or ``unname()`` this one). ``unname()`` gives
    the plain Tensor back, for everything else.
    """

    __slots__ = ("_tensor", "_names")

    # Comparison operators return tensors, so identity hashing keeps named tensors usable as keys.
    __hash__ = object.__hash__
    # NumPy defers to our reflected operators (``np.float32(2) * x`` gives a NamedTensor).
    __array_ufunc__ = None

    def __init__(self, tensor: Tensor, names: str | Iterable[str]):
        if type(tensor) is not _core.Tensor:
            hint = " (use .rename() to change its names)" if type(tensor) is NamedTensor else ""
            raise ArgumentTypeError(f"NamedTensor wraps a Tensor, got "
                                    f"{type(tensor).__name__}{hint}")
        self._tensor = tensor
        self._names = _valid_names(names, tensor._prim.shape, "NamedTensor")

    @classmethod
    def zeros(cls, sizes: Mapping[str, int], device: Any = None,
              dtype: DType | str | None = None) -> NamedTensor:
        """Zeros of the given sizes by name: ``NamedTensor.zeros({"batch": 2, "seq": 5})``."""
        return _core.Tensor.zeros(list(sizes.values()), device, dtype).named(*sizes)

    @classmethod
    def ones(cls, sizes: Mapping[str, int], device: Any = None,
             dtype: DType | str | None = None) -> NamedTensor:
        """Ones of the given sizes by name."""
        return _core.Tensor.ones(list(sizes.values()), device, dtype).named(*sizes)

    @classmethod
    def random(cls, sizes: Mapping[str, int], distribution: Distribution | None = None,
               device: Any = None, dtype: DType | str | None = None) -> NamedTensor:
        """Values drawn from ``distribution`` (see ``Tensor.random``), of the given sizes by
        name."""
        return _core.Tensor.random(list(sizes.values()), distribution, device,
                                   dtype).named(*sizes)

    # -- identity -------------------------------------------------------------------------------

    @property
    def names(self) -> Names:
        """The dims' names, in order."""
        return self._names

    @property
    def shape(self) -> dict[str, int]:
        """Each dim's size by name, in order: ``{"batch": 2, "seq": 5}``."""
        return dict(zip(self._names, self._tensor._prim.shape))

    def size(self, name: str) -> int:
        """The size of the dim ``name``."""
        return self._tensor._prim.shape[self._dim(name, "size")]

    @property
    def ndim(self) -> int:
        return len(self._names)

    def numel(self) -> int:
        """The number of elements."""
        return self._tensor.numel()

    @property
    def dtype(self) -> DType:
        return self._tensor._dtype

    @property
    def kind(self) -> Kind:
        return self._tensor._dtype.kind

    @property
    def device(self) -> Device:
        return self._tensor._device

    @property
    def backend(self) -> Backend:
        return self._tensor._device.backend

    def unname(self) -> Tensor:
        """The plain Tensor, its dims in this order (the same tensor: gradients still flow)."""
        return self._tensor

    def __repr__(self) -> str:
        # Burn's layout, with the names first.
        return f"NamedTensor {{\n  names:  {self._names},\n" + format_tensor(self._tensor)[9:]

    __str__ = __repr__

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: a Tensor method that takes dims by position.
        if not name.startswith("_") and hasattr(_core.Tensor, name):
            raise AttributeError(
                f"'NamedTensor' object has no attribute {name!r}: Tensor.{name} takes dims by "
                f"position; write x.unname().{name}(...) and name the result with .named(...)")
        raise AttributeError(f"'NamedTensor' object has no attribute {name!r}")

    # -- names ----------------------------------------------------------------------------------

    def rename(self, *names: str | None, **renames: str) -> NamedTensor:
        """New names: all of them (``x.rename("b", "s")``), or some by keyword
        (``x.rename(seq="key")``); the values and their order stay."""
        if names and renames:
            raise ArgumentTypeError("rename takes every new name, or old=new keywords, not both")
        if names:
            return _named(self._tensor,
                          _valid_names(_name_args(names), self._tensor._prim.shape, "rename"))
        for old in renames:
            self._dim(old, "rename")
        new = tuple(renames.get(n, n) for n in self._names)
        return _named(self._tensor, _valid_names(new, self._tensor._prim.shape, "rename"))

    def align_to(self, *names: str | Any) -> NamedTensor:
        """The dims in the order of ``names``. Every dim of this tensor must be named, or
        covered by one ``...`` (the dims not named, in their order); a new name adds a dim of
        size 1 there (PyTorch's ``align_to``)."""
        names = _name_args(names)
        explicit = tuple(n for n in names if n is not Ellipsis)
        _unique(explicit, "align_to")
        if len(explicit) < len(names) - 1:
            raise ShapeError(f"align_to: at most one ... in {_show_names(names)}")
        rest = tuple(n for n in self._names if n not in explicit)
        if len(explicit) < len(names):
            at = names.index(Ellipsis)
            target = names[:at] + rest + names[at + 1:]
        elif rest:
            raise ShapeError(f"align_to: {_show_names(names)} leaves out {_show_names(rest)} of "
                             f"{self._describe()}; name every dim, or write ... for the rest")
        else:
            target = names
        _check_strings(target, "align_to")
        return _named(_aligned(self._tensor, self._names, target), target)

    def permute(self, *names: str) -> NamedTensor:
        """The dims reordered: ``names`` names each of them once."""
        names = _name_args(names)
        if sorted(names) != sorted(self._names):
            raise ShapeError(f"permute: {_show_names(names)} does not name each dim of "
                             f"{self._describe()} once")
        return _named(_aligned(self._tensor, self._names, names), names)

    def swap_dims(self, first: str, second: str) -> NamedTensor:
        """The dims ``first`` and ``second`` exchanged."""
        i, j = self._dim(first, "swap_dims"), self._dim(second, "swap_dims")
        names = list(self._names)
        names[i], names[j] = names[j], names[i]
        return _named(self._tensor.swap_dims(i, j), tuple(names))

    def transpose(self, first: str | None = None, second: str | None = None) -> NamedTensor:
        """``swap_dims(first, second)``; with no names, the last two dims exchanged."""
        if first is None and second is None:
            if len(self._names) < 2:
                return self
            return self.swap_dims(self._names[-2], self._names[-1])
        if first is None or second is None:
            raise ArgumentTypeError("transpose takes two names, or none for the last two dims")
        return self.swap_dims(first, second)

    def flatten(self, names: Sequence[str], into: str) -> NamedTensor:
        """The adjacent dims ``names`` (in their order) merged into one dim named ``into``."""
        names = _name_args((names,))
        dims = [self._dim(n, "flatten") for n in names]
        if not dims or dims != list(range(dims[0], dims[0] + len(dims))):
            raise ShapeError(f"flatten: {_show_names(names)} are not adjacent and in order in "
                             f"{self._describe()}; align_to() them first")
        new = self._names[:dims[0]] + (into,) + self._names[dims[-1] + 1:]
        _check_strings(new, "flatten")
        _unique(new, "flatten")
        return _named(self._tensor.flatten(dims[0], dims[-1]), new)

    def unflatten(self, name: str, sizes: Mapping[str, int]) -> NamedTensor:
        """The dim ``name`` split into dims of the given sizes by name (one may be ``-1``):
        ``x.unflatten("d_model", {"heads": 4, "d_head": -1})``."""
        d = self._dim(name, "unflatten")
        size = self._tensor._prim.shape[d]
        parts = dict(sizes)
        unknown = [k for k, n in parts.items() if n == -1]
        known = _product(n for n in parts.values() if n != -1)
        if len(unknown) == 1 and known > 0 and size % known == 0:
            parts[unknown[0]] = size // known
        if not parts or any(not isinstance(n, int) or n < 0 for n in parts.values()) or \
                _product(parts.values()) != size:
            raise ShapeError(f"unflatten: {name!r} of size {size} cannot be split into "
                             f"{dict(sizes)}")
        new = self._names[:d] + tuple(parts) + self._names[d + 1:]
        _check_strings(new, "unflatten")
        _unique(new, "unflatten")
        shape = self._tensor._prim.shape
        return _named(self._tensor.reshape(list(shape[:d]) + list(parts.values())
                                           + list(shape[d + 1:])), new)

    def squeeze(self, name: str) -> NamedTensor:
        """The size-1 dim ``name`` removed."""
        d = self._dim(name, "squeeze")
        if self._tensor._prim.shape[d] != 1:
            raise ShapeError(f"squeeze: {name!r} has size {self._tensor._prim.shape[d]}, not 1, "
                             f"in {self._describe()}")
        return _named(self._tensor.squeeze(d), self._names[:d] + self._names[d + 1:])

    def narrow(self, name: str, start: int, length: int) -> NamedTensor:
        """``length`` elements from ``start`` along the dim ``name``."""
        return _named(self._tensor.narrow(self._dim(name, "narrow"), start, length), self._names)

    # -- elementwise ----------------------------------------------------------------------------

    def _elementwise(self, other: Any, method: str) -> NamedTensor:
        if type(other) is NamedTensor:
            if other._names == self._names and \
                    other._tensor._prim.shape == self._tensor._prim.shape:
                return _named(getattr(self._tensor, method)(other._tensor), self._names)
            names, a, b = _align_pair(self, other, method)
            return _named(getattr(a, method)(b), names)
        if isinstance(other, _SCALARS) or (type(other) is _core.Tensor and not other.ndim):
            return _named(getattr(self._tensor, method)(other), self._names)
        if type(other) is _core.Tensor:
            raise ArgumentTypeError(
                f"{method}: the right operand is a Tensor without names, of shape "
                f"{show(other.shape)}, and the left is named {self._describe()}; name its dims "
                "with .named(...), or take these off with .unname()")
        return NotImplemented

    add = _binary("add", "``self + other``, dims matched by name.")
    sub = _binary("sub", "``self - other``, dims matched by name.")
    mul = _binary("mul", "``self * other``, dims matched by name.")
    div = _binary("div", "``self / other``, dims matched by name.")
    pow = _binary("pow", "``self ** other``, dims matched by name.")
    maximum = _binary("maximum", "The elementwise larger, dims matched by name.")
    minimum = _binary("minimum", "The elementwise smaller, dims matched by name.")
    equal = _binary("equal", "Bool: ``self == other``, dims matched by name.")
    not_equal = _binary("not_equal", "Bool: ``self != other``, dims matched by name.")
    greater = _binary("greater", "Bool: ``self > other``, dims matched by name.")
    greater_equal = _binary("greater_equal", "Bool: ``self >= other``, dims matched by name.")
    lower = _binary("lower", "Bool: ``self < other``, dims matched by name.")
    lower_equal = _binary("lower_equal", "Bool: ``self <= other``, dims matched by name.")

    __add__, __sub__, __mul__, __truediv__, __pow__ = add, sub, mul, div, pow
    __eq__, __ne__ = equal, not_equal  # type: ignore[assignment]
    __gt__, __ge__, __lt__, __le__ = greater, greater_equal, lower, lower_equal
    __radd__ = _reflected("__radd__")
    __rsub__ = _reflected("__rsub__")
    __rmul__ = _reflected("__rmul__")
    __rtruediv__ = _reflected("__rtruediv__")
    __rpow__ = _reflected("__rpow__")

    neg = _unary("neg", "``-self``.")
    __neg__ = neg
    abs = _unary("abs", "``|self|``.")
    exp = _unary("exp", "``e ** self``.")
    log = _unary("log", "Natural logarithm.")
    sqrt = _unary("sqrt", "Square root.")
    rsqrt = _unary("rsqrt", "``1 / sqrt(self)``.")
    recip = _unary("recip", "``1 / self``.")
    sin = _unary("sin", "Sine.")
    cos = _unary("cos", "Cosine.")
    tanh = _unary("tanh", "Hyperbolic tangent.")
    sigmoid = _unary("sigmoid", "``1 / (1 + exp(-self))``.")
    erf = _unary("erf", "The error function.")
    floor = _unary("floor", "Round down.")
    ceil = _unary("ceil", "Round up.")
    round = _unary("round", "Round to nearest, halves to even.")
    clamp = _unary("clamp", "Values limited to ``[min, max]`` (see ``Tensor.clamp``).")
    is_nan = _unary("is_nan", "Bool: the value is NaN.")
    cast = _unary("cast", "The values converted to ``dtype``.")
    float = _unary("float", "Cast to the default float dtype unless already float.")
    int = _unary("int", "Cast to the default int dtype unless already int.")
    bool = _unary("bool", "Cast to bool: nonzero is True.")
    to_device = _unary("to_device", "This tensor on ``device`` (values are copied).")

    def map(self, fn: Callable[..., Tensor], *args: Any, **kwargs: Any) -> NamedTensor:
        """``fn(tensor, *args, **kwargs)`` on the plain tensor, which must keep its shape; the
        names stay: ``x.map(burnish.functional.gelu)``."""
        out = fn(self._tensor, *args, **kwargs)
        if type(out) is not _core.Tensor or out._prim.shape != self._tensor._prim.shape:
            got = show(out.shape) if type(out) is _core.Tensor else type(out).__name__
            raise ShapeError(f"map: {getattr(fn, '__name__', fn)} turned {self._describe()} into "
                             f"{got}; map keeps the shape (use unname() and named() otherwise)")
        return _named(out, self._names)

    def mask_fill(self, mask: NamedTensor,
                  value: builtins.bool | builtins.int | builtins.float) -> NamedTensor:
        """``value`` where the bool ``mask`` is true, else ``self``; the mask's dims are matched
        by name and must be among this tensor's."""
        if type(mask) is not NamedTensor:
            raise ArgumentTypeError(f"mask_fill: the mask must be a NamedTensor, got "
                                    f"{type(mask).__name__}; name its dims with .named(...)")
        extra = tuple(n for n in mask._names if n not in self._names)
        if extra:
            raise ShapeError(f"mask_fill: the mask {mask._describe()} has {_show_names(extra)}, "
                             f"which {self._describe()} lacks")
        _check_sizes(self, mask, mask._names, "mask_fill")
        aligned = _aligned(mask._tensor, mask._names, self._names)
        return _named(self._tensor.mask_fill(aligned, value), self._names)

    # -- matrix product -------------------------------------------------------------------------

    def matmul(self, other: NamedTensor) -> NamedTensor:
        """Matrix product: the left's last dim is contracted with the right's second-to-last
        (its only dim when 1-d), and the two must have one name and one size. Leading (batch)
        dims match by name, as in elementwise operations. The result is named ``(*batch, left's
        second-to-last, right's last)``; a 1-d side contributes no such dim."""
        if type(other) is not NamedTensor:
            what = (f"a Tensor without names, of shape {show(other.shape)}"
                    if type(other) is _core.Tensor else type(other).__name__)
            raise ArgumentTypeError(f"matmul: the right operand is {what}, and the left is "
                                    f"named {self._describe()}; name its dims with .named(...)")
        na, nb = self._names, other._names
        if not na or not nb:
            raise ShapeError(f"matmul needs named tensors of at least 1 dim, got "
                             f"{self._describe()} @ {other._describe()}")
        size_a = self._tensor._prim.shape[-1]
        at = -2 if len(nb) > 1 else -1
        ka, kb, size_b = na[-1], nb[at], other._tensor._prim.shape[at]
        if ka != kb:
            raise ShapeError(f"matmul: contracted dimensions differ: {ka!r} ({size_a}) of the "
                             f"left vs {kb!r} ({size_b}) of the right")
        if size_a != size_b:
            raise ShapeError(f"matmul: the contracted dimension {ka!r} has size {size_a} on the "
                             f"left {self._describe()} vs {size_b} on the right "
                             f"{other._describe()}")
        rows, columns = na[-2:-1], nb[-1:] if len(nb) > 1 else ()
        batch_a, batch_b = na[:-2], nb[:-2]
        common = set(batch_a) & set(batch_b) if batch_a and batch_b else ()
        if len(common) == len(batch_b):
            batch = batch_a
        elif len(common) == len(batch_a):
            batch = batch_b
        else:
            raise ShapeError(f"matmul: the batch dimensions {_show_names(batch_a)} of the left "
                             f"and {_show_names(batch_b)} of the right do not nest: one side's "
                             "must include all of the other's")
        if rows and columns and rows == columns:
            raise ShapeError(
                f"matmul: the result would have two dimensions named {rows[0]!r} (the left's "
                f"rows and the right's columns: {self._describe()} @ {other._describe()}); "
                f"rename one first, e.g. .rename({rows[0]}='{rows[0]}_2')")
        # (The contracted name cannot be a batch name: each side's names are unique.)
        for names, role in ((rows, "the left's rows"), (columns, "the right's columns")):
            if names and names[0] in batch:
                raise ShapeError(f"matmul: {names[0]!r} is {role} and also a batch dimension "
                                 f"({self._describe()} @ {other._describe()}); rename one")
        if common:
            _check_sizes(self, other, common, "matmul")
        a = _aligned(self._tensor, na, batch + na[-2:]) if len(na) > 1 else self._tensor
        b = _aligned(other._tensor, nb, batch + nb[-2:]) if len(nb) > 1 else other._tensor
        return _named(a.matmul(b), batch + rows + columns)

    __matmul__ = matmul

    # -- reductions -----------------------------------------------------------------------------

    def _reduce(self, method: str, dim: NameArg, keepdim: builtins.bool, **extra: Any
                ) -> NamedTensor:
        if dim is None:
            out = getattr(self._tensor, method)(None, keepdim=keepdim, **extra)
            return _named(out, self._names if keepdim else ())
        dims = self._dims(dim, method)
        out = getattr(self._tensor, method)(dims[0] if len(dims) == 1 else dims,
                                            keepdim=keepdim, **extra)
        if keepdim:
            return _named(out, self._names)
        return _named(out, tuple(n for i, n in enumerate(self._names) if i not in dims))

    def sum(self, dim: NameArg = None, keepdim: builtins.bool = False) -> NamedTensor:
        """Sum over the dims named (one name or several; all when None), which go away unless
        ``keepdim`` keeps them with size 1."""
        return self._reduce("sum", dim, keepdim)

    def prod(self, dim: NameArg = None, keepdim: builtins.bool = False) -> NamedTensor:
        """Product over the dims named (all when None)."""
        return self._reduce("prod", dim, keepdim)

    def mean(self, dim: NameArg = None, keepdim: builtins.bool = False) -> NamedTensor:
        """Mean over the dims named (all when None)."""
        return self._reduce("mean", dim, keepdim)

    def var(self, dim: NameArg = None, correction: builtins.int = 1, keepdim: builtins.bool = False
            ) -> NamedTensor:
        """Variance over the dims named (``correction=1``: unbiased)."""
        return self._reduce("var", dim, keepdim, correction=correction)

    def std(self, dim: NameArg = None, correction: builtins.int = 1, keepdim: builtins.bool = False
            ) -> NamedTensor:
        """Standard deviation over the dims named."""
        return self._reduce("std", dim, keepdim, correction=correction)

    def max(self, dim: NameArg = None, keepdim: builtins.bool = False) -> NamedTensor:
        """Largest element over the dims named."""
        return self._reduce("max", dim, keepdim)

    def min(self, dim: NameArg = None, keepdim: builtins.bool = False) -> NamedTensor:
        """Smallest element over the dims named."""
        return self._reduce("min", dim, keepdim)

    def any(self, dim: NameArg = None, keepdim: builtins.bool = False) -> NamedTensor:
        """Bool: some element is true over the dims named."""
        return self._reduce("any", dim, keepdim)

    def all(self, dim: NameArg = None, keepdim: builtins.bool = False) -> NamedTensor:
        """Bool: every element is true over the dims named."""
        return self._reduce("all", dim, keepdim)

    def argmax(self, dim: str, keepdim: builtins.bool = False) -> NamedTensor:
        """int64 index of the first largest element along the dim ``dim``."""
        return self._reduce("argmax", dim, keepdim)

    def argmin(self, dim: str, keepdim: builtins.bool = False) -> NamedTensor:
        """int64 index of the first smallest element along the dim ``dim``."""
        return self._reduce("argmin", dim, keepdim)

    def softmax(self, dim: str) -> NamedTensor:
        """``exp(x) / sum(exp(x))`` along the dim ``dim``."""
        from burnish.functional import softmax

        return _named(softmax(self._tensor, self._dim(dim, "softmax")), self._names)

    def log_softmax(self, dim: str) -> NamedTensor:
        """``x - log(sum(exp(x)))`` along the dim ``dim``."""
        from burnish.functional import log_softmax

        return _named(log_softmax(self._tensor, self._dim(dim, "log_softmax")), self._names)

    # -- gradients and values -------------------------------------------------------------------

    require_grad = _unary("require_grad", "This tensor as a leaf whose gradient ``backward()`` "
                          "computes (see ``Tensor.require_grad``).")
    detach = _unary("detach", "The same values cut from the graph.")

    def is_require_grad(self) -> builtins.bool:
        """Whether gradients flow to or through this tensor."""
        return self._tensor.is_require_grad()

    def backward(self) -> Any:
        """The gradients of the sum of the elements (see ``Tensor.backward``)."""
        return self._tensor.backward()

    def grad(self, grads: Any) -> NamedTensor | None:
        """This leaf's gradient in ``grads``, with this tensor's names (None when absent)."""
        grad = self._tensor.grad(grads)
        return None if grad is None else _named(grad, self._names)

    def into_data(self) -> TensorData:
        """The values on the host as ``TensorData``, dims in this tensor's order."""
        return self._tensor.into_data()

    def to_numpy(self) -> Any:
        """The values as a NumPy array, dims in this tensor's order."""
        return self._tensor.to_numpy()

    def tolist(self) -> Any:
        """The values as nested lists (a Python scalar for a 0-d tensor)."""
        return self._tensor.tolist()

    def item(self) -> builtins.bool | builtins.int | builtins.float:
        """The only value of a one-element tensor."""
        return self._tensor.item()

    def __bool__(self) -> builtins.bool:
        return bool(self._tensor)

    def __float__(self) -> builtins.float:
        return float(self._tensor)

    # -- helpers --------------------------------------------------------------------------------

    def _dim(self, name: str, op: str) -> builtins.int:
        """The position of the dim ``name``, or ShapeError naming this tensor's dims."""
        if not isinstance(name, str):
            raise ArgumentTypeError(f"{op}: a NamedTensor takes dims by name, got {name!r}; its "
                                    f"dims are {self._describe()}")
        try:
            return self._names.index(name)
        except ValueError:
            raise ShapeError(f"{op}: no dimension named {name!r} in {self._describe()}"
                             ) from None

    def _dims(self, names: str | Sequence[str], op: str) -> tuple[builtins.int, ...]:
        names = (names,) if isinstance(names, str) or not isinstance(names, Iterable) \
            else tuple(names)
        _unique(names, op)
        return tuple(self._dim(n, op) for n in names)

    def _describe(self) -> str:
        """``[batch=2, seq=5]``: the names with their sizes, as error messages show them."""
        return "[" + ", ".join(f"{n}={s}" for n, s in zip(self._names,
                                                          self._tensor._prim.shape)) + "]"


def _align_pair(a: NamedTensor, b: NamedTensor, op: str) -> tuple[Names, Tensor, Tensor]:
    """The result's names and both tensors with their dims in that order (size 1 where a side
    lacks a name), or ShapeError when the names do not nest or sizes differ."""
    na, nb = a._names, b._names
    if na == nb:
        if a._tensor._prim.shape != b._tensor._prim.shape:
            _check_sizes(a, b, na, op)
        return na, a._tensor, b._tensor
    set_a, set_b = set(na), set(nb)
    if set_b <= set_a:
        names = na
    elif set_a <= set_b:
        names = nb
    else:
        only_a = tuple(n for n in na if n not in set_b)
        only_b = tuple(n for n in nb if n not in set_a)
        raise ShapeError(
            f"{op}: the dimensions do not nest: the left {a._describe()} has "
            f"{_show_names(only_a)}, which the right lacks, and the right {b._describe()} has "
            f"{_show_names(only_b)}, which the left lacks; one side's names must include all of "
            "the other's (for an outer product, align_to() one side to both sides' names)")
    _check_sizes(a, b, set_a & set_b, op)
    return names, _aligned(a._tensor, na, names), _aligned(b._tensor, nb, names)


def _check_sizes(a: NamedTensor, b: NamedTensor, names: Iterable[str], op: str) -> None:
    """ShapeError unless each of ``names`` has one size in ``a`` and ``b``, or 1 in either."""
    shape_a, shape_b = a.shape, b.shape
    for name in names:
        x, y = shape_a[name], shape_b[name]
        if x != y and x != 1 and y != 1:
            raise ShapeError(f"{op}: dimension {name!r} has size {x} on the left "
                             f"{a._describe()} vs {y} on the right {b._describe()}")


def _aligned(tensor: Tensor, names: Names, target: Names) -> Tensor:
    """``tensor`` (dims ``names``) with its dims in the order of ``target``, which holds all of
    ``names``; a name of ``target`` missing from ``names`` gets a dim of size 1."""
    if names == target:
        return tensor
    present = tuple(n for n in target if n in names) if len(names) != len(target) else target
    out = tensor if present == names else tensor.permute([names.index(n) for n in present])
    if len(names) != len(target):
        sizes = dict(zip(names, tensor._prim.shape))
        out = out.reshape([sizes.get(n, 1) for n in target])
    return out


def _name_args(args: tuple) -> tuple:
    """Names given as several arguments, or as one sequence."""
    if len(args) == 1 and not isinstance(args[0], str) and args[0] is not Ellipsis:
        try:
            return tuple(args[0])
        except TypeError:
            pass
    return tuple(args)


def _check_strings(names: Iterable[Any], op: str) -> None:
    for name in names:
        if not isinstance(name, str) or not name:
            raise ArgumentTypeError(f"{op}: dimension names are non-empty strings, got {name!r}")


def _unique(names: Sequence[Any], op: str) -> None:
    if len(set(names)) != len(names):
        repeated = next(n for n in names if names.count(n) > 1)
        raise ShapeError(f"{op}: the name {repeated!r} appears twice in {_show_names(names)}")


def _valid_names(names: str | Iterable[str], shape: tuple[int, ...], op: str) -> Names:
    """``names`` as a tuple, checked: non-empty strings, one per dim of ``shape``, unique."""
    names = (names,) if isinstance(names, str) else tuple(names)
    _check_strings(names, op)
    if len(names) != len(shape):
        raise ShapeError(f"{op}: {len(names)} names {_show_names(names)} for a tensor of "
                         f"{len(shape)} dims {show(shape)}")
    _unique(names, op)
    return names


def _show_names(names: Iterable[Any]) -> str:
    return "(" + ", ".join("..." if n is Ellipsis else repr(n) for n in names) + ")"


def _product(sizes: Iterable[int]) -> int:
    n = 1
    for size in sizes:
        n *= size
    return n
