"""What loading a module's weights checks: the saved parameter ids, int and bool values where
floats belong, and which reader a weights file needs (told by its content, or format=)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from burnish import RecordError, nn, record
from burnish.nn.import_weights import load_weights, read_weights

FIXTURES = Path(__file__).parents[3] / "tests" / "fixtures" / "pytorch"


def linear_record(weight_dtype: str = "float32") -> dict:
    return {"weight": np.ones((3, 2), weight_dtype), "bias": np.zeros(2, "float32")}


@pytest.mark.parametrize("ids", [[1, 2], "weight", {"weight": 5}, {"weight": ""}])
def test_malformed_param_ids_are_named(tmp_path, ids):
    path = record.save(linear_record(), tmp_path / "linear.safetensors",
                       metadata={"param_ids": ids})
    with pytest.raises(RecordError, match="'param_ids' must map parameter names to"):
        nn.LinearConfig(3, 2).init().load(path)


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_int_and_bool_values_are_not_cast_into_float_parameters(tmp_path, dtype):
    path = record.save(linear_record(dtype), tmp_path / "linear.mpk")
    fresh = nn.LinearConfig(3, 2).init()
    with pytest.raises(RecordError, match=f"parameter 'weight' is float32 but the record holds "
                                          f"{dtype} values.*cast_ints=True"):
        fresh.load(path)
    with pytest.raises(RecordError, match="parameter 'weight' is float32"):
        fresh.load_record(record.load(path))
    with pytest.raises(RecordError, match="parameter 'weight' is float32"):
        load_weights(fresh, linear_record(dtype), adapter=nn.import_weights.WeightAdapter())
    loaded = fresh.load(path, cast_ints=True)
    np.testing.assert_array_equal(loaded.weight.val().to_numpy(), np.ones((3, 2)))
    assert loaded.weight.dtype.name == "float32"
    converted = load_weights(fresh, linear_record(dtype), cast_ints=True,
                             adapter=nn.import_weights.WeightAdapter()).module
    assert converted.weight.dtype.name == "float32"
    # Floats of another width are cast as ever.
    path = record.save(linear_record("float64"), tmp_path / "linear.json")
    assert fresh.load(path).weight.dtype.name == "float32"


def test_a_burnish_binary_record_named_bin_loads_as_one(tmp_path):
    linear = nn.LinearConfig(3, 2).init()
    path = linear.save(tmp_path / "linear.bin")
    tensors, written_by_burnish = read_weights(path)
    assert written_by_burnish and sorted(tensors) == ["bias", "weight"]
    loaded = load_weights(nn.LinearConfig(3, 2).init(), path).module
    np.testing.assert_array_equal(loaded.weight.val().to_numpy(), linear.weight.val().to_numpy())
    # A PyTorch file of the same extension is still read as one.
    path = shutil.copy(FIXTURES / "cnn.pt", tmp_path / "pytorch_model.bin")
    tensors, written_by_burnish = read_weights(path)
    assert not written_by_burnish and "0.weight" in tensors


def test_format_names_the_reader(tmp_path):
    torch_file = shutil.copy(FIXTURES / "cnn_legacy.pt", tmp_path / "weights.data")
    assert "0.weight" in read_weights(torch_file, format="pytorch")[0]
    burnish_file = nn.LinearConfig(3, 2).init().save(tmp_path / "linear.data", format="msgpack")
    assert "weight" in read_weights(burnish_file, format="msgpack")[0]
    result = load_weights(nn.LinearConfig(3, 2).init(), burnish_file, format="msgpack")
    assert sorted(result.loaded) == ["bias", "weight"]
    with pytest.raises(RecordError, match="cannot load .* as a PyTorch file"):
        read_weights(burnish_file, format="pytorch")
    with pytest.raises(RecordError, match="unknown weights format 'onnx'; known formats: "
                                          "pytorch, binary"):
        read_weights(burnish_file, format="onnx")
