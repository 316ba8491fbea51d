"""The wgpu backend: devices from the adapters, dtypes from their features, asynchronous
execution (ops are recorded, reading synchronises once), moving tensors between backends."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.errors import UnsupportedError
from burnish.wgpu.backend import WgpuBackend
from burnish.wgpu.runtime import SUBMIT_EVERY, adapters


def test_devices_are_the_adapters_best_first(wgpu):
    devices = wgpu.devices()
    found = adapters()
    assert [d.native.info for d in devices] == [a.info for a in found]
    assert [(d.type, d.index) for d in devices] == [("wgpu", i) for i in range(len(found))]
    assert wgpu.default_device() is devices[0]
    order = ["DiscreteGPU", "IntegratedGPU", "VirtualGPU", "CPU"]
    kinds = [order.index(a.info["adapter_type"]) if a.info["adapter_type"] in order else 4
             for a in found]
    assert kinds == sorted(kinds)
    assert all(a.info.get("backend_type") not in ("OpenGL", "Empty") for a in found)
    assert found[0].info["device"] in wgpu.describe_device(devices[0])


def test_dtypes_follow_the_adapter_features(wgpu):
    device = wgpu.default_device()
    names = {d.name for d in wgpu.dtypes(device)}
    assert {"float32", "bfloat16", "int32", "int16", "int8", "uint8", "bool"} <= names
    assert "float64" not in names
    features = wgpu.runtime(device).features
    assert ("float16" in names) == ("shader-f16" in features)
    assert ("int64" in names) == ("shader-int64" in features)


def test_float64_is_a_clear_error_naming_the_adapter(wgpu):
    device = wgpu.default_device()
    adapter = wgpu.runtime(device).describe()
    with pytest.raises(UnsupportedError) as raised:
        Tensor.from_data(np.ones(3), device=device)
    message = str(raised.value)
    assert "float64" in message and adapter in message and "WGSL" in message
    with pytest.raises(UnsupportedError, match="float64"):
        Tensor.ones([2], device=device, dtype="float32").cast("float64")


def test_a_missing_feature_removes_its_dtype_and_says_so():
    backend = WgpuBackend()  # a fresh instance: its runtime's features can be edited
    device = backend.default_device()
    runtime = backend.runtime(device)
    runtime.features.discard("shader-f16")
    assert "float16" not in {d.name for d in backend.dtypes(device)}
    with pytest.raises(UnsupportedError, match=r"'shader-f16'") as raised:
        Tensor.from_data(np.ones(3, np.float16), device=device)
    assert runtime.describe() in str(raised.value)


class Counter:
    """Wraps a runtime method and counts its calls."""

    def __init__(self, monkeypatch, runtime, name):
        self.calls = []
        original = getattr(runtime, name)

        def counted(*args, **kwargs):
            self.calls.append(args)
            return original(*args, **kwargs)

        monkeypatch.setattr(runtime, name, counted)


def test_ops_are_recorded_and_one_read_synchronises(wgpu, monkeypatch):
    device = wgpu.default_device()
    runtime = wgpu.runtime(device)

    def compute():
        a = Tensor.from_data(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
        return ((a + 1.0) * 2.0 - a).exp().sum(1)

    compute().to_numpy()  # compiles, and tunes the reduction (which waits for its timings)
    reads = Counter(monkeypatch, runtime, "read")
    submits = Counter(monkeypatch, runtime, "flush")
    d = compute()
    assert reads.calls == [] and submits.calls == []  # nothing submitted, nothing waited for
    np.testing.assert_allclose(d.to_numpy(), np.exp(np.arange(6.0).reshape(2, 3) + 2).sum(1),
                               rtol=1e-5)
    assert len(reads.calls) == 1 and len(submits.calls) == 1


def test_long_op_streams_are_submitted_in_batches_without_waiting(wgpu, monkeypatch):
    device = wgpu.default_device()
    runtime = wgpu.runtime(device)
    runtime.sync()
    reads = Counter(monkeypatch, runtime, "read")
    submits = Counter(monkeypatch, runtime, "flush")
    x = Tensor.zeros([4], device=device)
    for _ in range(3 * SUBMIT_EVERY):
        x = x + 1.0
    assert reads.calls == [] and len(submits.calls) >= 2
    assert x.tolist() == [3.0 * SUBMIT_EVERY] * 4
    assert len(reads.calls) == 1


def test_reading_several_tensors_is_one_read(wgpu, monkeypatch):
    device = wgpu.default_device()
    runtime = wgpu.runtime(device)
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = Tensor.from_data(host, device=device)
    views = [x, x.transpose(), (x > 5.0), x.cast("int8")[1:, ::2]]
    runtime.sync()
    reads = Counter(monkeypatch, runtime, "read")
    data = wgpu.read([t.primitive for t in views], [t.dtype for t in views])
    # The device's error words (made by an earlier index check, if any) come with the data.
    errors = runtime.device_errors is not None
    assert len(reads.calls) == 1 and len(reads.calls[0][0]) == 4 + errors
    expected = [host, host.T, host > 5, host.astype(np.int8)[1:, ::2]]
    for got, want in zip(data, expected):
        np.testing.assert_array_equal(got.to_numpy(), want)


def test_tensors_move_to_other_backends_and_back(wgpu):
    device = wgpu.default_device()
    host = np.linspace(-1, 1, 10, dtype=np.float32)
    x = Tensor.from_data(host, device=device) * 2.0
    on_cpu = x.to_device(burnish.backend("ndarray").default_device())
    assert on_cpu.backend.name == "ndarray"
    np.testing.assert_array_equal(on_cpu.to_numpy(), host * 2)
    back = on_cpu.to_device(device)
    assert back.device == device
    np.testing.assert_array_equal((back + x).to_numpy(), host * 4)


def test_tensors_move_between_adapters(wgpu):
    devices = wgpu.devices()
    if len(devices) < 2:
        pytest.skip(f"one WebGPU adapter here ({wgpu.describe_device(devices[0])})")
    x = Tensor.from_data(np.arange(5, dtype=np.float32), device=devices[0])
    y = x.to_device(devices[1])
    assert y.device == devices[1]
    np.testing.assert_array_equal((y * 2.0).to_numpy(), np.arange(5) * 2)


def test_info_lists_the_backend_and_its_adapters(wgpu):
    out = subprocess.run([sys.executable, "-m", "burnish", "info"], capture_output=True,
                         text=True, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  wgpu ")]
    device = wgpu.default_device()
    assert f"{device} ({wgpu.describe_device(device)})" in line


NO_DRIVER = """
import burnish
try:
    burnish.backend("wgpu").devices()
except burnish.UnsupportedError as error:
    print(error)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Vulkan loader's variables")
def test_without_a_driver_the_error_says_what_to_install(tmp_path):
    # Pointing the Vulkan loader at no driver file hides every Vulkan driver.
    missing = str(tmp_path / "none.json")
    env = {**os.environ, "VK_ICD_FILENAMES": missing, "VK_DRIVER_FILES": missing}
    out = subprocess.run([sys.executable, "-c", NO_DRIVER], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert "no WebGPU adapter found" in out and "mesa-vulkan-drivers" in out


def test_only_burnish_kernels_drop_wgpus_runtime_checks(wgpu, monkeypatch):
    """burnish.jit's kernels compile without the bounds checks and loop counters wgpu injects;
    custom kernels keep them, and so does every kernel under BURNISH_WGPU_CHECKED=1."""
    from burnish.jit import ir
    from burnish.jit.builder import KernelBuilder
    from burnish.jit.custom import Launch, custom_kernel
    from burnish.wgpu import runtime as wgpu_runtime

    made = []
    original = wgpu_runtime._unchecked_module

    def spy(device, source):
        module = original(device, source)
        made.append(module is not None)
        return module

    monkeypatch.setattr(wgpu_runtime, "_unchecked_module", spy)
    device = wgpu.default_device()
    runtime = wgpu.runtime(device)

    def ones() -> ir.Kernel:
        k = KernelBuilder("ones_unchecked_test", (64, 1, 1))
        out = k.buffer("out", "float32", writable=True)
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        k.store(out, i, ir.lift(1.0, "f32"))
        return k.build()

    buffer = runtime.pool.alloc(6 * 4)
    runtime.launch(("ones_unchecked_test",), ones, [buffer], [6], invocations=6)
    assert made == [True]  # compiled unchecked (this wgpu-py can make such modules)
    ones_read = np.frombuffer(runtime.read([(buffer.handle, 0, 24)])[0], np.float32)
    np.testing.assert_array_equal(ones_read, np.ones(6, np.float32))

    def build(k, out, a):
        i = k.global_index()
        with k.if_(i >= k.info(0)):
            k.return_()
        k.store(out, i, a[i] * ir.lift(2.0, "f32"))

    @custom_kernel("twice_unchecked_test", build=build)
    def twice(a):
        return Launch(a.shape, a.dtype, info=[a.shape[0]], invocations=a.shape[0])

    made.clear()
    x = Tensor.from_numpy(np.arange(6, dtype=np.float32), device)
    np.testing.assert_array_equal(twice(x).to_numpy(), np.arange(6) * 2.0)
    assert made == []  # the custom kernel was compiled with wgpu's checks

    assert "kernels without wgpu's runtime checks" in wgpu.describe_device(device)
    monkeypatch.setenv("BURNISH_WGPU_CHECKED", "1")
    assert original(wgpu.runtime(device).device, "@compute @workgroup_size(1) fn f() {}") is None
    assert "BURNISH_WGPU_CHECKED=1" in wgpu.describe_device(device)
