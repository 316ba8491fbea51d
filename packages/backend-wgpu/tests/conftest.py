"""The wgpu backend under test: skipped without a WebGPU adapter, naming what to install,
unless ``BURNISH_REQUIRE_BACKENDS`` names wgpu (CI), where it fails."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def wgpu():
    import burnish

    try:
        backend = burnish.backend("wgpu")
        backend.default_device()
    except Exception as error:  # no driver, no adapter
        message = (f"wgpu cannot run here ({type(error).__name__}: {error}); it needs a Vulkan, "
                   "Metal or DX12 driver (Linux without a GPU: apt install mesa-vulkan-drivers)")
        wanted = os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")
        if "wgpu" in wanted or "all" in wanted:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return backend
