"""Dtype lookup and the promotion rules written in docs/getting-started.md."""

import numpy as np
import pytest

import burnish as bn
from burnish.dtype import ALL_DTYPES, get_dtype, promote, scalar_dtype


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_lookup_by_name_and_numpy(dtype):
    assert get_dtype(dtype.name) is dtype
    assert get_dtype(dtype.numpy) is dtype


def test_unknown_dtype_names_the_value():
    with pytest.raises(bn.DTypeError, match="'float128'"):
        get_dtype("float128")


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (bn.float32, bn.float64, bn.float64),
        (bn.float16, bn.bfloat16, bn.float32),
        (bn.int64, bn.float16, bn.float16),
        (bn.bool_, bn.int8, bn.int8),
        (bn.uint8, bn.int8, bn.int16),
        (bn.uint8, bn.int32, bn.int32),
        (bn.int16, bn.int32, bn.int32),
        (bn.bool_, bn.bool_, bn.bool_),
        (bn.uint16, bn.int16, bn.int32),
        (bn.uint32, bn.int8, bn.int64),
        (bn.uint64, bn.uint8, bn.uint64),
        (bn.uint4, bn.int4, bn.int8),
        (bn.int4, bn.int8, bn.int8),
        (bn.uint4, bn.uint8, bn.uint8),
        (bn.float8_e4m3fn, bn.float8_e5m2, bn.float16),
        (bn.float8_e4m3fnuz, bn.bfloat16, bn.bfloat16),
        (bn.float8_e5m2fnuz, bn.int64, bn.float8_e5m2fnuz),
        (bn.float4_e2m1fn, bn.float8_e5m2, bn.float16),
        (bn.float8_e8m0fnu, bn.float8_e4m3fn, bn.float32),
        (bn.float8_e8m0fnu, bn.float16, bn.float32),
        (bn.float8_e8m0fnu, bn.bfloat16, bn.bfloat16),
        (bn.uint2, bn.int2, bn.int4),
    ],
)
def test_promotion_matches_pytorch(a, b, expected):
    assert promote(a, b) is expected
    assert promote(b, a) is expected


@pytest.mark.parametrize("a", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("b", ALL_DTYPES, ids=str)
def test_promotion_is_symmetric_and_never_loses_kind(a, b):
    out = promote(a, b)
    assert out is promote(b, a)
    order = {"bool": 0, "int": 1, "float": 2}
    assert order[out.kind.value] == max(order[a.kind.value], order[b.kind.value])


def test_scalars_are_weak():
    assert scalar_dtype(bn.float16, 2.5) is bn.float16
    assert scalar_dtype(bn.int8, 3) is bn.int8
    assert scalar_dtype(bn.int8, 0.5) is bn.float32
    assert scalar_dtype(bn.bool_, 2) is bn.int64
    assert scalar_dtype(bn.bool_, True) is bn.bool_
    with pytest.raises(bn.DTypeError):
        scalar_dtype(bn.float32, "2")


def test_numpy_names_are_kept():
    assert bn.bfloat16.numpy.name == "bfloat16"
    assert bn.float32.numpy == np.float32


def test_new_dtypes_have_their_widths_and_kinds():
    assert (bn.int4.bits, bn.int4.itemsize, bn.int4.signed) == (4, 1, True)
    assert (bn.uint4.bits, bn.uint4.signed) == (4, False)
    assert all(d.is_float and d.bits == 8 for d in bn.dtype.FLOAT8_DTYPES)
    assert bn.uint64.is_int and not bn.uint64.signed and bn.uint64.bits == 64
    assert get_dtype("u16") is bn.uint16 and get_dtype("i4") is bn.int4
    assert bn.float8_e4m3fn.numpy.name == "float8_e4m3fn"


def test_finfo_and_iinfo_cover_the_extended_dtypes():
    from burnish.dtype import finfo, iinfo

    assert float(finfo(bn.float8_e4m3fn).max) == 448.0
    assert float(finfo("float8_e4m3fnuz").max) == 240.0
    assert float(finfo(bn.float8_e5m2).max) == 57344.0
    assert float(finfo(bn.float4_e2m1fn).max) == 6.0
    assert (int(iinfo(bn.int4).min), int(iinfo(bn.int4).max)) == (-8, 7)
    assert int(iinfo(bn.uint2).max) == 3 and int(iinfo(bn.uint64).max) == 2**64 - 1
    with pytest.raises(bn.DTypeError, match="float dtype, got int4"):
        finfo(bn.int4)
    with pytest.raises(bn.DTypeError, match="int dtype, got float8_e5m2"):
        iinfo(bn.float8_e5m2)


@pytest.mark.parametrize("dtype", bn.dtype.EXTENDED_DTYPES, ids=str)
def test_tensor_data_round_trips_through_bytes(dtype):
    from burnish.tensor_data import TensorData

    values = np.arange(1, 5).astype(dtype.numpy).reshape(2, 2)
    data = TensorData(values)
    assert data.dtype is dtype
    back = TensorData.from_bytes(data.as_bytes(), [2, 2], dtype.name)
    assert back.dtype is dtype and back.as_bytes() == data.as_bytes()
    assert back.tolist() == values.tolist()
