"""Records: exact round trips in every format and dtype, format choice, precision, metadata."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy

from burnish.dtype import ALL_DTYPES, DType
from burnish.errors import RecordError
from burnish.plugins.hookspecs import hookimpl
from burnish.plugins.manager import plugin_manager, register
from burnish.record import (
    FORMAT_VERSION,
    Record,
    RecordFormat,
    RecordMetadata,
    flatten,
    formats,
    load,
    save,
)
from burnish.record.tree import skeleton
from burnish.tensor_data import TensorData

FORMATS = ["safetensors", "msgpack", "json", "binary"]
EXTENSIONS = {"safetensors": ".safetensors", "msgpack": ".mpk", "json": ".json", "binary": ".bin"}


def values(dtype: DType, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values that stress a dtype: for floats every bit pattern is possible (NaN, inf,
    subnormals, -0.0), for ints the extremes are included."""
    count = int(np.prod(shape))
    if dtype.is_bool:
        return rng.integers(0, 2, count).astype(np.bool_).reshape(shape)
    if dtype.is_int:
        info = ml_dtypes.iinfo(dtype.numpy)
        wide = np.uint64 if dtype.name == "uint64" else np.int64
        drawn = rng.integers(int(info.min), int(info.max), count, dtype=wide, endpoint=True)
        drawn = drawn.astype(dtype.numpy)
        drawn[:2] = np.array([info.min, info.max], dtype.numpy)[: min(2, count)]
        return drawn.reshape(shape)
    bits = {8: np.uint64, 4: np.uint32, 2: np.uint16, 1: np.uint8}[dtype.itemsize]
    raw = rng.integers(0, min(np.iinfo(bits).max, 2**dtype.bits - 1), count, dtype=bits,
                       endpoint=True)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], dtype=dtype.numpy)
    array = raw.view(dtype.numpy)
    array[: len(specials)] = specials[: count]
    return array.reshape(shape)


def sample_record() -> dict:
    """Every dtype, 0-d, zero-size, lists, empty dicts and lists, deep nesting."""
    rng = np.random.default_rng(7)
    by_dtype = {d.name: TensorData(values(d, rng, (3, 4)), d) for d in ALL_DTYPES}
    return {
        "dtypes": by_dtype,
        "scalars": {d.name: TensorData(values(d, rng, ()), d) for d in ALL_DTYPES},
        "empty": {d.name: TensorData(np.zeros((0, 3), d.numpy), d) for d in ALL_DTYPES},
        "encoder": {"layers": [{"weight": by_dtype["float32"]}, {}, [by_dtype["int8"]]]},
        "nothing": {},
        "no_items": [],
        "deep": {"a": {"b": {"c": {"d": TensorData(np.arange(5, dtype=np.int64))}}}},
    }


def assert_same_record(expected: dict, actual: dict, *, bitwise: bool = True) -> None:
    assert skeleton(actual) == skeleton(expected)
    flat_expected, flat_actual = flatten(expected), flatten(actual)
    assert list(flat_actual) == list(flat_expected)
    for path, data in flat_expected.items():
        got = flat_actual[path]
        got.assert_eq(data)
        if bitwise:
            assert got.as_bytes() == data.as_bytes(), path


def nan_free(data: TensorData) -> bool:
    return not data.dtype.is_float or not np.isnan(data.to_numpy().astype(np.float64)).any()


@pytest.mark.parametrize("name", FORMATS)
def test_round_trip_is_exact_in_every_dtype(tmp_path: Path, name: str) -> None:
    record = sample_record()
    path = save(record, tmp_path / f"model{EXTENSIONS[name]}", metadata={"module": "Linear"})
    loaded = load(path)
    # JSON writes every NaN as "nan": values and every other bit are kept, a NaN's payload is not.
    assert_same_record(record, loaded.tensors, bitwise=name != "json")
    if name == "json":
        for path_, data in flatten(record).items():
            if nan_free(data):
                assert flatten(loaded.tensors)[path_].as_bytes() == data.as_bytes(), path_
    assert loaded.metadata == RecordMetadata(user={"module": "Linear"})
    assert loaded.metadata.format_version == FORMAT_VERSION
    assert loaded.metadata.precision == "full"


@pytest.mark.parametrize("name", FORMATS)
def test_loaded_tensors_are_writable_and_own_their_memory(tmp_path: Path, name: str) -> None:
    path = save({"w": TensorData(np.arange(4, dtype=np.float32))}, tmp_path / "m", format=name)
    array = load(path, format=name).tensors["w"].to_numpy()
    assert array.flags.writeable
    array[0] = 9.0


def test_tensors_tuples_and_arrays_are_accepted_as_leaves(tmp_path: Path) -> None:
    class FakeTensor:
        def into_data(self) -> TensorData:
            return TensorData(np.ones(2, np.float32))

    path = save({"t": FakeTensor(), "a": np.int16([1, 2]), "pair": (FakeTensor(),)}, tmp_path / "m")
    tensors = load(path).tensors
    tensors["t"].assert_eq(TensorData(np.ones(2, np.float32)))
    tensors["a"].assert_eq(TensorData(np.int16([1, 2])))
    assert isinstance(tensors["pair"], list)


def test_format_follows_the_extension_and_defaults_to_safetensors(tmp_path: Path) -> None:
    record = {"w": TensorData(np.ones(2, np.float32))}
    for name, extension in EXTENSIONS.items():
        path = save(record, tmp_path / f"m{extension.upper()}")
        assert load(path, format=name).tensors["w"] == record["w"]
    bare = save(record, tmp_path / "checkpoint")
    safetensors.deserialize(bare.read_bytes())
    named = save(record, tmp_path / "weights.data", format="msgpack")
    assert load(named, format="msgpack").tensors["w"] == record["w"]


def test_unknown_format_or_extension_lists_the_known_formats(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match=r"unknown record format 'onnx'.*safetensors"):
        save({}, tmp_path / "m", format="onnx")
    with pytest.raises(RecordError, match=r"\.pt.*msgpack \(\.mpk\)"):
        load(tmp_path / "model.pt")


def test_formats_are_listed_through_the_plugin_manager() -> None:
    found = formats()
    assert set(FORMATS) <= set(found)
    assert all(isinstance(f, RecordFormat) for f in found.values())
    assert {found[n].extension for n in FORMATS} == set(EXTENSIONS.values())


def test_half_precision_converts_floats_only(tmp_path: Path) -> None:
    record = {
        "f64": TensorData(np.array([0.1, 70000.0]), "float64"),
        "f32": TensorData(np.array([0.1, 1.5]), "float32"),
        "bf16": TensorData(np.array([0.1, 1e30]), "bfloat16"),
        "i64": TensorData(np.array([2**40]), "int64"),
        "b": TensorData(np.array([True])),
    }
    for name in FORMATS:
        with np.errstate(over="ignore"):
            path = save(record, tmp_path / f"half{EXTENSIONS[name]}", precision="half")
        loaded = load(path)
        dtypes = {k: v.dtype.name for k, v in loaded.tensors.items()}
        assert dtypes == {"f64": "float16", "f32": "float16", "bf16": "bfloat16",
                          "i64": "int64", "b": "bool"}
        loaded.tensors["f32"].assert_eq(TensorData(np.array([0.1, 1.5], np.float16)))
        assert np.isinf(loaded.tensors["f64"].to_numpy()[1])  # beyond float16, as IEEE says
        assert loaded.metadata.precision == "half"
        full = load(path, precision="full").tensors
        assert {v.dtype.name for k, v in full.items() if k not in ("i64", "b")} == {"float32"}
        full["f32"].assert_eq(TensorData(np.array([0.1, 1.5], np.float16).astype(np.float32)))
        assert full["i64"].dtype.name == "int64"


def test_precision_as_a_dtype_on_save_and_load(tmp_path: Path) -> None:
    record = {"w": TensorData(np.array([1.0, 2.5]), "float64"), "n": TensorData(np.int8([3]))}
    path = save(record, tmp_path / "m.mpk", precision="bfloat16")
    loaded = load(path)
    assert loaded.tensors["w"].dtype.name == "bfloat16"
    assert loaded.metadata.precision == "bfloat16"
    assert load(path, precision="float64").tensors["w"].dtype.name == "float64"
    assert load(path, precision="half").tensors["w"].dtype.name == "bfloat16"
    assert load(path, precision="float64").tensors["n"].dtype.name == "int8"


@pytest.mark.parametrize("precision", ["quarter", "int32", "bool", 3])
def test_bad_precision_is_refused(tmp_path: Path, precision: object) -> None:
    with pytest.raises(RecordError, match="precision"):
        save({}, tmp_path / "m", precision=precision)  # type: ignore[arg-type]
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"a.b": TensorData([1.0])}, "free of '.'"),
        ({"": TensorData([1.0])}, "non-empty"),
        ({1: TensorData([1.0])}, "keys must be strings"),
        ({"a": {"b": None}}, "entry 'a.b' is a value of type NoneType"),
        ({"a": [1.5]}, "entry 'a.0' is a value of type float"),
        ([TensorData([1.0])], "must be a mapping"),
        ({"a": np.array(["x"])}, "entry 'a'"),
    ],
)
def test_records_that_are_not_nested_mappings_of_tensors(
    tmp_path: Path, record: object, message: str
) -> None:
    with pytest.raises(RecordError, match=message):
        save(record, tmp_path / "m.bin")  # type: ignore[arg-type]


def test_metadata_must_be_json_compatible(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="JSON"):
        save({}, tmp_path / "m", metadata={"f": object()})
    with pytest.raises(RecordError, match="JSON"):
        save({}, tmp_path / "m", metadata={"f": float("nan")})
    with pytest.raises(RecordError, match="keys must be strings"):
        save({}, tmp_path / "m", metadata={1: "x"})  # type: ignore[dict-item]


def test_a_loaded_record_saves_again_with_its_metadata(tmp_path: Path) -> None:
    first = save({"w": TensorData([1.0, 2.0])}, tmp_path / "a.json", metadata={"type": ["M", 1]})
    again = save(load(first), tmp_path / "b.mpk")
    loaded = load(again)
    assert loaded.metadata.user == {"type": ["M", 1]}
    loaded.tensors["w"].assert_eq(TensorData([1.0, 2.0]))


def test_safetensors_files_are_standard_with_dotted_names_and_bf16(tmp_path: Path) -> None:
    record = {"encoder": {"layers": [{"weight": TensorData(np.ones((2, 2)), "bfloat16")}]}}
    path = save(record, tmp_path / "m.safetensors", metadata={"module": "Encoder"})
    data = path.read_bytes()
    entries = dict(safetensors.deserialize(data))
    assert entries["encoder.layers.0.weight"]["dtype"] == "BF16"
    assert entries["encoder.layers.0.weight"]["shape"] == [2, 2]
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    assert json.loads(header["__metadata__"]["burnish.metadata"]) == {"module": "Encoder"}
    with safetensors.safe_open(path, framework="np") as file:
        assert set(file.keys()) == {"encoder.layers.0.weight"}


def test_safetensors_from_other_frameworks_load_as_nested_dicts(tmp_path: Path) -> None:
    arrays = {
        "encoder.0.weight": np.ones((2, 3), np.float32),
        "encoder.0.bias": np.zeros(3, ml_dtypes.bfloat16),
        "head": np.arange(3, dtype=np.int64),
    }
    path = tmp_path / "foreign.safetensors"
    path.write_bytes(safetensors.numpy.save(arrays, metadata={"format": "pt"}))
    loaded = load(path)
    assert loaded.metadata == RecordMetadata(None, None, None, {"format": "pt"})
    assert loaded.tensors["encoder"]["0"]["weight"] == TensorData(arrays["encoder.0.weight"])
    assert loaded.tensors["encoder"]["0"]["bias"].dtype.name == "bfloat16"
    assert loaded.tensors["head"].dtype.name == "int64"


def test_safetensors_names_that_collide_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "foreign.safetensors"
    path.write_bytes(safetensors.numpy.save({"a": np.ones(1), "a.b": np.ones(1)}))
    with pytest.raises(RecordError, match="'a'"):
        load(path)


class UpperJsonFormat(RecordFormat):
    """A third-party format: the json format's bytes, upper-cased names aside."""

    name = "thirdparty"
    extension = ".tp"

    def dumps(self, tree: dict, metadata: RecordMetadata) -> bytes:
        return b"TP" + formats()["json"].dumps(tree, metadata)

    def loads(self, data: bytes) -> tuple[dict, RecordMetadata]:
        if data[:2] != b"TP":
            raise RecordError("not a thirdparty file")
        return formats()["json"].loads(data[2:])


class ThirdPartyPlugin:
    @hookimpl
    def burnish_record_formats(self) -> list[RecordFormat]:
        return [UpperJsonFormat()]


def test_a_third_party_format_registered_through_the_hook(tmp_path: Path) -> None:
    register(ThirdPartyPlugin(), name="test-thirdparty-format")
    try:
        assert "thirdparty" in formats()
        path = save({"w": TensorData([1.0])}, tmp_path / "m.tp")
        assert path.read_bytes().startswith(b"TP")
        assert load(path).tensors["w"] == TensorData([1.0])
        (tmp_path / "bad.tp").write_bytes(b"XX")
        with pytest.raises(RecordError, match=r"bad\.tp.*not a thirdparty file"):
            load(tmp_path / "bad.tp")
    finally:
        plugin_manager().unregister(name="test-thirdparty-format")
    assert "thirdparty" not in formats()


class ShadowingPlugin:
    @hookimpl
    def burnish_record_formats(self) -> list[object]:
        shadow = UpperJsonFormat()
        shadow.name = "json"  # type: ignore[misc]
        return [shadow, "not a format"]


def test_a_duplicate_name_warns_and_the_last_registered_wins() -> None:
    register(ShadowingPlugin(), name="test-shadowing-format")
    try:
        with pytest.warns(UserWarning) as caught:
            found = formats()
        assert isinstance(found["json"], UpperJsonFormat)
        messages = " ".join(str(w.message) for w in caught)
        assert "two plugins provide record format 'json'" in messages
        assert "not a RecordFormat" in messages
    finally:
        plugin_manager().unregister(name="test-shadowing-format")
    assert not isinstance(formats()["json"], UpperJsonFormat)


def test_record_type_holds_tensors_and_metadata() -> None:
    record = Record({"w": TensorData([1.0])})
    assert record.metadata.format_version == FORMAT_VERSION
    assert record.metadata.user == {}
