"""save and load: records to files and back in any registered format, written atomically.

``save(record, path, format=None, precision="full", metadata=None) -> Path`` writes a nested
mapping of tensors; ``load(path, format=None, precision=None) -> Record`` reads one back as a
``Record`` (``.tensors``, the nested mapping; ``.metadata``, a ``RecordMetadata``).
``formats()`` lists the formats installed plugins provide, by name.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from burnish.errors import RecordError
from burnish.plugins.manager import plugin_manager
from burnish.record.atomic import atomic_write
from burnish.record.format import RecordFormat
from burnish.record.precision import Precision, convert, setting_name
from burnish.record.record import Record, RecordMetadata, user_metadata
from burnish.record.tree import normalize

#: The format used when none is named and the path has no extension.
DEFAULT_FORMAT = "safetensors"


def formats() -> dict[str, RecordFormat]:
    """Every record format the installed plugins provide, by name (sorted).

    Asked of the plugin manager on each call, so a plugin registered at run time is seen at once.
    A format without ``name``, ``extension``, ``dumps`` and ``loads`` is skipped with a warning.
    When two plugins offer the same name, the one registered last wins (pluggy calls hooks last
    registered first), with a warning.
    """
    found: dict[str, RecordFormat] = {}
    for provided in plugin_manager().hook.burnish_record_formats():
        for candidate in provided or ():
            if not all(hasattr(candidate, a) for a in ("name", "extension", "dumps", "loads")):
                warnings.warn(f"ignoring record format {candidate!r}: not a RecordFormat",
                              stacklevel=2)
            elif candidate.name in found:
                warnings.warn(f"two plugins provide record format {candidate.name!r}; using "
                              f"{found[candidate.name]!r}, ignoring {candidate!r}", stacklevel=2)
            else:
                found[candidate.name] = candidate
    return dict(sorted(found.items()))


def save(
    record: Mapping[str, Any] | Record,
    path: str | os.PathLike[str],
    format: str | None = None,
    precision: Precision = "full",
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``record`` to ``path`` atomically and return the path.

    ``record`` is a nested mapping (str keys without dots; dicts and lists to any depth) whose
    leaves are TensorData, burnish Tensors (anything with ``into_data()``) or NumPy arrays; a
    loaded ``Record`` may be saved again (its user metadata is kept unless ``metadata`` is given).
    ``format`` is a name from ``formats()``; ``None`` picks it from the path's extension, and a
    path without one gets the default, safetensors. ``precision``: ``"full"`` stores floats as they
    are, ``"half"`` stores float32 and float64 as float16, a float dtype stores every float in it;
    ints and bools are never converted. ``metadata`` is the caller's JSON-compatible mapping (for
    example the module's type), returned by ``load`` in ``Record.metadata.user``.

    Raises RecordError for an unknown format, precision or extension, a record that is not a
    nested mapping of tensors, or metadata that is not JSON-compatible; OSError when the file
    system refuses. Either way the file at ``path`` is as it was before the call.
    """
    target = Path(path)
    chosen = _choose(target, format)
    setting = setting_name(precision)
    if isinstance(record, Record):
        if metadata is None:
            metadata = record.metadata.user
        record = record.tensors
    tree = convert(normalize(record), precision, loading=False)
    data = chosen.dumps(tree, RecordMetadata(precision=setting, user=user_metadata(metadata)))
    if not isinstance(data, bytes | bytearray | memoryview):
        kind = type(data).__name__
        raise RecordError(f"record format {chosen.name!r} returned {kind}, not bytes")
    return atomic_write(target, bytes(data))


def load(
    path: str | os.PathLike[str],
    format: str | None = None,
    precision: Precision | None = None,
) -> Record:
    """Read the record at ``path``.

    ``format`` as for ``save`` (by name, else by extension, else safetensors). ``precision``:
    ``None`` gives the tensors as stored; ``"full"`` gives every float tensor as float32, ``"half"``
    turns float32 and float64 into float16, a float dtype converts every float to it.

    Raises RecordError naming the file and what is wrong when it is truncated, corrupt, hostile
    or of a newer format version; FileNotFoundError (an OSError) when there is no file. Nothing in
    a file is ever executed: no format uses pickle.
    """
    source = Path(path)
    chosen = _choose(source, format)
    if precision is not None:
        setting_name(precision)
    data = source.read_bytes()
    try:
        tree, metadata = chosen.loads(data)
        if not isinstance(metadata, RecordMetadata):
            raise RecordError(f"the format returned {type(metadata).__name__} as metadata")
        # A third-party format's result is checked like a user's record.
        tree = normalize(tree)
    except RecordError as error:
        raise RecordError(f"cannot load {source} as {chosen.name}: {error}") from error
    except MemoryError:
        raise
    except Exception as error:
        # A format that let a raw error escape (KeyError, struct.error, RecursionError...) on
        # bad input: the caller still gets one error type that names the file.
        raise RecordError(
            f"cannot load {source} as {chosen.name}: {type(error).__name__}: {error}"
        ) from error
    if precision is not None:
        tree = convert(tree, precision, loading=True)
    return Record(tree, metadata)


def _choose(path: Path, name: str | None) -> RecordFormat:
    known = formats()
    listing = ", ".join(f"{n} ({f.extension})" for n, f in known.items()) or "none installed"
    if name is not None:
        if name not in known:
            raise RecordError(f"unknown record format {name!r}; known formats: {listing}")
        return known[name]
    suffix = path.suffix.lower()
    if not suffix and DEFAULT_FORMAT in known:
        return known[DEFAULT_FORMAT]
    for candidate in known.values():
        if candidate.extension.lower() == suffix:
            return candidate
    raise RecordError(
        f"no record format uses the extension of {path} ({suffix or 'none'}); "
        f"pass format= one of: {listing}"
    )
