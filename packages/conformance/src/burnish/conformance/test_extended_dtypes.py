"""The extended dtypes (uint16/32/64, float8, float4, int4/uint4, int2/uint2): creation, casts to
and from every dtype, layout ops and comparisons, against NumPy with ml_dtypes. A backend that
does not list one of them in ``dtypes(device)`` has its cases skipped."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.conformance.compare import assert_equal
from burnish.conformance.samples import ids
from burnish.dtype import ALL_DTYPES, EXTENDED_DTYPES, bool_

EXTENDED = pytest.mark.parametrize("dtype", EXTENDED_DTYPES, ids=ids(EXTENDED_DTYPES))
PAIRS = [(a, b) for a in EXTENDED_DTYPES for b in ALL_DTYPES if a is not b] + [
    (a, b) for a in ALL_DTYPES if a not in EXTENDED_DTYPES for b in EXTENDED_DTYPES]

#: Candidate values; each case keeps those its dtypes hold exactly.
CANDIDATES = (0.0, 1.0, 2.0, 3.0, -1.0, -2.0, 0.5, 1.5, -0.5, 4.0, 6.0, 8.0, 100.0, 448.0, -64.0)


def _exact(dtype, value: float) -> bool:
    """Whether ``dtype`` holds ``value`` exactly (bool holds 0 and 1 only)."""
    if dtype is bool_:
        return value in (0.0, 1.0)
    if dtype.is_int and value != int(value):
        return False
    with np.errstate(all="ignore"):
        back = np.array([value]).astype(dtype.numpy).astype(np.float64)[0]
    return bool(back == value)


def values(*dtypes) -> np.ndarray:
    """The candidates every one of ``dtypes`` holds exactly, as float64."""
    return np.array([v for v in CANDIDATES if all(_exact(d, v) for d in dtypes)])


def grid(dtype, shape=(2, 3, 4)) -> np.ndarray:
    """A tensor's worth of values of ``dtype``, cycling through the ones it holds exactly."""
    held = values(dtype)
    count = int(np.prod(shape))
    return np.resize(held, count).reshape(shape).astype(dtype.numpy)


@EXTENDED
def test_from_data_keeps_values_and_dtype(device, dtype):
    array = grid(dtype)
    out = Tensor.from_numpy(array, device)
    assert out.dtype is dtype
    assert_equal(out, array, dtype)
    assert out.to_data().dtype is dtype


@EXTENDED
def test_creation_by_fill(device, dtype):
    fill = values(dtype)[-1].item()
    assert_equal(Tensor.full((2, 3), fill, device, dtype), np.full((2, 3), fill, dtype.numpy),
                 dtype)
    if _exact(dtype, 0.0):
        assert_equal(Tensor.zeros((3,), device, dtype), np.zeros(3, dtype.numpy), dtype)
    assert_equal(Tensor.ones((1, 2), device, dtype), np.ones((1, 2), dtype.numpy), dtype)


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_cast_to_and_from_every_dtype(device, pair):
    src, dst = pair
    held = values(src, dst)
    assert held.size, f"no candidate value that both {src} and {dst} hold"
    source = held.astype(src.numpy)
    out = Tensor.from_numpy(source, device).cast(dst)
    expected = held != 0 if dst is bool_ else held.astype(dst.numpy)
    assert_equal(out, expected, dst)
    # ... and back: every value survives the round trip.
    assert_equal(out.cast(src), source, src)


@EXTENDED
def test_layout_ops(device, dtype):
    a = grid(dtype)
    x = Tensor.from_numpy(a, device)
    assert_equal(x.reshape((4, 6)), a.reshape(4, 6), dtype)
    assert_equal(x.permute((2, 0, 1)), a.transpose(2, 0, 1), dtype)
    assert_equal(x.flip((1,)), a[:, ::-1], dtype)
    assert_equal(x[:, 1:, ::2], a[:, 1:, ::2], dtype)
    assert_equal(x[:1].expand((3, 3, 4)), np.broadcast_to(a[:1], (3, 3, 4)), dtype)
    assert_equal(burnish.cat([x, x[:1]], dim=0), np.concatenate([a, a[:1]]), dtype)
    assert_equal(burnish.stack([x, x], dim=1), np.stack([a, a], axis=1), dtype)


@EXTENDED
def test_comparisons(device, dtype):
    a = grid(dtype, (3, 5))
    b = a[::-1]
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b.copy(), device)
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    assert_equal(x == y, wide_a == wide_b, bool_)
    assert_equal(x != y, wide_a != wide_b, bool_)
    assert_equal(x < y, wide_a < wide_b, bool_)
    assert_equal(x >= y, wide_a >= wide_b, bool_)
    assert_equal(burnish.where(x > y, x, y), np.where(wide_a > wide_b, a, b), dtype)
