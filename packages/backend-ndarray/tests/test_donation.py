"""Donating ops (``add_assign`` and kin): a donated, unshared array is updated in its own memory;
one that anything else references is never written."""

from __future__ import annotations

import sys
import weakref

import numpy as np
import pytest

from burnish import Tensor
from burnish.dtype import float32
from burnish.ndarray.backend import NdArrayBackend
from burnish.tensor import core

IN_PLACE = sys.version_info < (3, 14)
needs_counting = pytest.mark.skipif(not IN_PLACE, reason="3.14 never updates in place")

OPS = [("add_assign", np.add), ("sub_assign", np.subtract), ("mul_assign", np.multiply),
       ("div_assign", np.true_divide)]
SCALAR_OPS = [("add_scalar_assign", np.add), ("mul_scalar_assign", np.multiply)]


@pytest.fixture(scope="module")
def b() -> NdArrayBackend:
    return NdArrayBackend()


def fresh() -> np.ndarray:
    return np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)


def donate(b: NdArrayBackend, name: str, operand) -> tuple[np.ndarray, bool]:
    """Donate a fresh array, as a Tensor does (its one reference a local); whether the result is
    that array."""
    x = fresh()
    address = x.ctypes.data
    alive = weakref.ref(x)
    if isinstance(operand, float):
        out = getattr(b, name)(x, operand, float32)
    else:
        out = getattr(b, name)(x, operand)
    del x
    return out, out is alive() and out.ctypes.data == address


@needs_counting
@pytest.mark.parametrize("name, ufunc", OPS)
def test_a_donated_unshared_array_is_reused(b, name, ufunc):
    operand = np.full(3, 2.0, np.float32)
    out, reused = donate(b, name, operand)
    assert reused
    np.testing.assert_array_equal(out, ufunc(fresh(), operand))


@needs_counting
@pytest.mark.parametrize("name, ufunc", SCALAR_OPS)
def test_a_donated_unshared_array_is_reused_by_scalar_ops(b, name, ufunc):
    out, reused = donate(b, name, 2.0)
    assert reused
    np.testing.assert_array_equal(out, ufunc(fresh(), np.float32(2.0)))


def test_the_reference_count_is_the_one_measured(b):
    # One reference more than a donation (a variable kept by the caller) and in-place is off:
    # the count is exact, not a bound.
    x = fresh()
    kept = x
    out = b.add_assign(x, np.ones(3, np.float32))
    assert out is not kept
    np.testing.assert_array_equal(kept, fresh())


@pytest.mark.parametrize("name, ufunc", OPS)
def test_an_array_a_variable_holds_is_never_written(b, name, ufunc):
    held = fresh()
    donated = held  # the donor's own reference; ``held`` is one more
    out = getattr(b, name)(donated, np.full(3, 2.0, np.float32))
    assert out is not held
    np.testing.assert_array_equal(held, fresh())
    np.testing.assert_array_equal(out, ufunc(fresh(), np.float32(2.0)))


@pytest.mark.parametrize("name", ["add_scalar_assign", "mul_scalar_assign"])
def test_an_array_a_view_holds_is_never_written(b, name):
    x = fresh()
    view = x[0]
    out = getattr(b, name)(x, 5.0, float32)
    assert out is not x
    np.testing.assert_array_equal(view, [1.0, 2.0, 3.0])


def test_a_view_is_never_written(b):
    base = fresh()
    out = b.add_scalar_assign(base[1], 1.0, float32)
    np.testing.assert_array_equal(base, fresh())
    np.testing.assert_array_equal(out, [5.0, 6.0, 7.0])


def test_a_read_only_array_is_never_written(b):
    x = fresh()
    x.flags.writeable = False
    out = b.mul_scalar_assign(x, 2.0, float32)
    assert out is not x
    np.testing.assert_array_equal(x, fresh())


def test_another_tensor_sharing_the_array_keeps_its_values():
    x = Tensor.from_data(fresh()) + 0
    other = core.make(x._prim, x._device, x._dtype)
    x.add_(1.0).mul_(Tensor.from_data(np.full(3, 2.0, np.float32)))
    np.testing.assert_array_equal(other.to_numpy(), fresh())
    np.testing.assert_array_equal(x.to_numpy(), (fresh() + 1) * 2)


def test_a_numpy_view_of_the_tensor_keeps_its_values():
    x = Tensor.from_data(fresh()) + 0
    view = x._prim[0]
    x.sub_(1.0)
    np.testing.assert_array_equal(view, [1.0, 2.0, 3.0])


def test_an_array_the_user_passed_in_keeps_its_values():
    mine = fresh()
    x = Tensor.from_data(mine)
    x.add_(1.0).div_(2.0)
    np.testing.assert_array_equal(mine, fresh())


@needs_counting
@pytest.mark.parametrize("device", ["ndarray", "autodiff+ndarray"])
def test_tensor_in_place_methods_reuse_an_unshared_buffer(device):
    x = Tensor.from_data(fresh(), device) + 0
    prim = x._prim.inner if device.startswith("autodiff") else x._prim
    address, alive = prim.ctypes.data, weakref.ref(prim)
    del prim
    x.mul_(0.5).add_(1.0).sub_(Tensor.from_data(np.ones(3, np.float32), device)).div_(2.0)
    prim = x._prim.inner if device.startswith("autodiff") else x._prim
    assert prim is alive() and prim.ctypes.data == address
    np.testing.assert_array_equal(x.to_numpy(), fresh() * 0.5 / 2.0)
