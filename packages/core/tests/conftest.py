"""Fixtures shared by the core tests."""

from __future__ import annotations

import pytest

import burnish as bn


@pytest.fixture
def debug_off():
    """Debug mode off for the test (the value checks GPU backends skip unless debugging)."""
    was = bn.is_debug()
    bn.set_debug(False)
    yield
    bn.set_debug(was)


@pytest.fixture
def values_on_device(monkeypatch, debug_off):
    """The ndarray backend pretending to keep its values on a device (as GPU backends do)."""
    monkeypatch.setattr(bn.backend("ndarray"), "values_on_host", False)
