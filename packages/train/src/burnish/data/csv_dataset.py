"""CsvDataset: the rows of a CSV file, as dicts or as typed tuples."""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .dataset import DatasetBase, check_index
from .errors import DataError


class CsvDataset(DatasetBase):
    """The rows of the CSV file at ``path``, read once into memory (with the csv module).

    - ``types=None``: each row is a dict from the header's column names to strings.
    - ``types`` a mapping of column name to a converter (``int``, ``float``, any callable): rows
      are dicts with those columns converted.
    - ``types`` a sequence of converters, one per column: rows are tuples of converted values.

    ``header=False`` means the file has no header row: columns are then named ``"0"``, ``"1"``...
    ``delimiter`` and other ``csv.reader`` options pass through. Raises DataError naming the
    line and column when a row has the wrong number of fields or a value does not convert."""

    def __init__(
        self,
        path: str | Path,
        types: Mapping[str, Callable[[str], Any]] | Sequence[Callable[[str], Any]] | None = None,
        header: bool = True,
        delimiter: str = ",",
        **reader_options: Any,
    ):
        self.path = Path(path)
        with self.path.open(newline="", encoding="utf-8") as file:
            rows = list(csv.reader(file, delimiter=delimiter, **reader_options))
        if header:
            if not rows:
                raise DataError(f"{self.path} is empty: no header row")
            self.columns, rows, first_line = rows[0], rows[1:], 2
        else:
            self.columns, first_line = [str(i) for i in range(len(rows[0]) if rows else 0)], 1
        if isinstance(types, Mapping):
            unknown = sorted(set(types) - set(self.columns))
            if unknown:
                raise DataError(f"{self.path} has no column {unknown}; its columns: {self.columns}")
        elif types is not None and len(types) != len(self.columns):
            raise DataError(
                f"{len(types)} types given for the {len(self.columns)} columns of {self.path}"
            )
        self.rows = [
            self.convert(row, types, line) for line, row in enumerate(rows, first_line) if row
        ]

    def convert(self, row: list[str],
                types: Mapping[str, Callable[[str], Any]] | Sequence[Callable[[str], Any]] | None,
                line: int) -> Any:
        if len(row) != len(self.columns):
            raise DataError(
                f"{self.path}, line {line}: {len(row)} fields, but {len(self.columns)} columns"
            )
        if types is None:
            return dict(zip(self.columns, row))
        converters = (
            types
            if not isinstance(types, Mapping)
            else [types.get(name, str) for name in self.columns]
        )
        values = []
        for column, convert, value in zip(self.columns, converters, row):
            try:
                values.append(convert(value))
            except (TypeError, ValueError) as error:
                raise DataError(
                    f"{self.path}, line {line}, column {column!r}: cannot convert {value!r} "
                    f"({error})"
                ) from None
        if isinstance(types, Mapping):
            return dict(zip(self.columns, values))
        return tuple(values)

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, index: int) -> Any:
        return self.rows[check_index(index, len(self))]
