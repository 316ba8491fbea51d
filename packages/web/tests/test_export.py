"""Exports without a browser: what the folder holds, the JavaScript kernels, and the clear
refusals of what a browser cannot run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import burnish.functional as F
from burnish import Tensor, nn
from burnish.jit import ir
from burnish.jit.codegen.js import JsGenerator
from burnish.web import ExportError, export
from burnish.web.__main__ import main
from burnish.web.export import browser_wgsl

sys.path.insert(0, str(Path(__file__).parent))  # the helper beside (pytest's importlib mode)
from web_models import MNIST, mnist_cnn, token_classifier  # noqa: E402


def test_the_folder_holds_kernels_launches_weights_and_the_runtime(device, tmp_path):
    model = mnist_cnn(device)
    done = export(model, [(2, 1, 28, 28)], tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "burnish.js", "kernels.js", "model.json", "weights.safetensors"]
    spec = json.loads((tmp_path / "model.json").read_text())
    assert spec["format"] == "burnish-web" and spec["version"] == 1
    assert [k["name"] for k in spec["kernels"]] == done.kernels
    assert sum(c["op"] == "launch" for c in spec["commands"]) == done.launches > 0
    assert all("@compute" in k["wgsl"] for k in spec["kernels"])
    assert spec["inputs"] == [{"buffer": spec["inputs"][0]["buffer"], "offset": 0,
                               "shape": [2, 1, 28, 28], "dtype": "float32"}]
    assert spec["outputs"][0]["shape"] == [2, 10]
    # Every parameter is in the weights under its name, with its values.
    weights = load_file(str(tmp_path / "weights.safetensors"))
    for name, param in model.named_params():
        np.testing.assert_array_equal(weights[name], param.val().to_numpy())
    inits = {b["init"] for b in spec["buffers"] if "init" in b}
    assert inits == {name for name, _ in model.named_params()}
    # The expected outputs are burnish's own for the example inputs.
    x = Tensor.from_data(done.inputs[0], device=device)
    np.testing.assert_allclose(done.outputs[0], model(x).to_numpy(), rtol=1e-6, atol=1e-6)


def test_a_function_of_tensors_exports_with_every_output(device, tmp_path):
    lin = nn.LinearConfig(4, 3).init(device)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    done = export(lambda t: (F.softmax(lin(t), dim=1), lin(t).transpose()), [x], tmp_path)
    spec = json.loads((tmp_path / "model.json").read_text())
    assert [o["shape"] for o in spec["outputs"]] == [[2, 3], [3, 2]]
    assert spec["outputs"][1]["strides"] != [2, 1] or spec["outputs"][1]["offset"] == 0
    np.testing.assert_array_equal(done.inputs[0], x)
    np.testing.assert_allclose(done.outputs[0].sum(axis=1), 1.0, rtol=1e-6)


def test_held_tensors_that_are_no_parameter_are_exported_by_their_bytes(device, tmp_path):
    held = Tensor.from_data(np.arange(6, dtype=np.float32), device=device)
    export(lambda x: x * held, [(6,)], tmp_path)
    spec = json.loads((tmp_path / "model.json").read_text())
    (name,) = [b["init"] for b in spec["buffers"] if "init" in b]
    assert name.startswith("constants.buffer")
    raw = load_file(str(tmp_path / "weights.safetensors"))[name]
    np.testing.assert_array_equal(raw[:24].view(np.float32), np.arange(6, dtype=np.float32))


def test_reading_values_on_the_host_is_refused(device, tmp_path):
    def model(x):
        return x * float(x.sum().item())

    with pytest.raises(ExportError, match="reads tensor values on the host at .*test_export"):
        export(model, [(3,)], tmp_path)


def test_a_number_that_changes_between_calls_is_refused(device, tmp_path):
    calls = []

    def model(x):
        calls.append(1)
        return x * float(len(calls))

    with pytest.raises(ExportError, match=r"is given other values on each call"):
        export(model, [(3,)], tmp_path)


def test_a_library_call_is_refused(device, tmp_path):
    def vendor_work() -> None:
        pass

    def model(x):
        (x * 2.0).primitive.runtime.call(vendor_work, (), [], [])
        return x + 1.0

    with pytest.raises(ExportError, match=r"a library call \(vendor_work\) at .*test_export"
                                          r".* has no WGSL kernel"):
        export(model, [(3,)], tmp_path)


def test_int64_is_held_as_int32(device, tmp_path):
    if "int64" not in {d.name for d in device.backend.dtypes(device)}:
        pytest.skip("this adapter has no shader-int64: wgpu makes no int64 tensors here")

    def model(x, ids):
        return x.argmax(dim=1), ids * -3

    ids = np.array([[4, -7, 1000]], np.int64)
    done = export(model, [(2, 5), ids], tmp_path)
    spec = json.loads((tmp_path / "model.json").read_text())
    assert [i["dtype"] for i in spec["inputs"]] == ["float32", "int32"]
    assert [o["dtype"] for o in spec["outputs"]] == ["int32", "int32"]
    for kernel in spec["kernels"]:
        assert "i64" not in kernel["wgsl"] and "int64" not in json.dumps(kernel["bindings"])
    np.testing.assert_array_equal(done.outputs[1], ids * -3)


def test_float16_is_refused_naming_the_kernel(device, tmp_path):
    if "float16" not in {d.name for d in device.backend.dtypes(device)}:
        pytest.skip("this adapter has no shader-f16: wgpu makes no float16 tensors here")

    def model(x):
        return (x.cast("float16") + 1).cast("float32")

    with pytest.raises(ExportError, match=r"kernel \w+ \(launched at .*\) binds a buffer of "
                                          r"float16, which WebGPU in browsers lacks"):
        export(model, [(4,)], tmp_path)


def test_another_backend_is_refused(tmp_path):
    import burnish

    with pytest.raises(ExportError, match="exports from a wgpu device; got .*ndarray"):
        export(lambda x: x + 1, [(2,)], tmp_path,
               device=burnish.backend("ndarray").default_device())


def test_bad_inputs_are_refused(device, tmp_path):
    with pytest.raises(ExportError, match=r"input 0 must be a shape .*got \(2, 0\)"):
        export(lambda x: x + 1, [(2, 0)], tmp_path)
    with pytest.raises(ExportError, match="at least one input"):
        export(lambda: None, [], tmp_path)
    with pytest.raises(ExportError, match="output 0 is str"):
        export(lambda x: ["no"], [(2,)], tmp_path)
    lin = nn.LinearConfig(2, 2).init(device)
    with pytest.raises(ExportError, match="output 1 is state the model holds"):
        export(lambda x: (lin(x), lin.weight.val()), [(2,)], tmp_path)


def test_the_command_line_exports_a_saved_module(device, tmp_path, capsys):
    record = mnist_cnn(device).save(tmp_path / "model.safetensors")
    code = main(["export", str(record), "--model", f"{MNIST / 'model.py'}:CnnConfig",
                 "--input", "1,1,28,28", "--out", str(tmp_path / "web")])
    assert code == 0, capsys.readouterr().err
    assert "exported 12 launches" in capsys.readouterr().out or \
        (tmp_path / "web" / "model.json").is_file()
    assert (tmp_path / "web" / "model.json").is_file()
    code = main(["export", str(record), "--model", f"{MNIST / 'model.py'}:Nope",
                 "--input", "1,1,28,28", "--out", str(tmp_path / "web")])
    assert code == 2 and "model.py has no 'Nope'" in capsys.readouterr().err
    code = main(["export", str(tmp_path / "absent.safetensors"), "--model", "x:y",
                 "--input", "1", "--out", str(tmp_path / "web")])
    assert code == 2 and "no record at" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", str(record), "--model", "m:C", "--input", "1,x", "--out", "o"])
    assert "positive ints separated by commas" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", str(record), "--model", "m:C", "--input", "1,2:int8", "--out", "o"])
    assert "dtype is one of float32, int32, int64; got 'int8'" in capsys.readouterr().err


def test_the_command_line_exports_a_model_of_token_ids(device, tmp_path, capsys):
    record = token_classifier(device).save(tmp_path / "tokens.safetensors")
    code = main(["export", str(record), "--model",
                 f"{Path(__file__).parent / 'web_models.py'}:token_classifier",
                 "--input", "2,8:int64", "--out", str(tmp_path / "web")])
    assert code == 0, capsys.readouterr().err
    spec = json.loads((tmp_path / "web" / "model.json").read_text())
    assert spec["inputs"][0]["shape"] == [2, 8] and spec["inputs"][0]["dtype"] == "int32"


def test_inf_and_nan_constants_become_runtime_values():
    source = "let a = bitcast<f32>(0x7f800000u); let b = bitcast<f32>(1065353216u);"
    changed = browser_wgsl(source)
    assert "bitcast<f32>(burnish_word(0x7f800000u))" in changed
    assert "bitcast<f32>(1065353216u)" in changed  # 1.0: a constant browsers accept
    assert changed.startswith("fn burnish_word(x: u32) -> u32")
    assert browser_wgsl("let c = 1.0f;") == "let c = 1.0f;"


def test_javascript_kernels_refuse_64_bit_types():
    x = ir.Buffer("x", "int64", writable=True)
    kernel = ir.Kernel("k", [x], (1, 1, 1), [], [ir.Store(x, ir.const(0, "i32"),
                                                           ir.const(1, "i64"))])
    with pytest.raises(TypeError, match="(int64|i64) .*not supported"):
        JsGenerator().generate(kernel)
