"""The ``Communicator`` protocol every collective library implements (MPI here, NCCL in
burnish-backend-cuda), the pending result of a collective started early, and the errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from burnish import Tensor
from burnish.errors import BurnishError, DTypeError

#: The reductions of ``all_reduce`` and ``reduce_scatter``; ``mean`` is the sum divided by the
#: world size.
REDUCE_OPS = ("sum", "mean", "max", "min", "prod")


class DistributedError(BurnishError, RuntimeError):
    """A collective failed: a rank did not answer within the communicator's timeout (dead, hung,
    or calling other collectives), named by ``ranks``; or the job could not be joined."""

    def __init__(self, message: str, ranks: Sequence[int] = ()):
        super().__init__(message)
        self.ranks = tuple(ranks)


class Pending:
    """The result of a collective started and not waited for: ``wait()`` returns its tensors
    (once; later calls return them again)."""

    def __init__(self, finish: Callable[[], list[Tensor]]):
        self._finish: Callable[[], list[Tensor]] | None = finish
        self._result: list[Tensor] = []

    def wait(self) -> list[Tensor]:
        """Block until the collective is done on this rank; its result tensors."""
        if self._finish is not None:
            self._result, self._finish = self._finish(), None
        return self._result


@runtime_checkable
class Communicator(Protocol):
    """Rank ``rank`` of ``world_size`` processes and the collectives they run together on
    burnish tensors. Every rank calls the same collectives in the same order with tensors of
    the same shapes and dtypes; results are new tensors of the argument's backend and device
    (a tensor of an autodiff backend goes in through its inner tensor; the result is not
    tracked)."""

    rank: int
    world_size: int

    def all_reduce(self, tensor: Tensor, op: str = "sum") -> Tensor:
        """The elementwise ``op`` (``REDUCE_OPS``) of ``tensor`` over the ranks, on every rank."""
        ...

    def all_reduce_start(self, tensors: Sequence[Tensor], op: str = "sum") -> Pending:
        """``all_reduce`` of each tensor, started now and finished by the result's ``wait()``
        (what overlaps gradient reduction with the backward pass)."""
        ...

    def broadcast(self, tensor: Tensor, root: int = 0) -> Tensor:
        """Rank ``root``'s ``tensor`` on every rank (each passes one of the same shape)."""
        ...

    def all_gather(self, tensor: Tensor) -> Tensor:
        """Every rank's ``tensor`` stacked in rank order: shape ``[world_size, *shape]``."""
        ...

    def reduce_scatter(self, tensor: Tensor, op: str = "sum") -> Tensor:
        """The ``op`` over the ranks of ``tensor`` (first dim a multiple of ``world_size``),
        cut along the first dim into ``world_size`` equal parts: rank ``r`` gets part ``r``."""
        ...

    def barrier(self) -> None:
        """Return once every rank has called it."""
        ...

    def all_reduce_gradients(self, grads: Any, params_or_module: Any, op: str = "mean") -> Any:
        """``grads`` (``Gradients`` or ``GradientsParams``) with every trained parameter's
        gradient reduced over the ranks, as a new object of the same type."""
        ...

    def broadcast_module(self, module: Any, root: int = 0) -> Any:
        """``module`` holding rank ``root``'s parameter values."""
        ...

    def close(self) -> None:
        """Free the communicator after a clean end."""
        ...

    def abort(self) -> None:
        """Free it at once after an error, abandoning collectives in flight (and, where the
        library can, ending the other ranks' processes too)."""
        ...


def check_op(op: str, tensor: Tensor, name: str = "all_reduce") -> None:
    """ValueError for an unknown ``op``; DTypeError for reducing bools and the mean of
    integers."""
    if op not in REDUCE_OPS:
        raise ValueError(f"{name}: op must be one of {', '.join(REDUCE_OPS)}, got {op!r}")
    if tensor.dtype.is_bool:
        raise DTypeError(f"{name}: bool tensors cannot be reduced; cast them with .int() (sum "
                         "counts the ranks where an element is true)")
    if op == "mean" and not tensor.dtype.is_float:
        raise DTypeError(f"{name}: the mean of {tensor.dtype} values is not an integer; cast "
                         "to a float dtype first, or reduce with op='sum'")


def check_root(root: int, world_size: int) -> None:
    """ValueError for a root outside the world."""
    if not 0 <= root < world_size:
        raise ValueError(f"broadcast: root {root} is outside 0..{world_size - 1}")
