"""The Record a file holds: its nested tensors and its metadata (versions, precision, user data)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata as distribution_metadata
from typing import Any

from burnish.errors import RecordError

#: Version of the record layout (the meaning of the keys every format writes). A reader refuses
#: files of a newer version instead of misreading them; bump it only for incompatible changes.
FORMAT_VERSION = 1


def burnish_version() -> str:
    """The installed burnish-core version, written into every record."""
    # Read from the distribution rather than ``burnish.__version__`` so that importing records
    # never depends on the whole ``burnish`` package having finished importing.
    try:
        return distribution_metadata.version("burnish-core")
    except distribution_metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class RecordMetadata:
    """What a record file says about itself.

    ``format_version``, ``burnish_version`` and ``precision`` are ``None`` for files that burnish
    did not write (a safetensors file from another framework); ``precision`` is the setting the
    file was saved with (``"full"``, ``"half"`` or a float dtype's name). ``user`` is the caller's
    own JSON-compatible mapping (for example the module's type), returned as it was saved.
    """

    format_version: int | None = FORMAT_VERSION
    burnish_version: str | None = field(default_factory=burnish_version)
    precision: str | None = "full"
    user: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The metadata as a JSON-compatible mapping, the form every format stores."""
        return {
            "format_version": self.format_version,
            "burnish_version": self.burnish_version,
            "precision": self.precision,
            "user": self.user,
        }

    @classmethod
    def from_dict(cls, value: Any) -> RecordMetadata:
        """Metadata read back from a file; raises RecordError when it is malformed or too new."""
        if not isinstance(value, Mapping):
            raise RecordError(f"metadata must be a mapping, found {type(value).__name__}")
        version = value.get("format_version")
        if type(version) is not int or version < 1:
            raise RecordError(f"metadata has no valid format_version (found {version!r})")
        if version > FORMAT_VERSION:
            raise RecordError(
                f"record format version {version} is newer than this burnish reads "
                f"({FORMAT_VERSION}); upgrade burnish-core"
            )
        burnish = value.get("burnish_version")
        precision = value.get("precision")
        user = value.get("user", {})
        if not isinstance(burnish, str) or not isinstance(precision, str):
            raise RecordError(
                f"metadata burnish_version and precision must be strings, found "
                f"{type(burnish).__name__} and {type(precision).__name__}"
            )
        if not isinstance(user, Mapping) or not all(isinstance(k, str) for k in user):
            raise RecordError("metadata 'user' must be a mapping with string keys")
        return cls(version, burnish, precision, dict(user))


def user_metadata(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """The caller's metadata in canonical JSON form, so it reads back equal in every format.

    Raises RecordError when it is not a mapping of strings to JSON values (NaN excluded).
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RecordError(f"metadata must be a mapping, got {type(value).__name__}")
    if not all(isinstance(key, str) for key in value):
        raise RecordError("metadata keys must be strings")
    try:
        # The round trip turns tuples into lists, as reading any format back would.
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise RecordError(f"metadata must be JSON-compatible (no NaN): {error}") from None


@dataclass(frozen=True)
class Record:
    """A loaded record: ``tensors`` is the nested mapping (dicts with str keys, lists, TensorData
    leaves) and ``metadata`` the file's ``RecordMetadata``."""

    tensors: dict[str, Any]
    metadata: RecordMetadata = field(default_factory=RecordMetadata)
