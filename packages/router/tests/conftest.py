"""The routers under test. wgpu without a driver is skipped, naming what to install, unless
``BURNISH_REQUIRE_BACKENDS`` names it (CI), where it fails."""

from __future__ import annotations

import os

import pytest

WGPU = ("a Vulkan, Metal or DX12 driver (Linux without a GPU: apt install mesa-vulkan-drivers) "
        "and pip install burnish-backend-wgpu")


@pytest.fixture(scope="session")
def wgpu():
    """The wgpu backend, or skip/fail when it cannot run here."""
    import burnish

    try:
        backend = burnish.backend("wgpu")
        backend.default_device()
    except Exception as error:  # not installed, no driver, no device
        wanted = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
        message = f"wgpu cannot run here ({type(error).__name__}: {error}); it needs {WGPU}"
        if "wgpu" in wanted or "all" in wanted:
            pytest.fail(message + " [BURNISH_REQUIRE_BACKENDS requires it]", pytrace=False)
        pytest.skip(message)
    return backend
