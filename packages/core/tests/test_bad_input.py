"""Bad input answered clearly: int division by zero, debug mode, ragged data, PyTorch habits."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor

OPS = {"//": operator.floordiv, "%": operator.mod}


@pytest.fixture
def debug_off():
    was = bn.is_debug()
    bn.set_debug(False)
    yield
    bn.set_debug(was)


@pytest.fixture
def values_on_device(monkeypatch, debug_off):
    """The ndarray backend pretending to keep its values on a device (as GPU backends do)."""
    monkeypatch.setattr(bn.backend("ndarray"), "values_on_host", False)


@pytest.mark.parametrize("op", ["//", "%"])
def test_int_division_by_a_scalar_zero_raises(op):
    x = Tensor.from_data([5, 7, -3])
    with pytest.raises(bn.DivisionByZeroError, match=rf"int64 tensor \[3\] {op} 0"):
        OPS[op](x, 0)
    with pytest.raises(ZeroDivisionError):
        OPS[op](x, False)
    # Without a zero, and in float, nothing changes: floats divide by zero to inf or NaN.
    assert OPS[op](x, 2).tolist() == ([2, 3, -2] if op == "//" else [1, 1, 1])
    assert OPS[op](x, Tensor.from_data([2, 3, 4])).tolist() == ([2, 2, -1] if op == "//"
                                                                else [1, 1, 1])
    assert np.isnan(OPS[op](x.float() * 0, 0.0).to_numpy()).all()


@pytest.mark.parametrize("op", ["//", "%"])
def test_int_division_by_a_tensor_holding_zero_names_the_position(op):
    x = Tensor.from_data([[5, 7, -3], [1, 2, 3]], dtype="int32")
    divisor = Tensor.from_data([[1, 2, 0]], dtype="int32")
    with pytest.raises(bn.DivisionByZeroError, match=r"int32 tensor \[1, 3\], whose value at "
                                                     r"index \[0, 2\] is 0"):
        OPS[op](x, divisor)
    with pytest.raises(bn.DivisionByZeroError, match=rf"7 {op} int32 tensor \[1, 3\]"):
        OPS[op](7, divisor)


def test_tensor_divisors_are_checked_on_device_backends_only_in_debug_mode(values_on_device):
    x = Tensor.from_data([5, 7])
    zero = Tensor.from_data([0, 1])
    x // zero  # unchecked: reading a device's values would cost a synchronisation
    with pytest.raises(bn.DivisionByZeroError):
        x // 0  # a scalar divisor is on the host: always checked
    bn.set_debug(True)
    with pytest.raises(bn.DivisionByZeroError, match=r"index \[0\]"):
        x // zero
    with pytest.raises(bn.DivisionByZeroError):
        x % zero
