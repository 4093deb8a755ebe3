"""Tables as data: a figure's CSV files, and the tables a notebook prints (:func:`show`, to
``digits`` significant digits) and stores in summary.json (:func:`taken`) for the book."""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping
from typing import Any


def plain(value: Any) -> Any:
    """JSON-ready copies of numpy scalars/arrays and dataclasses; non-finite floats -> None."""
    if hasattr(value, "__dataclass_fields__"):
        return {k: plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if hasattr(value, "tolist"):
        return plain(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def csv_bytes(rows, columns=None, name: str = "table") -> bytes:
    if not rows and columns is None:
        raise ValueError(f"no rows to write to {name}")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns or rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: repr(v) if isinstance(v, float) else v for k, v in plain(row).items()})
    return buffer.getvalue().encode()


def _cell(value: Any) -> Any:
    """A cell as JSON data that prints as ``value`` does (None, nan, float32: as text)."""
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    return value if isinstance(value, (bool, int, str)) else str(value)


def cell_text(value: Any, digits: int) -> str:
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def text(data: Mapping[str, Any]) -> str:
    """The printed form of a table :func:`show` keeps."""
    columns, digits = data["columns"], data["digits"]
    body = [[cell_text(value, digits) for value in row] for row in data["rows"]]
    widths = [max(len(c), *(len(line[i]) for line in body)) for i, c in enumerate(columns)]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(line, widths))
                     for line in [columns, *body])


_shown: list[dict[str, Any]] = []  # the tables shown since the last taken()


def show(rows, columns=None, digits: int = 4) -> None:
    """Prints a table and keeps it as data: its ``columns`` (default: the first row's keys),
    ``digits`` and ``rows`` (lists of cells in the columns' order)."""
    columns = list(columns if columns is not None else rows[0])
    _shown.append({"columns": columns, "digits": digits,
                   "rows": [[_cell(row[c]) for c in columns] for row in rows]})
    print(text(_shown[-1]))


def taken(headers: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The tables shown since the last call, with headers (else "a_b" as "a b"); then forgotten."""
    shown = [{**data, "headers": [(headers or {}).get(c) or c.replace("_", " ")
                                  for c in data["columns"]]} for data in _shown]
    _shown.clear()
    return shown
