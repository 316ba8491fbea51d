"""The fused backends under test. A GPU backend without a driver is skipped, naming what to
install, unless ``BURNISH_REQUIRE_BACKENDS`` names it (CI), where it fails."""

from __future__ import annotations

import os

import pytest

INSTALL = {
    "wgpu": "a Vulkan, Metal or DX12 driver (Linux without a GPU: apt install "
            "mesa-vulkan-drivers) and pip install burnish-backend-wgpu",
    "rocm": "an OpenCL driver (pip install 'burnish-backend-rocm[pocl]' for PoCL on the CPU)",
    "cuda": "an NVIDIA GPU and pip install 'burnish-backend-cuda[cuda12]'",
}


def fused(name: str):
    """``fusion+<name>``, or skip/fail when ``name`` cannot run here."""
    import burnish

    try:
        backend = burnish.backend(f"fusion+{name}")
        backend.default_device()
    except Exception as error:  # not installed, no driver, no device
        wanted = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
        message = f"{name} cannot run here ({type(error).__name__}: {error}); it needs " \
                  f"{INSTALL[name]}"
        if name in wanted or "all" in wanted:
            pytest.fail(message + " [BURNISH_REQUIRE_BACKENDS requires it]", pytrace=False)
        pytest.skip(message)
    return backend


@pytest.fixture(params=["wgpu", "rocm", "cuda"], scope="session")
def fused_backend(request):
    """``fusion+wgpu``, ``fusion+rocm`` and ``fusion+cuda`` in turn."""
    return fused(request.param)


@pytest.fixture
def device(fused_backend):
    return fused_backend.default_device()


@pytest.fixture(autouse=True)
def untuned():
    """No autotuning: its timing runs (on first use, with a cold cache) are launches too, and
    these tests count launches."""
    from burnish.jit import autotune

    autotune.set_enabled(False)
    yield
    autotune.set_enabled(None)
