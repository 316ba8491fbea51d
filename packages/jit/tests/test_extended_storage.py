"""The extended dtypes on the jit backends. float8 and float4: every code decoded, and float32
values around every rounding boundary encoded, bit for bit as ml_dtypes converts them (round to
nearest even, each format's overflow and NaN rules); the sub-byte ints wrapped as NumPy with
ml_dtypes casts; uint32 through the kernels that pick a type per compute type."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor
from burnish.dtype import FLOAT8_DTYPES, SUB_BYTE_DTYPES, float4_e2m1fn, uint32

SMALL_FLOATS = (*FLOAT8_DTYPES, float4_e2m1fn)
SMALL_INTS = tuple(d for d in SUB_BYTE_DTYPES if d.is_int)


def _listed(device, dtype) -> None:
    if dtype not in device.backend.dtypes(device):
        pytest.fail(f"{device.backend.name} does not list {dtype}")


def _codes(dtype) -> np.ndarray:
    count = 16 if dtype is float4_e2m1fn else 256
    return np.arange(count, dtype=np.uint8).view(dtype.numpy)


def _boundaries(dtype) -> np.ndarray:
    """Every finite value of ``dtype``, the midpoints between neighbours and the float32 values
    on either side of each, past the largest value, in the subnormals, and the specials."""
    exact = np.unique(_codes(dtype).astype(np.float32))
    exact = exact[np.isfinite(exact)]
    mids = (exact[:-1].astype(np.float64) + exact[1:]) / 2
    mids = np.concatenate([mids, exact[-1:] * 1.0625, exact[-1:] * 1.125, exact[-1:] * 4,
                           exact[:1] / 2]).astype(np.float32)
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)),
                           np.nextafter(mids, np.float32(-np.inf))])
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30, 1e-30,
                         -1e-30, 2.0**-127, 2.0**-149], np.float32)
    rng = np.random.default_rng(0)
    spread = (rng.standard_normal(2000) * np.exp2(rng.integers(-20, 20, 2000))).astype(np.float32)
    values = np.concatenate([exact, mids, near, specials, spread]).astype(np.float32)
    return np.concatenate([values, -values])


@pytest.mark.parametrize("dtype", SMALL_FLOATS, ids=lambda d: d.name)
def test_every_code_decodes_as_ml_dtypes_does(jit_device, dtype):
    _listed(jit_device, dtype)
    codes = _codes(dtype)
    got = Tensor.from_numpy(codes, jit_device).cast("float32").to_numpy()
    expected = codes.astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    finite = ~np.isnan(expected)
    assert np.array_equal(got[finite].view(np.uint32), expected[finite].view(np.uint32))


@pytest.mark.parametrize("dtype", SMALL_FLOATS, ids=lambda d: d.name)
def test_float32_rounds_as_ml_dtypes_does(jit_device, dtype):
    _listed(jit_device, dtype)
    values = _boundaries(dtype)
    with np.errstate(all="ignore"):
        expected = values.astype(dtype.numpy).view(np.uint8)
    rounded = Tensor.from_numpy(values, jit_device).cast(dtype)
    got = rounded.to_numpy().view(np.uint8)
    wrong = np.flatnonzero(got != expected)
    assert not wrong.size, [(values[i], got[i], expected[i]) for i in wrong[:8]]
    # Read back through the device's own conversion, not the host's (a device that stores
    # the format in float32 rounds in the kernel only).
    back = rounded.cast("float32").to_numpy()
    with np.errstate(all="ignore"):
        want = values.astype(dtype.numpy).astype(np.float32)
    assert np.array_equal(np.isnan(back), np.isnan(want))
    finite = ~np.isnan(want)
    wrong = np.flatnonzero(back[finite].view(np.uint32) != want[finite].view(np.uint32))
    assert not wrong.size, [(values[finite][i], back[finite][i], want[finite][i])
                            for i in wrong[:8]]


@pytest.mark.parametrize("dtype", SMALL_INTS, ids=lambda d: d.name)
def test_sub_byte_ints_wrap_as_numpy_casts(jit_device, dtype):
    _listed(jit_device, dtype)
    values = np.arange(-20, 21, dtype=np.int32)
    narrow = Tensor.from_numpy(values, jit_device).cast(dtype)
    assert narrow.to_numpy().dtype == dtype.numpy
    wrapped = values.astype(dtype.numpy).astype(np.int32)
    # Read back through the device's cast to int32, so that the kernel's wrapping is what is
    # checked, not the host's.
    assert np.array_equal(narrow.cast("int32").to_numpy(), wrapped)
    # Arithmetic stays in the dtype: it wraps at every store.
    x = Tensor.from_numpy(values.astype(dtype.numpy), jit_device)
    summed = (x + x).cast("int32").to_numpy()
    assert np.array_equal(summed, (wrapped * 2).astype(dtype.numpy).astype(np.int32))


def test_uint32_reduces_sorts_and_negates_as_numpy(jit_device):
    """uint32 computes in u32: the kernels with a table per compute type (reductions' starting
    values and partials, sort keys, scans) and negation (WGSL has no unary minus on u32)."""
    _listed(jit_device, uint32)
    a = np.array([[3, 4_000_000_000, 0, 7], [2**32 - 1, 1, 5, 5]], np.uint32)
    x = Tensor.from_numpy(a, jit_device)
    assert np.array_equal(x.max(1).to_numpy().ravel(), a.max(1))
    assert np.array_equal(x.min().to_numpy().ravel(), [a.min()])
    assert np.array_equal(x.argmax(1).to_numpy().ravel(), a.argmax(1))
    assert np.array_equal(x.sort(1).to_numpy(), np.sort(a, 1))
    assert np.array_equal(x.cumsum(1).to_numpy(), np.cumsum(a, 1, dtype=np.uint32))
    assert np.array_equal((-x).to_numpy(), (0 - a.astype(np.uint64)).astype(np.uint32))
