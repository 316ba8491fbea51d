"""Reading values back: into_data, from_data round trips, to_numpy, item, tolist, the Python
conversions and the printed form."""

from __future__ import annotations

import numpy as np
import pytest

from burnish import Tensor, TensorData, bool_, int64
from burnish.conformance.compare import assert_equal, host
from burnish.conformance.samples import ALL, FLOATS, LAYOUTS, ids, laid_out, sample
from burnish.errors import BurnishError, DTypeError

DTYPES = pytest.mark.parametrize("dtype", ALL, ids=ids(ALL))
SHAPES = [(), (0,), (7,), (3, 4), (2, 0, 5), (2, 3, 1, 2)]


@pytest.mark.parametrize("shape", SHAPES, ids=ids(SHAPES))
@DTYPES
def test_round_trip(device, dtype, shape):
    values = sample(shape, dtype)
    x = Tensor.from_data(TensorData(values), device)
    assert np.array_equal(host(x, shape, dtype), values)
    data = x.into_data()
    assert isinstance(data, TensorData)
    assert data.dtype is dtype and data.shape == shape
    assert np.array_equal(data.to_numpy(), values)
    assert data.as_bytes() == np.ascontiguousarray(values).tobytes()


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@DTYPES
def test_into_data_of_views(device, dtype, layout):
    values = sample((3, 4, 2), dtype)
    x = laid_out(values, device, dtype, layout)
    assert np.array_equal(host(x, (3, 4, 2), dtype), values)
    data = x.into_data()
    assert data.shape == (3, 4, 2) and data.dtype is dtype
    assert np.array_equal(data.to_numpy(), values)
    assert data.as_bytes() == values.tobytes()


@DTYPES
def test_into_data_of_expanded(device, dtype):
    values = sample((3, 1), dtype)
    out = Tensor.from_numpy(values, device).expand((2, 3, 4))
    assert_equal(out, np.broadcast_to(values, (2, 3, 4)), dtype)


@DTYPES
def test_reading_does_not_alias(device, dtype):
    values = sample((4,), dtype)
    x = Tensor.from_numpy(values.copy(), device)
    read = x.to_numpy()
    # Whatever the host copy is, later operations must not change it, nor it them.
    y = x.slice_assign([slice(0, 2)], x.slice([slice(2, 4)]))
    assert np.array_equal(read, values)
    assert_equal(x, values, dtype)
    assert_equal(y, np.concatenate([values[2:], values[2:]]), dtype)


@DTYPES
def test_to_numpy_and_array_protocol(device, dtype):
    values = sample((2, 3), dtype)
    x = Tensor.from_numpy(values, device)
    assert x.to_numpy().dtype == dtype.numpy
    assert np.array_equal(x.to_numpy(), values)
    assert np.array_equal(np.asarray(x), values)


@DTYPES
def test_item_and_python_conversions(device, dtype):
    value = sample((), dtype, 1, 3)
    x = Tensor.from_numpy(value, device)
    item = x.item()
    kind = float if dtype.is_float else (bool if dtype is bool_ else int)
    assert type(item) is kind
    assert item == kind(value.astype(np.float64) if dtype.is_float else value)
    assert bool(x) == bool(value)
    assert float(x) == float(value.astype(np.float64))
    assert int(x) == int(value.astype(np.float64))
    assert Tensor.from_numpy(value.reshape(1, 1), device).item() == item


@DTYPES
def test_item_of_many_elements_raises(device, dtype):
    x = Tensor.from_numpy(sample((2, 3), dtype), device)
    with pytest.raises(BurnishError, match=r"\[2, 3\]"):
        x.item()
    with pytest.raises(BurnishError, match="ambiguous"):
        bool(x)


@DTYPES
def test_tolist(device, dtype):
    values = sample((2, 3), dtype)
    out = Tensor.from_numpy(values, device).tolist()
    expected = values.astype(np.float64).tolist() if dtype.is_float else values.tolist()
    assert out == expected
    assert all(type(v) is type(expected[0][0]) for row in out for v in row)
    scalar = Tensor.from_numpy(sample((), dtype), device).tolist()
    assert not isinstance(scalar, list)


@pytest.mark.requires_dtype(int64)
def test_index_len_and_iteration(device):
    x = Tensor.from_data([[1, 2], [3, 4], [5, 6]], device)
    assert len(x) == 3
    assert [row.tolist() for row in x] == [[1, 2], [3, 4], [5, 6]]
    assert [10, 20, 30][Tensor.from_data(2, device)] == 30
    with pytest.raises(BurnishError, match="0-d"):
        len(Tensor.from_data(1, device))


@pytest.mark.parametrize("dtype", FLOATS, ids=ids(FLOATS))
def test_float_tensor_is_not_an_index(device, dtype):
    with pytest.raises(DTypeError, match=dtype.name):
        [1, 2][Tensor.from_data(1.0, device, dtype)]


@DTYPES
def test_display_names_everything(device, dtype, backend):
    x = Tensor.from_numpy(sample((2, 2), dtype), device)
    text = repr(x)
    assert "shape:  [2, 2]" in text
    assert f"device:  {device}" in text
    assert f'backend:  "{backend.name}"' in text
    assert f'dtype:  "{dtype.name}"' in text
    assert f'kind:  "{dtype.kind.value.capitalize()}"' in text
    assert str(x) == text


@pytest.mark.requires_dtype(bool_)
def test_display_of_bools_and_large_tensors(device):
    assert "[true, false]" in repr(Tensor.from_data([True, False], device))
    big = repr(Tensor.zeros((100, 100), device, bool_))
    assert "..." in big and "shape:  [100, 100]" in big


@DTYPES
def test_properties(device, dtype, backend):
    x = Tensor.from_numpy(sample((2, 0, 3), dtype), device)
    assert x.shape == (2, 0, 3) and x.dims() == [2, 0, 3] and x.ndim == 3
    assert x.numel() == 0 and x.size(-1) == 3 and x.size() == (2, 0, 3)
    assert x.dtype is dtype and x.kind is dtype.kind
    assert x.device == device and x.backend is backend
    assert x.to_device(device) is x


def test_device_belongs_to_backend(device, backend):
    assert device in backend.devices()
    assert device.backend is backend
    assert backend.default_device() in backend.devices()
