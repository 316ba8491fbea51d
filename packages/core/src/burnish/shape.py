"""Shapes: the Shape type and the shape arithmetic that Tensor checks before calling a backend."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from burnish.errors import ShapeError


class Shape(tuple):
    """A tensor's shape: an immutable tuple of non-negative ints, shown as ``[2, 3]``."""

    __slots__ = ()

    def __new__(cls, dims: Iterable[int] = ()) -> Shape:
        dims = tuple(dims)
        for d in dims:
            if not isinstance(d, int) or isinstance(d, bool) or d < 0:
                raise ShapeError(f"a shape holds non-negative ints, got {list(dims)}")
        return super().__new__(cls, (int(d) for d in dims))

    @property
    def ndim(self) -> int:
        return len(self)

    @property
    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n

    @property
    def dims(self) -> list[int]:
        return list(self)

    def __eq__(self, other: object) -> bool:
        # A shape prints as a list, so it compares equal to the list it prints as.
        if isinstance(other, list):
            return list(self) == other
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return f"[{', '.join(str(d) for d in self)}]"

    __str__ = __repr__


def show(shape: Sequence[int]) -> str:
    """A shape written the way every error message writes it: ``[2, 3]``."""
    return f"[{', '.join(str(d) for d in shape)}]"


@functools.lru_cache(maxsize=4096)
def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The shape two broadcast operands produce (NumPy's rules), or ShapeError naming both."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + a
    pb = (1,) * (n - len(b)) + b
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ShapeError(
                f"shapes {show(a)} and {show(b)} cannot be broadcast together "
                f"(dim {i - n}: {x} vs {y})"
            )
    return tuple(out)


def normalize_dim(dim: int, ndim: int, *, allow_end: bool = False) -> int:
    """A dim index made non-negative; negative dims count from the end (``-1`` is the last)."""
    limit = ndim + 1 if allow_end else ndim
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise ShapeError(f"a dim must be an int, got {dim!r}")
    if dim < -limit or dim >= limit:
        lo, hi = -limit, limit - 1
        raise ShapeError(f"dim {dim} is out of range for a tensor of {ndim} dims "
                         f"(expected {lo}..{hi})")
    return dim + limit if dim < 0 else dim


def normalize_dims(dims: Iterable[int], ndim: int) -> tuple[int, ...]:
    """Several dims made non-negative, rejecting repeats."""
    out = tuple(normalize_dim(d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise ShapeError(f"dims {list(dims)} repeat a dim")
    return out


def infer_reshape(old: tuple[int, ...], new: Sequence[int]) -> tuple[int, ...]:
    """The concrete shape for ``reshape(new)``: one ``-1`` is inferred, ``0`` keeps nothing special.

    Raises ShapeError naming both shapes when the element counts differ.
    """
    new = [int(d) for d in new]
    total = 1
    for d in old:
        total *= d
    unknown = [i for i, d in enumerate(new) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in new):
        raise ShapeError(
            f"cannot reshape {show(old)} to {show(new)}: at most one -1, no other negatives"
        )
    known = 1
    for d in new:
        if d != -1:
            known *= d
    if unknown:
        if known == 0 or total % known:
            raise ShapeError(f"cannot reshape {show(old)} ({total} elements) to {show(new)}")
        new[unknown[0]] = total // known
    elif known != total:
        raise ShapeError(
            f"cannot reshape {show(old)} ({total} elements) to {show(new)} ({known} elements)"
        )
    return tuple(new)
