"""Automatic mixed precision: ``autocast``, under which products run in a 16-bit float dtype
and the precision-sensitive ops in float32."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from burnish.dtype import DType, bfloat16, float16, float32
from burnish.dtype import get_dtype as _get_dtype
from burnish.errors import DTypeError

if TYPE_CHECKING:
    from burnish.tensor import Tensor

_F = TypeVar("_F", bound=Callable[..., Any])

#: The dtypes autocast can compute products in.
LOW_DTYPES = (bfloat16, float16)


class _State(threading.local):
    #: This thread's autocast dtype; None outside autocast (or inside a disabled one).
    dtype: DType | None = None

    def __init__(self) -> None:
        # The dtypes the entered contexts replaced, innermost last (per thread, so that one
        # autocast instance may be entered by several threads at once).
        self.saved: list[DType | None] = []
        # The 16-bit casts of tensors that require grad (parameters, mostly) made since the
        # outermost context was entered, by (id of the primitive, dtype): a weight used at
        # every step of a recurrent layer is cast once, not once per use.
        self.cache: dict[tuple[int, DType], tuple[Any, Tensor]] = {}


#: The per-thread state the ops read (``state.dtype``).
state = _State()

#: Whether any thread ever entered an enabled autocast. The ops test this module global before
#: the thread-local lookup, so a program that never uses autocast pays one global read per op.
entered = False


class autocast:  # lower case: used as a function, as torch.autocast
    """Mixed precision for the ops run inside: ``with burnish.autocast(): loss = ...``.

    Under an enabled autocast, in the thread that entered it:

    - the products (``matmul`` and ``@``, ``functional.linear``, the convolutions and
      transposed convolutions, ``scaled_dot_product_attention``) cast their float32 (and other
      16-bit float) inputs to ``dtype`` and return ``dtype``; the backends accumulate these
      products in float32 and round once;
    - the precision-sensitive ops compute in float32 whatever their input, and return float32:
      ``softmax``, ``log_softmax``, ``exp``, ``log``, ``pow``, the reductions ``sum``,
      ``mean``, ``var``/``std`` and ``prod``, the recurrent cells (their state stays float32),
      the norms of ``burnish.nn`` and its losses;
    - every other op runs in the dtype of its inputs (a 16-bit and a float32 operand give
      float32, as always).

    Parameters are not touched: the casts are ops like any other, so under autodiff the
    gradient of a float32 parameter arrives in float32. A tensor that requires grad is cast
    once per outermost context however often it is used (a recurrent layer's weights), as
    ``torch.autocast`` caches its casts; so do not update such a tensor in place inside the
    context (optimizer steps belong outside it). ``dtype`` is ``bfloat16`` (the
    default: float32's range, no loss scaling needed) or ``float16`` (pair it with
    ``burnish.optim.GradScaler``). Contexts nest (the innermost wins; ``enabled=False`` turns
    autocast off inside), the state is per thread, and an instance also decorates a function.
    Raises DTypeError for another dtype.
    """

    def __init__(self, dtype: DType | str = bfloat16, enabled: bool = True):
        dtype = _get_dtype(dtype)
        if dtype not in LOW_DTYPES:
            raise DTypeError(f"autocast computes in bfloat16 or float16, got {dtype}")
        self.dtype = dtype
        self.enabled = bool(enabled)

    def __enter__(self) -> autocast:
        global entered
        state.saved.append(state.dtype)
        if self.enabled:
            entered = True
        state.dtype = self.dtype if self.enabled else None
        return self

    def __exit__(self, *exc: Any) -> None:
        state.dtype = state.saved.pop()
        if not state.saved:
            state.cache.clear()

    def __call__(self, fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.dtype, self.enabled):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"autocast(dtype={self.dtype.name}, enabled={self.enabled})"


def active_dtype() -> DType | None:
    """The autocast dtype of this thread, or None outside an enabled autocast."""
    return state.dtype if entered else None


def low(x: Tensor, dtype: DType) -> Tensor:
    """``x`` cast to ``dtype`` when it is a float32 or 16-bit float tensor (a product's input
    under autocast); float64, int and bool tensors as they are."""
    current = x._dtype
    if current is dtype or not (current is float32 or current in LOW_DTYPES):
        return x
    if not x.is_require_grad():
        return x.cast(dtype)
    # Cast once per outermost context, as torch.autocast caches the casts of its leaves: the
    # cast is then one node of the graph, its gradient the sum over every use. The entry holds
    # the primitive, so its id cannot be reused while the entry lives, and an op that rebinds
    # the tensor in place gives it a new primitive, so a stale cast is never found.
    key = (id(x._prim), dtype)
    found = state.cache.get(key)
    if found is not None:
        return found[1]
    out = x.cast(dtype)
    state.cache[key] = (x._prim, out)
    return out


def full(x: Tensor) -> Tensor:
    """``x`` cast to float32 when it is a 16-bit float tensor and this thread is under
    autocast (the input of a precision-sensitive op); otherwise ``x`` as it is."""
    if entered and state.dtype is not None and x._dtype in LOW_DTYPES:
        return x.cast(float32)
    return x
