"""Records: a module's tensors as a nested mapping, saved to and loaded from files.

``save(record, path, format=None, precision="full", metadata=None)`` writes atomically;
``load(path, format=None, precision=None)`` returns a ``Record`` with ``.tensors`` and
``.metadata``. Formats (safetensors, msgpack, json, binary, and any a plugin adds) implement
``RecordFormat``; ``formats()`` lists them. See docs/records.md.
"""

from burnish.record.format import RecordFormat
from burnish.record.precision import Precision
from burnish.record.record import FORMAT_VERSION, Record, RecordMetadata
from burnish.record.recorder import DEFAULT_FORMAT, formats, load, save
from burnish.record.tree import flatten

__all__ = [
    "DEFAULT_FORMAT", "FORMAT_VERSION", "Precision", "Record", "RecordFormat", "RecordMetadata",
    "flatten", "formats", "load", "save",
]
