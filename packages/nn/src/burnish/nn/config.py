"""Config: a dataclass of a module's hyperparameters, saved and loaded as JSON (Burn's Config)."""

from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from pathlib import Path
from typing import Any, Self


# dataclass_transform: type checkers see each subclass as the dataclass it becomes.
@typing.dataclass_transform()
class Config:
    """Hyperparameters: Burn's ``#[derive(Config)]``.

    Subclasses declare fields as annotations with their defaults and become dataclasses. A
    config nests other configs and ``Initializer`` values, turns into JSON and back
    (``to_json``/``from_json``, ``save``/``load``), and a module's config builds the module
    with ``init(device)``.
    """

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(cls)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-compatible values (nested configs and initializers as dicts)."""
        fields = dataclasses.fields(self)  # type: ignore[arg-type]  # subclasses are dataclasses
        return {f.name: _encode(getattr(self, f.name)) for f in fields}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        """The config ``to_dict`` gave; missing fields take their defaults, unknown ones raise
        TypeError."""
        hints = typing.get_type_hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(values) - known)
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}; it has "
                            f"{', '.join(sorted(known))}")
        return cls(**{name: _decode(value, hints.get(name)) for name, value in values.items()})

    def with_(self, **changes: Any) -> Self:
        """A copy with some fields changed (Burn's ``with_*`` builders)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the config as JSON to ``path``."""
        target = Path(path)
        target.write_text(self.to_json() + "\n", encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Self:
        """The config saved at ``path``."""
        return cls.from_json(Path(path).read_text(encoding="utf-8"))


def _encode(value: Any) -> Any:
    if isinstance(value, Config):
        return value.to_dict()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(value, tuple | list):
        return [_encode(item) for item in value]
    if isinstance(value, dict):
        return {key: _encode(item) for key, item in value.items()}
    return value


def _decode(value: Any, hint: Any) -> Any:
    for candidate in _options(hint):
        if isinstance(candidate, type) and isinstance(value, dict):
            from_dict = getattr(candidate, "from_dict", None)
            if callable(from_dict):
                return from_dict(value)
        if typing.get_origin(candidate) is tuple and isinstance(value, list):
            return tuple(value)
    return value


def _options(hint: Any) -> list[Any]:
    """The types a hint allows: ``A | B | None`` gives ``[A, B, NoneType]``."""
    if hint is None:
        return []
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return list(typing.get_args(hint))
    return [hint]
