"""Fixtures of burnish.jit's tests: a raw WebGPU device and OpenCL context to compile generated
source, and the GPU backends. Without a driver a test is skipped, naming what to install,
unless ``BURNISH_REQUIRE_BACKENDS`` names the backend (CI), where it fails."""

from __future__ import annotations

import os

import pytest

INSTALL = {
    "cpu": "a C compiler (apt install gcc)",
    "cuda": "an NVIDIA GPU and pip install 'burnish-backend-cuda[cuda12]'",
    "wgpu": "a Vulkan, Metal or DX12 driver (Linux without a GPU: apt install "
            "mesa-vulkan-drivers) and pip install burnish-backend-wgpu",
    "rocm": "an OpenCL driver (pip install 'burnish-backend-rocm[pocl]' for PoCL on the CPU)",
}


def missing(backend: str, why: str) -> None:
    """Skip (or fail, where ``BURNISH_REQUIRE_BACKENDS`` names ``backend``) the calling test."""
    wanted = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
    message = f"{backend} cannot run here ({why}); it needs {INSTALL[backend]}"
    if backend in wanted or "all" in wanted:
        pytest.fail(message + " [BURNISH_REQUIRE_BACKENDS requires it]", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def wgpu_device():
    """A WebGPU device with the adapter's shader-f16 and shader-int64 when it has them."""
    try:
        os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
        import wgpu

        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise RuntimeError("no adapter")
    except Exception as error:  # ImportError, no driver, no adapter
        missing("wgpu", f"{type(error).__name__}: {error}")
    features = [f for f in ("shader-f16", "shader-int64") if f in adapter.features]
    return adapter.request_device_sync(required_features=features)


@pytest.fixture(scope="session")
def opencl_context():
    """An OpenCL context on the first device (GPUs first), as the rocm backend picks it."""
    try:
        os.environ.setdefault("PYOPENCL_CTX", "")
        from burnish.rocm.runtime import opencl_devices

        found = opencl_devices()
        if not found:
            raise RuntimeError("no OpenCL device")
    except Exception as error:
        missing("rocm", f"{type(error).__name__}: {error}")
    import pyopencl as cl

    return cl.Context([found[0][1]])


def gpu_backend(name: str):
    """Backend ``name`` with a device that works, or skip/fail as ``missing`` does."""
    import burnish

    try:
        backend = burnish.backend(name)
        backend.default_device()
    except Exception as error:
        missing(name, f"{type(error).__name__}: {error}")
    return backend


@pytest.fixture(params=["wgpu", "rocm"], scope="session")
def jit_backend(request):
    """Each GPU backend in turn (named so, not ``backend``: the conformance plugin, loaded in
    every pytest session of the environment, has a ``backend`` fixture of its own)."""
    return gpu_backend(request.param)


@pytest.fixture(scope="session")
def wgpu_backend():
    """The wgpu backend alone (for what only WGSL spells two ways)."""
    return gpu_backend("wgpu")


@pytest.fixture(params=["cpu", "rocm", "wgpu", "cuda"], scope="session")
def jit_device(request):
    """The default device of each backend built on burnish.jit, the cpu one included."""
    return gpu_backend(request.param).default_device()


@pytest.fixture(params=["wgpu", "rocm", "cuda"], scope="session")
def gpu_jit_backend(request):
    """Each backend built on burnish.jit for GPUs (wgpu, rocm, cuda) in turn."""
    return gpu_backend(request.param)
