"""What burnish-web's tests need: wgpu (exports record on it) and, for the browser checks,
Chromium. Each is skipped where absent, naming what to install, unless
``BURNISH_REQUIRE_BACKENDS`` names it (``wgpu``, ``chromium``; CI names both), where its
absence fails the tests instead."""

from __future__ import annotations

import os

import pytest


def required(name: str) -> bool:
    wanted = {w.strip() for w in os.environ.get("BURNISH_REQUIRE_BACKENDS", "").split(",")}
    return name in wanted or "all" in wanted


def missing(name: str, message: str) -> None:
    if required(name):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def device():
    import burnish

    try:
        return burnish.backend("wgpu").default_device()
    except Exception as error:  # no driver, no adapter
        missing("wgpu", f"wgpu cannot run here ({type(error).__name__}: {error}); it needs a "
                        "Vulkan, Metal or DX12 driver (Linux without a GPU: apt install "
                        "mesa-vulkan-drivers)")


@pytest.fixture(scope="session")
def chromium_path():
    from burnish.web.browser import find_chromium

    found = find_chromium()
    if found is None:
        missing("chromium", "chromium not installed (Debian: apt install chromium)")
    try:
        import websockets  # noqa: F401
    except ImportError:
        missing("chromium", "websockets not installed (pip install \"burnish-web[browser]\")")
    return found
