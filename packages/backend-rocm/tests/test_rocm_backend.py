"""The rocm backend: OpenCL devices (GPUs first, BURNISH_ROCM_PLATFORM picks platforms),
float64 where the device has cl_khr_fp64, asynchronous execution (reading synchronises once),
moving tensors between backends."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import burnish
from burnish import Tensor
from burnish.errors import UnsupportedError
from burnish.rocm.backend import RocmBackend
from burnish.rocm.runtime import opencl_devices


def test_devices_are_the_opencl_devices_gpus_first(rocm):
    import pyopencl as cl

    devices = rocm.devices()
    found = opencl_devices()
    assert [d.native.int_ptr for d in devices] == [d.int_ptr for _, d in found]
    assert [(d.type, d.index) for d in devices] == [("rocm", i) for i in range(len(found))]
    gpu = [bool(d.native.type & cl.device_type.GPU) for d in devices]
    assert gpu == sorted(gpu, reverse=True)
    assert devices[0].native.name.strip() in rocm.describe_device(devices[0])


def test_the_platform_variable_picks_platforms(rocm, monkeypatch):
    platform = opencl_devices()[0][0].name.strip()
    monkeypatch.setenv("BURNISH_ROCM_PLATFORM", platform[:6].upper())  # any case, any part
    devices = RocmBackend().devices()
    assert devices and all(platform[:6].lower() in d.backend.describe_device(d).lower()
                           for d in devices)
    monkeypatch.setenv("BURNISH_ROCM_PLATFORM", "no-such-platform")
    with pytest.raises(UnsupportedError, match="no OpenCL device found on a platform matching "
                                               "'no-such-platform'"):
        RocmBackend().devices()


def test_float64_follows_cl_khr_fp64(rocm):
    device = rocm.default_device()
    runtime = rocm.runtime(device)
    assert ("float64" in {d.name for d in rocm.dtypes(device)}) == runtime.has_fp64
    others = {"float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}
    assert others <= {d.name for d in rocm.dtypes(device)}


def test_a_device_without_fp64_says_so():
    backend = RocmBackend()  # a fresh instance: its runtime can pretend to lack fp64
    device = backend.default_device()
    runtime = backend.runtime(device)
    runtime.has_fp64 = False
    assert "float64" not in {d.name for d in backend.dtypes(device)}
    with pytest.raises(UnsupportedError, match="cl_khr_fp64") as raised:
        Tensor.from_data(np.ones(3), device=device)
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


def test_launches_do_not_wait_and_one_read_synchronises(rocm, monkeypatch):
    device = rocm.default_device()
    runtime = rocm.runtime(device)

    def compute():
        a = Tensor.from_data(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
        return ((a + 1.0) * 2.0 - a).exp().sum(1)

    compute().to_numpy()  # compiles, and tunes the reduction (which waits for its timings)
    reads = Counter(monkeypatch, runtime, "read")
    syncs = Counter(monkeypatch, runtime, "sync")
    d = compute()
    assert reads.calls == [] and syncs.calls == []
    np.testing.assert_allclose(d.to_numpy(), np.exp(np.arange(6.0).reshape(2, 3) + 2).sum(1),
                               rtol=1e-5)
    assert len(reads.calls) == 1 and syncs.calls == []


def test_reading_several_tensors_is_one_read(rocm, monkeypatch):
    device = rocm.default_device()
    runtime = rocm.runtime(device)
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = Tensor.from_data(host, device=device)
    views = [x, x.transpose(), (x > 5.0), x.cast("bfloat16")[1:, ::2]]
    reads = Counter(monkeypatch, runtime, "read")
    data = rocm.read([t.primitive for t in views], [t.dtype for t in views])
    # The device's error words (made by an earlier index check, if any) come with the data.
    errors = runtime.device_errors is not None
    assert len(reads.calls) == 1 and len(reads.calls[0][0]) == 4 + errors
    expected = [host, host.T, host > 5, host[1:, ::2]]
    for got, want in zip(data, expected):
        np.testing.assert_array_equal(got.to_numpy().astype(want.dtype), want)


def test_tensors_move_to_other_backends_and_back(rocm):
    device = rocm.default_device()
    host = np.linspace(-1, 1, 10, dtype=np.float32)
    x = Tensor.from_data(host, device=device) * 2.0
    on_cpu = x.to_device(burnish.backend("ndarray").default_device())
    np.testing.assert_array_equal(on_cpu.to_numpy(), host * 2)
    back = on_cpu.to_device(device)
    assert back.device == device
    np.testing.assert_array_equal((back + x).to_numpy(), host * 4)


def test_tensors_move_between_rocm_and_wgpu(rocm):
    try:
        other = burnish.backend("wgpu")
        target = other.default_device()
    except Exception as error:
        pytest.skip(f"wgpu cannot run here: {error}")
    x = Tensor.from_data(np.arange(5, dtype=np.float32), device=rocm.default_device())
    y = (x * 3.0).to_device(target)
    assert y.backend is other
    z = (y + 1.0).to_device(rocm.default_device())
    np.testing.assert_array_equal(z.to_numpy(), np.arange(5) * 3 + 1)


def test_tensors_move_between_devices(rocm):
    devices = rocm.devices()
    if len(devices) < 2:
        pytest.skip(f"one OpenCL device here ({rocm.describe_device(devices[0])})")
    x = Tensor.from_data(np.arange(5, dtype=np.float32), device=devices[0])
    y = x.to_device(devices[1])
    assert y.device == devices[1]
    np.testing.assert_array_equal((y * 2.0).to_numpy(), np.arange(5) * 2)


def test_info_lists_the_backend_and_its_devices(rocm):
    out = subprocess.run([sys.executable, "-m", "burnish", "info"], capture_output=True,
                         text=True, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  rocm ")]
    device = rocm.default_device()
    assert f"{device} ({rocm.describe_device(device)})" in line


NO_DRIVER = """
import burnish
try:
    burnish.backend("rocm").devices()
except burnish.UnsupportedError as error:
    print(error)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ocl-icd's variable (Linux)")
def test_without_a_driver_the_error_says_what_to_install(tmp_path):
    # OCL_ICD_VENDORS naming a folder that does not exist hides every OpenCL driver.
    env = {**os.environ, "OCL_ICD_VENDORS": str(tmp_path / "none")}
    out = subprocess.run([sys.executable, "-c", NO_DRIVER], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert "no OpenCL device found" in out and "burnish-backend-rocm[pocl]" in out
