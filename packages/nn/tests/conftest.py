"""Shared fixtures of the nn tests: a seeded generator and the autodiff backend's device."""

from __future__ import annotations

import pytest

import burnish as bn


@pytest.fixture(autouse=True)
def seeded():
    bn.seed(0)


@pytest.fixture
def ad():
    """The default device of autodiff+ndarray, for anything that trains."""
    return bn.backend("autodiff+ndarray").default_device()
