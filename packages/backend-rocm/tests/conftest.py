"""The rocm backend under test: skipped without an OpenCL device, naming what to install,
unless ``BURNISH_REQUIRE_BACKENDS`` names rocm (CI), where it fails."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def rocm():
    import burnish

    try:
        backend = burnish.backend("rocm")
        backend.default_device()
    except Exception as error:  # no OpenCL platform or device
        message = (f"rocm cannot run here ({type(error).__name__}: {error}); it needs an "
                   "OpenCL driver (pip install 'burnish-backend-rocm[pocl]' for PoCL on the CPU)")
        wanted = os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")
        if "rocm" in wanted or "all" in wanted:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return backend
