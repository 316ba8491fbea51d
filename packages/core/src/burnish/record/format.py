"""RecordFormat: the protocol every record format implements, first-party or third-party."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from burnish.record.record import RecordMetadata


class RecordFormat(ABC):
    """One way of turning a record into bytes and back.

    A format is registered by returning an instance from the ``burnish_record_formats`` hook.
    ``save``/``load`` do everything around it: checking the tree, precision, atomic writes, adding
    the file's name to errors. A format only encodes.

    ``dumps`` receives a checked tree: dicts with str keys free of dots, lists, and ``TensorData``
    leaves. ``loads`` must return the same tree and metadata, and must raise
    ``burnish.errors.RecordError`` saying what is wrong when the bytes are truncated, corrupt or
    hostile: never execute code, and check every size the bytes claim before allocating it.
    """

    #: The name users pass as ``format=`` (``"safetensors"``).
    name: ClassVar[str]
    #: The file extension, with its dot (``".safetensors"``): picks the format when none is named.
    extension: ClassVar[str]
    #: One line for listings.
    description: ClassVar[str] = ""

    @abstractmethod
    def dumps(self, tree: dict[str, Any], metadata: RecordMetadata) -> bytes:
        """The file's bytes for a checked tree and its metadata."""

    @abstractmethod
    def loads(self, data: bytes) -> tuple[dict[str, Any], RecordMetadata]:
        """The tree and metadata a file's bytes hold; RecordError when they are not valid."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ({self.extension})>"
