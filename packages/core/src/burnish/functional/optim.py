"""Optimizer updates as single ops (``burnish.optim`` calls these)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnish.dtype import Kind, float32
from burnish.errors import DeviceError, DTypeError, ShapeError
from burnish.shape import show
from burnish.tensor import core as _core

if TYPE_CHECKING:
    from burnish.tensor import Tensor


def adam_step(value: Tensor, grad: Tensor, moment_1: Tensor, moment_2: Tensor, *,
              beta_1: float, beta_2: float, epsilon: float = 0.0, step_size: float = 0.0,
              factors: Tensor | None = None) -> Tensor:
    """One Adam update of ``value``, elementwise, as one op (one kernel on GPU backends):

    ``moment_1 = moment_1 * beta_1 + grad * (1 - beta_1)``,
    ``moment_2 = moment_2 * beta_2 + grad^2 * (1 - beta_2)``, and returns
    ``value - step_size * moment_1 / (sqrt(moment_2) + epsilon)``.

    The moments are updated in place, as ``add_`` does: the two Tensor objects are rebound to
    their new values (in their own memory where the backend can prove nothing else sees it),
    and other tensors sharing their memory keep their values; ``value`` and ``grad`` are not
    modified. Bias correction is folded into the scalars by the caller: with step count
    ``t``, ``step_size = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)`` and ``epsilon`` times
    ``sqrt(1 - beta_2^t)`` give Kingma & Ba's update. ``factors``, a float32 tensor of shape
    ``[2]`` on the same device, holds ``(epsilon, step_size)`` instead: values computed on the
    device, which a captured step (``burnish.capture``) replays correctly as they change from
    step to step (``Adam(capturable=True)`` does this). All four tensors must have one float
    dtype, one shape and one device (DTypeError, ShapeError, DeviceError), and the moments
    must be two Tensor objects other than ``value`` and ``grad`` (ValueError).
    """
    T = _core.Tensor
    if not (type(value) is T and type(grad) is T and type(moment_1) is T
            and type(moment_2) is T):
        _check_operands(value, grad, moment_1, moment_2)
    dtype, shape, device = value._dtype, value._prim.shape, value._device
    # One expression for the common case (an optimizer's call); the checks that name the
    # culprit run only when it fails.
    if not (dtype.kind is Kind.FLOAT and grad._dtype is dtype and moment_1._dtype is dtype
            and moment_2._dtype is dtype and grad._prim.shape == shape
            and moment_1._prim.shape == shape and moment_2._prim.shape == shape
            and grad._device is device and moment_1._device is device
            and moment_2._device is device and moment_1 is not moment_2
            and moment_1 is not value and moment_1 is not grad and moment_2 is not value
            and moment_2 is not grad):
        _check_operands(value, grad, moment_1, moment_2)
    # Donate the moments' primitives: their Tensors let go first, so that a backend sees them
    # unreferenced when nothing else shares them (see ``InPlaceMixin``).
    m, v = moment_1._prim, moment_2._prim
    moment_1._prim = moment_2._prim = None
    try:
        if factors is None:
            new, m, v = device.backend.adam_step(value._prim, grad._prim, m, v, float(beta_1),
                                                 float(beta_2), float(epsilon),
                                                 float(step_size), dtype)
        else:
            new, m, v = device.backend.adam_step_device(
                value._prim, grad._prim, m, v, float(beta_1), float(beta_2),
                _factors(factors, device)._prim, dtype)
    finally:
        moment_1._prim, moment_2._prim = m, v
    return _core.make(new, device, dtype)


def _factors(factors: Tensor, device) -> Tensor:
    """``factors`` checked: a float32 tensor ``[2]`` on ``device``."""
    if type(factors) is not _core.Tensor:
        raise TypeError(f"adam_step: factors must be a Tensor, got {type(factors).__name__}")
    if factors._dtype is not float32 or factors._prim.shape != (2,):
        raise ShapeError(f"adam_step: factors must be a float32 tensor of shape [2] (epsilon, "
                         f"step size), got {factors._dtype} of shape {show(factors._prim.shape)}")
    if factors._device is not device and factors._device != device:
        raise DeviceError(f"adam_step: factors are on {factors._device!r} but value is on "
                          f"{device!r}; move them with .to_device()")
    return factors


def _check_operands(value: Tensor, grad: Tensor, moment_1: Tensor, moment_2: Tensor) -> None:
    """Raise the error that names what is wrong with ``adam_step``'s operands, if anything
    is (equal devices that are different objects pass)."""
    tensors = (value, grad, moment_1, moment_2)
    names = ("value", "grad", "moment_1", "moment_2")
    for name, x in zip(names, tensors):
        if type(x) is not _core.Tensor:
            raise TypeError(f"adam_step: {name} must be a Tensor, got {type(x).__name__}")
    if moment_1 is moment_2 or any(m is x for m in tensors[2:] for x in tensors[:2]):
        raise ValueError("adam_step updates moment_1 and moment_2 in place: they must be two "
                         "Tensor objects, neither of them value or grad")
    dtype, shape = value._dtype, value._prim.shape
    if dtype.kind is not Kind.FLOAT:
        raise DTypeError(f"adam_step updates float tensors, got value of {dtype}")
    for name, x in zip(names[1:], tensors[1:]):
        if x._dtype is not dtype:
            raise DTypeError(f"adam_step: {name} is {x._dtype} but value is {dtype}")
        if x._prim.shape != shape:
            raise ShapeError(f"adam_step: {name} has shape {show(x._prim.shape)} but value has "
                             f"{show(shape)}")
        _core.same_device(value, x, "adam_step")
