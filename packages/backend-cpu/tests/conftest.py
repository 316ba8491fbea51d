"""The cpu backend under test: skipped without a C compiler, naming what to install, unless
``BURNISH_REQUIRE_BACKENDS`` names cpu (CI), where it fails."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def cpu():
    import burnish

    try:
        backend = burnish.backend("cpu")
        backend.default_device()
    except Exception as error:  # no C compiler
        message = (f"cpu cannot run here ({type(error).__name__}: {error}); it needs a C "
                   "compiler (apt install gcc)")
        wanted = os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")
        if "cpu" in wanted or "all" in wanted:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return backend
