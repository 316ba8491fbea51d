"""Optimizer updates (``adam_step``) against their float64 NumPy reference, on every layout,
with the moments updated in place and nothing else written."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, float64
from burnish import functional as F
from burnish.conformance.compare import assert_close, assert_equal
from burnish.conformance.gradcheck import check_gradients
from burnish.conformance.samples import FLOATS, LAYOUTS, ids, laid_out, sample
from burnish.errors import DTypeError, ShapeError

SCALARS = {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-3, "step_size": 0.25}


def adam_reference(value, grad, m, v, beta_1, beta_2, epsilon, step_size):
    value, grad, m, v = (np.asarray(x, dtype=np.float64) for x in (value, grad, m, v))
    m = m * beta_1 + grad * (1 - beta_1)
    v = v * beta_2 + grad * grad * (1 - beta_2)
    return value - step_size * m / (np.sqrt(v) + epsilon), m, v


def operands(shape, dtype):
    return (sample(shape, dtype, key="value"), sample(shape, dtype, key="grad"),
            sample(shape, dtype, key="m"), sample(shape, dtype, 0.0, 4.0, key="v"))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_adam_step(device, dtype, layout):
    values = operands((3, 4, 5), dtype)
    value, grad, m, v = (laid_out(x, device, dtype, layout) for x in values)
    new = F.adam_step(value, grad, m, v, **SCALARS)
    expected = adam_reference(*values, **SCALARS)
    for got, want in zip((new, m, v), expected):
        assert_close(got, want, dtype)
    assert_equal(value, values[0], dtype)
    assert_equal(grad, values[1], dtype)


@pytest.mark.parametrize("shape", [(), (0, 3), (1,), (1031,)], ids=ids([(), (0, 3), (1,),
                                                                         (1031,)]))
def test_adam_step_shapes(device, shape):
    dtype = FLOATS[1]  # float32: every device has it
    values = operands(shape, dtype)
    tensors = [Tensor.from_data(x, device, dtype) for x in values]
    new = F.adam_step(*tensors, **SCALARS)
    for got, want in zip((new, tensors[2], tensors[3]), adam_reference(*values, **SCALARS)):
        assert_close(got, want, dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_adam_step_with_factors_on_the_device(device, dtype, layout):
    """``adam_step_device``: epsilon and the step size read from a float32 tensor [2]."""
    from burnish import float32

    values = operands((3, 4, 5), dtype)
    value, grad, m, v = (laid_out(x, device, dtype, layout) for x in values)
    held = np.array([SCALARS["epsilon"], SCALARS["step_size"]], np.float32)
    factors = Tensor.from_data(held, device, float32)
    new = F.adam_step(value, grad, m, v, beta_1=SCALARS["beta_1"], beta_2=SCALARS["beta_2"],
                      factors=factors)
    # The reference takes the factors as float32 holds them.
    scalars = dict(SCALARS, epsilon=float(held[0]), step_size=float(held[1]))
    for got, want in zip((new, m, v), adam_reference(*values, **scalars)):
        assert_close(got, want, dtype)
    assert_equal(value, values[0], dtype)
    assert_equal(factors, held, float32)
    with pytest.raises(ShapeError, match=r"factors must be a float32 tensor of shape \[2\]"):
        F.adam_step(value, grad, m, v, beta_1=0.9, beta_2=0.999, factors=factors[:1])


def test_adam_step_moments_rebind_and_shared_memory_keeps_its_values(device):
    dtype = FLOATS[1]
    values = operands((4, 6), dtype)
    value, grad, m, v = (Tensor.from_data(x, device, dtype) for x in values)
    m_seen, v_seen = m.reshape([24]), v.reshape([24])  # views of the moments' memory
    m_object = m
    for _ in range(3):
        value = F.adam_step(value, grad, m, v, **SCALARS)
    assert m is m_object
    want_value, want_m, want_v = values[0], values[2], values[3]
    for _ in range(3):
        want_value, want_m, want_v = adam_reference(want_value, values[1], want_m, want_v,
                                                    **SCALARS)
    assert_close(value, want_value, dtype)
    assert_close(m, want_m, dtype)
    assert_close(v, want_v, dtype)
    assert_equal(m_seen, values[2].reshape(24), dtype)
    assert_equal(v_seen, values[3].reshape(24), dtype)


def test_adam_step_errors_name_both_sides(device):
    dtype = FLOATS[1]
    value, grad, m, v = (Tensor.from_data(x, device, dtype) for x in operands((2, 3), dtype))
    with pytest.raises(ShapeError, match=r"grad has shape \[3, 2\] but value has \[2, 3\]"):
        F.adam_step(value, grad.reshape([3, 2]), m, v, **SCALARS)
    with pytest.raises(DTypeError, match="moment_2 is int64 but value is float32"):
        F.adam_step(value, grad, m, v.int(), **SCALARS)
    with pytest.raises(DTypeError, match="float tensors"):
        F.adam_step(value.int(), grad.int(), m.int(), v.int(), **SCALARS)
    with pytest.raises(ValueError, match="two Tensor objects"):
        F.adam_step(value, grad, m, m, **SCALARS)
    assert_equal(m, operands((2, 3), dtype)[2], dtype)  # a refused call changes nothing


@pytest.mark.requires_autodiff
def test_adam_step_gradients_through_tracked_operands(device):
    # An optimizer steps untracked values; a tracked operand (a meta-learning rule, say) gets
    # the gradient of the update's formula.
    def update(value, grad, moment_1, moment_2):
        m, v = moment_1 * 1.0, moment_2 * 1.0  # rebound by the update, not the leaves
        return F.adam_step(value, grad, m, v, **SCALARS) + m * 0.5 + v * 0.25

    shape = (2, 3)
    check_gradients(update, sample(shape, float64, key="value"),
                    sample(shape, float64, key="grad"), sample(shape, float64, key="m"),
                    sample(shape, float64, 0.5, 2.0, key="v"), device=device, key="adam")
