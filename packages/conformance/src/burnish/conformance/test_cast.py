"""Casts between every pair of dtypes, and the promotion rules of mixed-dtype operations."""

from __future__ import annotations

import numpy as np
import pytest

import burnish
from burnish import (
    Tensor,
    bfloat16,
    bool_,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
)
from burnish.conformance.compare import assert_close, assert_equal
from burnish.conformance.samples import ALL, FLOATS, LAYOUTS, NUMERIC, ids, laid_out, sample
from burnish.dtype import promote

PAIRS = [(a, b) for a in ALL for b in ALL]


def _source(src, dst) -> np.ndarray:
    """Values that ``dst`` can hold: fractions only from floats, negatives only when both sides
    are signed."""
    if src is bool_:
        return np.array([True, False, True, True, False])
    values: list[float] = [0, 1, 2, 3, 100]
    if src.signed and dst.signed or dst is bool_:
        values += [-1, -3, -100]
    if src.is_float:
        values += [0.5, 2.75, 99.5] + ([-0.5, -2.75] if dst.signed or dst is bool_ else [])
    return np.array(values, dtype=np.float64).astype(src.numpy)


def _cast_reference(values: np.ndarray, src, dst) -> np.ndarray:
    if dst is bool_:
        return values != 0
    if src.is_float and dst.is_int:
        return np.trunc(values.astype(np.float64)).astype(dst.numpy)
    return values.astype(dst.numpy)


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_cast(device, pair):
    src, dst = pair
    values = _source(src, dst)
    out = Tensor.from_numpy(values, device).cast(dst)
    assert_equal(out, _cast_reference(values, src, dst), dst)


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("pair", [(float32, int32), (int64, float32), (float32, bool_),
                                  (bool_, float32), (float64, float16)],
                         ids=["f32-i32", "i64-f32", "f32-bool", "bool-f32", "f64-f16"])
def test_cast_non_contiguous(device, pair, layout):
    src, dst = pair
    values = sample((3, 4), src, -5, 5)
    out = laid_out(values, device, src, layout).cast(dst)
    assert_equal(out, _cast_reference(values, src, dst), dst)


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
@pytest.mark.requires_dtype(bool_)
def test_cast_special_floats_to_bool(device, dtype):
    values = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
    out = Tensor.from_data(values, device, dtype).bool()
    assert_equal(out, np.array([True, True, True, False, False]), bool_)


@pytest.mark.parametrize("pair", [(a, b) for a in FLOATS for b in FLOATS],
                         ids=[f"{a}-to-{b}" for a in FLOATS for b in FLOATS])
def test_cast_between_floats_rounds_and_keeps_specials(device, pair):
    src, dst = pair
    values = np.concatenate([sample((20,), src, -100, 100), [np.nan, np.inf, -np.inf]])
    values = values.astype(src.numpy)
    out = Tensor.from_numpy(values, device).cast(dst)
    assert_close(out, values.astype(np.float64), dst)


@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
def test_cast_to_same_dtype_and_empty(device, dtype):
    values = sample((2, 0), dtype)
    x = Tensor.from_numpy(values, device)
    assert_equal(x.cast(dtype), values, dtype)
    scalar = sample((), dtype)
    assert_equal(Tensor.from_numpy(scalar, device).cast(dtype), scalar, dtype)


CONVERSIONS = [("float", float32), ("double", float64), ("half", float16), ("int", int64),
               ("bool", bool_)]


@pytest.mark.parametrize(("method", "target"), CONVERSIONS, ids=[m for m, _ in CONVERSIONS])
@pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
def test_conversion_methods(device, dtype, method, target, require_dtype):
    values = _source(dtype, target)
    x = Tensor.from_numpy(values, device)
    # float() and int() keep a tensor that already has the kind.
    keeps = (method == "float" and dtype.is_float) or (method == "int" and dtype.is_int)
    expected_dtype = dtype if keeps else target
    require_dtype(expected_dtype)
    out = getattr(x, method)()
    assert_equal(out, _cast_reference(values, dtype, expected_dtype), expected_dtype)


@pytest.mark.requires_dtype(float32, float16)
def test_to_dtype_and_name(device):
    x = Tensor.from_data([1.5, -2.0], device)
    assert x.to(float16).dtype is float16
    assert x.to("float16").dtype is float16
    assert x.to("f16").dtype is float16
    assert x.to(device) is x


NUMERIC_PAIRS = [(a, b) for a in NUMERIC for b in NUMERIC]


@pytest.mark.parametrize("pair", NUMERIC_PAIRS, ids=[f"{a}+{b}" for a, b in NUMERIC_PAIRS])
def test_binary_promotion(device, pair, require_dtype):
    a_dtype, b_dtype = pair
    result = promote(a_dtype, b_dtype)
    require_dtype(result)
    a, b = sample((2, 3), a_dtype, 0, 9), sample((3,), b_dtype, 0, 9, key=1)
    out = Tensor.from_numpy(a, device) + Tensor.from_numpy(b, device)
    expected = a.astype(np.float64) + b.astype(np.float64)
    assert_close(out, expected, result)


KNOWN = [
    (uint8, int8, int16), (float16, bfloat16, float32), (int32, float16, float16),
    (bool_, int8, int8), (bool_, float64, float64), (int64, float32, float32),
    (uint8, int64, int64), (int16, int32, int32), (float16, float64, float64),
]


@pytest.mark.parametrize("case", KNOWN, ids=[f"{a}+{b}={c}" for a, b, c in KNOWN])
def test_promotion_follows_pytorch(device, case):
    a_dtype, b_dtype, result = case
    assert promote(a_dtype, b_dtype) is result
    a, b = sample((4,), a_dtype, 0, 5), sample((4,), b_dtype, 0, 5, key=1)
    x, y = Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)
    assert_close(x * y, a.astype(np.float64) * b.astype(np.float64), result)


@pytest.mark.requires_dtype(bool_)
@pytest.mark.parametrize("case", KNOWN, ids=[f"{a}+{b}={c}" for a, b, c in KNOWN])
def test_cat_and_where_promote(device, case):
    a_dtype, b_dtype, result = case
    a, b = sample((2,), a_dtype, 0, 5), sample((3,), b_dtype, 0, 5, key=1)
    out = burnish.cat([Tensor.from_numpy(a, device), Tensor.from_numpy(b, device)])
    assert_close(out, np.concatenate([a.astype(np.float64), b.astype(np.float64)]), result)
    mask = Tensor.from_numpy(np.array([True, False]), device)
    out = burnish.where(mask, Tensor.from_numpy(a, device), Tensor.from_numpy(b[:2], device))
    assert_close(out, np.where([True, False], a.astype(np.float64), b[:2].astype(np.float64)),
                 result)


SCALARS = [
    (int8, 3, int8), (int8, 2.5, float32), (uint8, 7, uint8), (float16, 3, float16),
    (float16, 2.5, float16), (bfloat16, 0.5, bfloat16), (float64, 2, float64),
    (int32, True, int32), (bool_, 2, int64), (bool_, 1.5, float32),
]


@pytest.mark.parametrize("case", SCALARS, ids=[f"{a}*{s}={c}" for a, s, c in SCALARS])
def test_scalars_do_not_widen(device, case):
    dtype, scalar, result = case
    a = sample((5,), dtype, 0, 5)
    x = Tensor.from_numpy(a, device)
    expected = a.astype(np.float64) * float(scalar)
    assert_close(x * scalar, expected, result)
    assert_close(scalar * x, expected, result)
