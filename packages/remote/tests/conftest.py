"""A server on loopback for the remote package's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import burnish as bn
from burnish.remote import Server


@pytest.fixture
def server() -> Iterator[Server]:
    with Server("ndarray", "127.0.0.1", 0, token="test-token") as running:
        yield running
        # The process's remote backend is shared with every later test: no connection to a
        # server that is gone may stay its default device.
        bn.backend("remote").disconnect()
