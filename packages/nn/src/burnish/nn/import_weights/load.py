"""load_weights: another framework's tensors into a burnish module, with a report of the fit."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from burnish import Tensor, record
from burnish.errors import RecordError
from burnish.nn.import_weights.adapter import PYTORCH, Chunk, WeightAdapter
from burnish.nn.import_weights.pytorch_file import ZIP_MAGIC, read_pytorch
from burnish.nn.module import Module, check_cast
from burnish.nn.param import Param
from burnish.record.builtin.binary import MAGIC as BINARY_MAGIC
from burnish.record.tree import join, normalize
from burnish.shape import show
from burnish.tensor_data import TensorData

M = TypeVar("M", bound=Module)

#: Extensions read as PyTorch files unless their content says otherwise (burnish's binary
#: records are ``.bin`` too); everything else goes through ``burnish.record``.
PYTORCH_EXTENSIONS = (".pt", ".pth", ".bin", ".ckpt")
#: The name ``format=`` gives PyTorch's files (``torch.save``'s zip and legacy formats).
PYTORCH_FORMAT = "pytorch"


@dataclass
class LoadResult(Generic[M]):
    """What ``load_weights`` did: the loaded ``module``; the burnish parameter names it
    ``loaded``; those the source lacked (``missing``, left as they were); the source keys
    (after remapping) that no parameter took (``unused``); and ``mismatched``, one line per
    parameter whose source tensor had another shape (left as it was)."""

    module: M
    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"loaded {len(self.loaded)} of "
                 f"{len(self.loaded) + len(self.missing) + len(self.mismatched)} parameters"]
        for label, items in (("missing", self.missing), ("mismatched", self.mismatched),
                             ("unused", self.unused)):
            if items:
                lines.append(f"{label}: {', '.join(items)}")
        return "\n".join(lines)


def read_weights(source: str | os.PathLike[str], top_level_key: str | None = None, *,
                 format: str | None = None) -> tuple[dict[str, TensorData], bool]:
    """The tensors of a weights file by dotted path, and whether burnish wrote it.

    ``format`` is ``"pytorch"`` (``read_pytorch``) or a record format's name (``"binary"``,
    ``"safetensors"``..., through ``burnish.record.load``). When it is ``None`` the file's first
    bytes decide, then its extension: burnish's binary record (its magic ``b"\\x89BURNISH"``),
    then a zip archive (``torch.save``'s format) are told by content, so a ``.bin`` may be
    either; other ``.pt``, ``.pth``, ``.bin`` and ``.ckpt`` files are read as PyTorch's legacy
    format; anything else by ``burnish.record.load``'s choice (safetensors from any framework,
    and every record format). Raises RecordError when the file cannot be read or ``format``
    names no format.
    """
    path = Path(source)
    if format is None:
        format = _sniff(path)
    if format == PYTORCH_FORMAT:
        return read_pytorch(path, top_level_key), False
    if format is not None and format not in record.formats():
        known = ", ".join([PYTORCH_FORMAT, *record.formats()])
        raise RecordError(f"unknown weights format {format!r}; known formats: {known}")
    loaded = record.load(path, format)
    tensors: Any = loaded.tensors
    if top_level_key is not None:
        if top_level_key not in tensors:
            raise RecordError(f"{path} has no entry {top_level_key!r} at the top level")
        tensors = tensors[top_level_key]
    return record.flatten(tensors), loaded.metadata.format_version is not None


def _sniff(path: Path) -> str | None:
    """The format a weights file's first bytes or extension name; None leaves the choice to
    ``burnish.record.load`` (by extension)."""
    with open(path, "rb") as file:
        start = file.read(len(BINARY_MAGIC))
    if start == BINARY_MAGIC:
        return "binary"
    if start.startswith(ZIP_MAGIC) or path.suffix.lower() in PYTORCH_EXTENSIONS:
        return PYTORCH_FORMAT
    return None


def load_weights(
    module: M,
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    remap: Sequence[tuple[str, str]] = (),
    adapter: WeightAdapter | None = None,
    allow_partial: bool = False,
    top_level_key: str | None = None,
    format: str | None = None,
    cast_ints: bool = False,
) -> LoadResult[M]:
    """``module`` holding the weights of ``source``: a PyTorch ``.pt``/``.pth`` file, a
    safetensors file (or any record), or a mapping of dotted names to tensors or arrays.

    ``remap`` rewrites the source's keys first: each ``(pattern, replacement)`` is applied with
    ``re.sub`` in order (``[(r"^features\\.", "conv.")]``). The ``adapter`` then says, for each
    parameter, which source key (or piece of a packed one) holds it and how to convert its
    layout; by default ``PYTORCH`` (Linear weights transposed, norm ``weight``/``bias`` as
    ``gamma``/``beta``, attention's and recurrent layers' packed weights split), except for
    files burnish wrote, which are read as they are. Values are cast to each parameter's dtype,
    on its device; ids and frozen flags stay the module's.

    Raises RecordError, listing every problem at once, when a parameter is missing or has
    another shape, unless ``allow_partial``, which leaves those parameters as they were. Source
    keys no parameter uses are only reported (``LoadResult.unused``): PyTorch's
    ``num_batches_tracked``, a head that the model lacks.

    ``format`` is passed to ``read_weights`` (``"pytorch"`` or a record format's name; by
    default the file's content and extension decide). Int and bool source tensors are not cast
    into float parameters: RecordError names the parameter and both dtypes, unless
    ``cast_ints=True``.
    """
    if isinstance(source, Mapping):
        given = _flat_mapping(source, "")
        written_by_burnish = False
    else:
        given, written_by_burnish = read_weights(source, top_level_key, format=format)
    if adapter is None:
        adapter = WeightAdapter() if written_by_burnish else PYTORCH
    tensors = _remapped(given, remap)
    result: LoadResult[M] = LoadResult(module)
    values: dict[str, TensorData] = {}
    taken: set[str] = set()
    for name, enclosing, param in _params_with_enclosing(module):
        located, conversion = adapter.locate(enclosing, name)
        key = located.key if isinstance(located, Chunk) else located
        if key not in tensors:
            result.missing.append(name if located == name else f"{name} (as {located})")
            continue
        taken.add(key)
        data = tensors[key]
        converted = data.to_numpy()
        if isinstance(located, Chunk):
            if not located.fits(converted.shape):
                result.mismatched.append(f"{name} (module {show(param.shape)}, source "
                                         f"{show(list(converted.shape))} as {key}: not "
                                         f"{located.count} equal pieces along dim {located.dim})")
                continue
            converted = located.take(converted)
        if conversion is not None:
            converted = conversion(converted)
        if list(converted.shape) != list(param.shape):
            result.mismatched.append(f"{name} (module {show(param.shape)}, source "
                                     f"{show(list(converted.shape))} as {located})")
            continue
        check_cast(name, data.dtype, param.dtype, cast_ints)
        values[name] = TensorData(converted, data.dtype)
        result.loaded.append(name)
    result.unused = [key for key in tensors if key not in taken]
    if not allow_partial and (result.missing or result.mismatched):
        raise RecordError(f"the weights do not fit {type(module).__name__}; {result}")

    def mapper(name: str, param: Param) -> Param:
        if name not in values:
            return param
        return param.with_tensor(Tensor.from_data(values[name], param.device, param.dtype))

    result.module = module.map(mapper)
    return result


def _flat_mapping(tensors: Mapping[str, Any], path: str) -> dict[str, TensorData]:
    """A mapping's tensors by dotted path; its keys may hold dots already (``"0.weight"``)."""
    flat: dict[str, TensorData] = {}
    for key, value in tensors.items():
        if isinstance(value, Mapping):
            flat.update(_flat_mapping(value, join(path, key)))
        else:
            flat[join(path, key)] = normalize({"leaf": value})["leaf"]
    return flat


def _remapped(tensors: dict[str, TensorData], remap: Sequence[tuple[str, str]]
              ) -> dict[str, TensorData]:
    patterns = [(re.compile(pattern), replacement) for pattern, replacement in remap]
    renamed: dict[str, TensorData] = {}
    origin: dict[str, str] = {}
    for key, data in tensors.items():
        new = key
        for pattern, replacement in patterns:
            new = pattern.sub(replacement, new)
        if new in renamed:
            raise RecordError(f"remapping gives {origin[new]!r} and {key!r} the same key {new!r}")
        renamed[new], origin[new] = data, key
    return renamed


def _params_with_enclosing(module: Module
                           ) -> list[tuple[str, list[tuple[str, Module]], Param]]:
    """Each parameter's name, the modules that hold it (outermost first, each with its path),
    and the parameter."""
    found = []
    for name, param in module.named_params():
        enclosing: list[tuple[str, Module]] = [("", module)]
        node: Any = module
        parts = name.split(".")
        for depth, part in enumerate(parts[:-1]):
            if isinstance(node, Module):
                node = vars(node)[part]
            elif isinstance(node, dict):
                node = node[part]
            else:
                node = node[int(part)]
            if isinstance(node, Module):
                enclosing.append((".".join(parts[: depth + 1]), node))
        found.append((name, enclosing, param))
    return found
