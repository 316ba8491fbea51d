"""Gradients of elementwise math, broadcasting, matmul, casts and masks (autodiff backends)."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Tensor, bfloat16, float16, float32, float64
from burnish.conformance.gradcheck import FLOAT32_SCALE, assert_gradient, check_gradients, gradient
from burnish.conformance.samples import sample
from burnish.tensor_data import tolerance

# Gradients are float64 where the device has it, else float32 (WebGPU), checked against
# finite differences in float64 (see burnish.conformance.gradcheck).
pytestmark = pytest.mark.requires_autodiff


def values(shape, low=-2.0, high=2.0, key=0):
    return sample(shape, float64, low, high, key)


def away_from_zero(shape, key=0):
    """Values with |v| in [0.5, 2]: no kink of abs, sign or recip within reach."""
    v = values(shape, 0.5, 2.0, key)
    return v * np.where(values(shape, key=(key, "sign")) < 0, -1.0, 1.0)


# -- unary math -----------------------------------------------------------------------------------

UNARY = {
    "exp": (lambda x: x.exp(), values((2, 3))),
    "log": (lambda x: x.log(), values((2, 3), 0.2, 3.0)),
    "log1p": (lambda x: x.log1p(), values((2, 3), -0.8, 3.0)),
    "sqrt": (lambda x: x.sqrt(), values((2, 3), 0.2, 3.0)),
    "rsqrt": (lambda x: x.rsqrt(), values((2, 3), 0.2, 3.0)),
    "recip": (lambda x: x.recip(), away_from_zero((2, 3))),
    "sin": (lambda x: x.sin(), values((2, 3))),
    "cos": (lambda x: x.cos(), values((2, 3))),
    "tan": (lambda x: x.tan(), values((2, 3), -1.2, 1.2)),
    "tanh": (lambda x: x.tanh(), values((2, 3))),
    "erf": (lambda x: x.erf(), values((2, 3))),
    "sigmoid": (lambda x: x.sigmoid(), values((2, 3), -5, 5)),
    "neg": (lambda x: -x, values((2, 3))),
    "abs": (lambda x: x.abs(), away_from_zero((2, 3))),
    "square": (lambda x: x ** 2, values((2, 3))),
    "cube": (lambda x: x.pow(3), values((2, 3))),
    "pow_half": (lambda x: x ** 0.5, values((2, 3), 0.2, 3.0)),
    "pow_negative": (lambda x: x ** -1.5, values((2, 3), 0.2, 3.0)),
    "pow_zero": (lambda x: x ** 0, values((2, 3))),
    "powf_one": (lambda x: x.powf(1.0), values((2, 3))),
    "clamp": (lambda x: x.clamp(-1.0, 1.0), values((3, 4), key="clamp") * 1.1 + 0.05),
    "clamp_min": (lambda x: x.clamp_min(0.3), values((3, 4)) + 0.01),
    "clamp_max": (lambda x: x.clamp_max(-0.3), values((3, 4)) + 0.01),
    "add_scalar": (lambda x: x + 2.5, values((2, 3))),
    "sub_scalar": (lambda x: x - 2.5, values((2, 3))),
    "rsub_scalar": (lambda x: 2.5 - x, values((2, 3))),
    "mul_scalar": (lambda x: x * -3.0, values((2, 3))),
    "div_scalar": (lambda x: x / 4.0, values((2, 3))),
    "rdiv_scalar": (lambda x: 3.0 / x, away_from_zero((2, 3))),
    "rpow_scalar": (lambda x: 2.0 ** x, values((2, 3))),
    "scalar_tensor": (lambda x: x.sum() * x, values((2, 3))),
    "floor_times_x": (lambda x: x.floor() * x, values((2, 3)) + 0.01),
    "ceil_round_sign": (lambda x: (x.ceil() + x.round() + x.sign()) * x, values((2, 3)) + 0.01),
    "remainder_scalar": (lambda x: x % 0.75, values((2, 3), 0.01, 0.7)),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, device):
    fn, x = UNARY[name]
    check_gradients(fn, x, device=device, key=name)


# -- binary math with broadcasting ----------------------------------------------------------------

SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((3, 1), (1, 4)), ((2, 1, 3), (4, 1)), ((), (2, 2))]

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a ** b,
    "maximum": lambda a, b: a.maximum(b),
    "minimum": lambda a, b: a.minimum(b),
}


@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_broadcast(name, shapes, device):
    lhs, rhs = shapes
    if name == "pow":
        a, b = values(lhs, 0.3, 2.0, key=1), values(rhs, 0.4, 1.5, key=2)
    elif name == "div":
        a, b = values(lhs, key=1), away_from_zero(rhs, key=2)
    else:
        # maximum/minimum: no ties within reach of the finite differences.
        a, b = values(lhs, key=1), values(rhs, key=2) + 0.013
    check_gradients(BINARY[name], a, b, device=device, key=(name, shapes))


@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((2, 3, 4), (1, 3, 1), (3, 1)),
                                    ((3, 1), (), (4,))], ids=str)
def test_mul_add(shapes, device):
    x, a, b = (values(shape, key=k) for k, shape in enumerate(shapes))
    check_gradients(lambda x, a, b: x.mul_add(a, b), x, a, b, device=device,
                    key=("mul_add", shapes))


@pytest.mark.parametrize("shapes", SHAPES[:2], ids=lambda s: f"{s[0]}-{s[1]}")
def test_remainder(shapes, device):
    # Dividends halfway between multiples of the divisor: the remainder jumps at the multiples.
    divisor = away_from_zero(shapes[1], key=2)
    whole = np.floor(values(shapes[0], -3.0, 3.0, key=1))
    check_gradients(lambda a, b: a % b, (whole + 0.5) * divisor, divisor, device=device)


def test_same_tensor_on_both_sides(device):
    check_gradients(lambda x: x * x + x / (x.abs() + 1.0), values((3,)), device=device)


def test_broadcast_gradient_by_hand(device, grad_dtype):
    # d sum(a + b) / da for a [3, 1] and b [4]: every element of a meets 4 of b, and each
    # element of b meets 3 of a.
    a = Tensor.from_data(values((3, 1)), device, grad_dtype).require_grad()
    b = Tensor.from_data(values((4,), key=1), device, grad_dtype).require_grad()
    grads = (a + b).backward()
    np.testing.assert_array_equal(gradient(a, grads), np.full((3, 1), 4.0))
    np.testing.assert_array_equal(gradient(b, grads), np.full((4,), 3.0))
    grads = (a * b).sum().backward()
    assert_gradient(a, grads, np.full((3, 1), b.to_numpy().astype(np.float64).sum()))
    assert_gradient(b, grads, np.full((4,), a.to_numpy().astype(np.float64).sum()))


def test_maximum_ties_split_the_gradient(device, grad_dtype):
    a = Tensor.from_data([1.0, 2.0, 3.0], device, grad_dtype).require_grad()
    b = Tensor.from_data([1.0, 5.0, 0.0], device, grad_dtype).require_grad()
    grads = a.maximum(b).backward()
    np.testing.assert_array_equal(gradient(a, grads), [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(gradient(b, grads), [0.5, 1.0, 0.0])
    grads = a.minimum(b).backward()
    np.testing.assert_array_equal(gradient(a, grads), [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(gradient(b, grads), [0.5, 0.0, 1.0])


def test_pow_conventions_at_zero(device, grad_dtype):
    # PyTorch's: d(x ** 0)/dx is 0 even at x = 0; d(0 ** y)/dy is 0 for y >= 0.
    x = Tensor.from_data([0.0, 2.0], device, grad_dtype).require_grad()
    y = Tensor.from_data([0.0, 2.0], device, grad_dtype).require_grad()
    grads = x.pow(y).backward()
    assert_gradient(x, grads, [0.0, 4.0])
    assert_gradient(y, grads, [0.0, 4.0 * np.log(2.0)])


def test_clamp_stops_the_gradient_at_its_bounds(device, grad_dtype):
    # PyTorch 2.14: the gradient passes strictly inside the bounds only.
    x = Tensor.from_data([-2.0, -1.0, 0.0, 1.0, 2.0], device, grad_dtype).require_grad()
    grads = x.clamp(-1.0, 1.0).backward()
    np.testing.assert_array_equal(gradient(x, grads), [0.0, 0.0, 1.0, 0.0, 0.0])
    grads = x.clamp_min(0.0).backward()
    np.testing.assert_array_equal(gradient(x, grads), [0.0, 0.0, 0.0, 1.0, 1.0])
    grads = x.clamp_max(0.0).backward()
    np.testing.assert_array_equal(gradient(x, grads), [1.0, 1.0, 0.0, 0.0, 0.0])


# -- matmul ---------------------------------------------------------------------------------------

MATMUL = [((3, 4), (4, 2)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((4,), (4, 3)),
          ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (2, 4, 1))]


@pytest.mark.parametrize("shapes", MATMUL, ids=lambda s: f"{s[0]}@{s[1]}")
def test_matmul(shapes, device):
    a, b = values(shapes[0], key=1), values(shapes[1], key=2)
    check_gradients(lambda x, y: x.matmul(y), a, b, device=device, key=shapes)


def test_matmul_by_hand(device, grad_dtype):
    a = Tensor.from_data(values((3, 4), key=1), device, grad_dtype).require_grad()
    b = Tensor.from_data(values((4, 2), key=2), device, grad_dtype).require_grad()
    grads = a.matmul(b).backward()
    ones = np.ones((3, 2))
    assert_gradient(a, grads, ones @ b.to_numpy().astype(np.float64).T)
    assert_gradient(b, grads, a.to_numpy().astype(np.float64).T @ ones)


# -- casts, masks ---------------------------------------------------------------------------------


def test_cast_between_floats(device, grad_dtype, dtypes):
    # Through a float dtype narrower than the gradient's: float32 under float64 gradients, else
    # float16 or bfloat16.
    narrower = next((d for d in (float32, float16, bfloat16)
                     if d.itemsize < grad_dtype.itemsize and d in dtypes), None)
    if narrower is None:
        pytest.skip(f"{device} has no float dtype narrower than {grad_dtype}")
    # Linear, computed in the narrower dtype on the way: multiples of 1/8 and a step of 1/4 keep
    # the forward exact there. The gradient is rounded to it on the way back, so the check gets
    # its tolerance (check_gradients scales a float32 check's by FLOAT32_SCALE).
    tol = tolerance(narrower)[0] / (1.0 if grad_dtype is float64 else FLOAT32_SCALE)
    check_gradients(lambda x: (x.cast(narrower) * 3.0).cast(x.dtype),
                    np.round(values((2, 3)) * 8.0) / 8.0, device=device, eps=0.25, rtol=tol,
                    atol=tol)
    x = Tensor.from_data(values((2, 3)), device, grad_dtype).require_grad()
    grads = x.cast(narrower).backward()
    grad = x.grad(grads)
    assert grad.dtype is grad_dtype
    np.testing.assert_array_equal(grad.to_numpy(), np.ones((2, 3)))


def test_cast_to_int_has_no_gradient(device, grad_dtype):
    x = Tensor.from_data(values((2, 3)), device, grad_dtype).require_grad()
    grads = (x.int().float().cast(x.dtype) * x).backward()
    np.testing.assert_array_equal(gradient(x, grads), np.trunc(x.to_numpy()))


MASK = np.array([[True, False, True], [False, False, True]])


# The masks are made on the inputs' device: float32 gradient checks evaluate the same function
# on the reference backend too (see gradcheck).


def test_where(device):
    check_gradients(lambda x, y: burnish.where(Tensor.from_data(MASK, x.device), x, y),
                    values((2, 3)), values((3,), key=1), device=device)
    check_gradients(lambda x: burnish.where(Tensor.from_data(MASK, x.device), x, 0.5),
                    values((1, 3)), device=device)


def test_mask_fill_and_mask_where(device):
    check_gradients(lambda x: x.mask_fill(Tensor.from_data(MASK[0], x.device), 7.0),
                    values((2, 3)), device=device)
    check_gradients(lambda x, v: x.mask_where(Tensor.from_data(MASK, x.device), v),
                    values((2, 3)), values((2, 3), key=1), device=device)
