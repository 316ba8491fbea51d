"""The donating ops (``add_assign``, ``sub_assign``, ``mul_assign``, ``div_assign``,
``add_scalar_assign``, ``mul_scalar_assign``), reached through ``add_``, ``sub_``, ``mul_`` and
``div_``: their values, and that memory another tensor still reads is never written."""

from __future__ import annotations

import operator

import numpy as np
import pytest

from burnish import Tensor
from burnish.conformance.compare import assert_close, assert_equal
from burnish.conformance.samples import FLOATS, NUMERIC, ids, sample

#: (in-place method, out-of-place reference); ``div_`` is true division, for floats only.
OPS = {"add_": operator.add, "sub_": operator.sub, "mul_": operator.mul,
       "div_": operator.truediv}
#: (the donated tensor's shape, the operand's): the operand broadcasts into the tensor.
SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 5, 3), (5, 1)), ((2, 3), ()), ((0, 3), (3,)),
          ((), ()), ((1023, 7), (7,))]
#: Tensors that share the donated tensor's values, as views do on backends with strided views,
#: each with the same view of a NumPy array.
ALIASES = {
    "reshape": (lambda x: x.reshape([-1]), lambda a: a.reshape(-1)),
    "slice": (lambda x: x[1:], lambda a: a[1:]),
    "transpose": (lambda x: x.transpose(0, 1), lambda a: a.T),
    "expand": (lambda x: x.unsqueeze(0).expand((2, 3, 4)), lambda a: np.broadcast_to(a, (2, 3, 4))),
    "primitive": (lambda x: Tensor.from_primitive(x.primitive, x.device, x.dtype), lambda a: a),
}


def donated(values: np.ndarray, device) -> Tensor:
    """A tensor holding ``values`` that nothing else references: the result of an op, so that a
    backend which may write a donated primitive in place does so."""
    return Tensor.from_numpy(values, device) * 1


def operands(name: str, dtype, x_shape, y_shape) -> tuple[np.ndarray, np.ndarray]:
    # uint8 stays non-negative (sub gets a smaller operand); divisors stay away from zero.
    x = sample(x_shape, dtype, 5, 9) if not dtype.signed else sample(x_shape, dtype)
    y = sample(y_shape, dtype, 1, 4, key=1) if name in ("sub_", "div_") else sample(
        y_shape, dtype, -4 if dtype.signed else 0, 4, key=1)
    return x, y


def reference(name: str, x: np.ndarray, y, dtype) -> np.ndarray:
    wide = np.float64 if dtype.is_float else np.int64
    out = OPS[name](x.astype(wide), np.asarray(y).astype(wide))
    return np.broadcast_to(out, x.shape)


def check(out: Tensor, expected: np.ndarray, dtype) -> None:
    if dtype.is_float:
        assert_close(out, expected, dtype)
    else:
        assert_equal(out, expected.astype(dtype.numpy), dtype)


def cases(names):
    return [(name, dtype) for name in names for dtype in (FLOATS if name == "div_" else NUMERIC)]


@pytest.mark.parametrize(("x_shape", "y_shape"), SHAPES,
                         ids=[f"{ids(p)[0]}-{ids(p)[1]}" for p in SHAPES])
@pytest.mark.parametrize(("name", "dtype"), cases(OPS), ids=[f"{n}{d.name}" for n, d in cases(OPS)])
def test_assign(device, name, dtype, x_shape, y_shape):
    x, y = operands(name, dtype, x_shape, y_shape)
    target = donated(x, device)
    operand = Tensor.from_numpy(y, device)
    assert getattr(target, name)(operand) is target
    check(target, reference(name, x, y, dtype), dtype)
    assert_equal(operand, y, dtype)


SCALARS = {"add_": 3, "sub_": 2, "mul_": 3, "div_": 4.0}


@pytest.mark.parametrize(("name", "dtype"), cases(SCALARS),
                         ids=[f"{n}{d.name}" for n, d in cases(SCALARS)])
def test_assign_scalar(device, name, dtype):
    # add_ and mul_ reach add_scalar_assign and mul_scalar_assign; sub_ and div_ pass the
    # scalar to sub_assign and div_assign as a 0-d operand.
    x, _ = operands(name, dtype, (3, 5), ())
    target = donated(x, device)
    assert getattr(target, name)(SCALARS[name]) is target
    check(target, reference(name, x, SCALARS[name], dtype), dtype)


@pytest.mark.parametrize("alias", list(ALIASES))
@pytest.mark.parametrize("scalar", [False, True], ids=["tensor", "scalar"])
@pytest.mark.parametrize(("name", "dtype"), cases(OPS), ids=[f"{n}{d.name}" for n, d in cases(OPS)])
def test_assign_keeps_an_alias(device, name, dtype, scalar, alias):
    """The donated tensor's memory is shared with another tensor: the op must not write it."""
    x, y = operands(name, dtype, (3, 4), (4,))
    view, numpy_view = ALIASES[alias]
    target = donated(x, device)
    other = view(target)
    operand = SCALARS[name] if scalar else Tensor.from_numpy(y, device)
    getattr(target, name)(operand)
    assert_equal(other, numpy_view(x), dtype)
    check(target, reference(name, x, SCALARS[name] if scalar else y, dtype), dtype)


@pytest.mark.parametrize("alias", list(ALIASES))
@pytest.mark.parametrize(("name", "dtype"), cases(OPS), ids=[f"{n}{d.name}" for n, d in cases(OPS)])
def test_assign_to_an_alias_keeps_the_original(device, name, dtype, alias):
    """The alias is donated: the tensor it shares memory with must keep its values."""
    x, _ = operands(name, dtype, (3, 4), ())
    view, numpy_view = ALIASES[alias]
    original = donated(x, device)
    other = view(original)
    getattr(other, name)(SCALARS[name])
    assert_equal(original, x, dtype)
    check(other, reference(name, numpy_view(x), SCALARS[name], dtype), dtype)


@pytest.mark.parametrize(("name", "dtype"), cases(OPS), ids=[f"{n}{d.name}" for n, d in cases(OPS)])
def test_assign_with_an_operand_that_views_the_tensor(device, name, dtype):
    """``x.add_(x[:1])``: the operand reads the memory the result may be written to, so a
    backend that writes in place must not read a row it has already written as the operand."""
    x, _ = operands(name, dtype, (64, 33), ())
    x[0] = sample((33,), dtype, 1, 4, key=2)  # a divisor without zeros, no uint8 underflow
    target = donated(x, device)
    getattr(target, name)(target[:1])
    check(target, reference(name, x, x[:1], dtype), dtype)
