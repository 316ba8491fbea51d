"""The errors of burnish.data: a dataset that cannot be found, downloaded, verified or parsed."""

from __future__ import annotations

from burnish import BurnishError


class DataError(BurnishError, RuntimeError):
    """A dataset's files are missing, unreadable or malformed, or a download failed."""


class ChecksumError(DataError):
    """A downloaded file's checksum differs from the published one (nothing is cached)."""
