"""Tables, written once as data: the CSV files of a figure's set, and the tables a notebook
prints.

A notebook shows a table with :func:`show`: it prints the table's text (numbers to
``digits`` significant digits: nbval compares printed text, and the last bits of a float
move with thread counts and library builds) and keeps the table as data (:func:`table`);
the figure's save cell (``plotting.publish``) writes the tables shown since the last save
into its ``summary.json`` (``"tables"``, in the order they were printed), with the column
headers its module declares (``HEADERS``: a column name to what a reader sees; a name not
there is shown with spaces for underscores). The book renders each as an HTML table from
that data (``book/_ext/qkov_tables.py``); :func:`text` gives the printed form back from the
same data, so nothing printed is ever parsed.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

# What a column is headed with where its figure's HEADERS does not name it.
default_header = lambda name: name.replace("_", " ")  # noqa: E731


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
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def csv_bytes(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
              name: str = "table") -> bytes:
    """``rows`` (flat records with the same keys) as CSV. ``columns``: the header, needed
    only where there may be no rows (then the table is just the header)."""
    if not rows and columns is None:
        raise ValueError(f"no rows to write to {name}")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns or rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: repr(v) if isinstance(v, float) else v for k, v in plain(row).items()})
    return buffer.getvalue().encode()


def _cell_value(value: Any) -> Any:
    """A cell as data that prints as ``value`` prints: finite floats (numpy's float64 among
    them) as floats, integers and text as they are, anything else (None, a non-finite
    float, a numpy float32) as the text it prints as."""
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, (bool, int, str)):
        return value
    return str(value)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
          digits: int = 4) -> dict[str, Any]:
    """A table as data: ``columns`` (default: the first row's keys, in order), ``digits``
    (the significant digits its floats print with) and ``rows`` (lists of cells, in the
    columns' order), JSON-ready; a ValueError naming a missing column."""
    if not rows and columns is None:
        raise ValueError("table: no rows and no columns: give columns")
    columns = list(columns if columns is not None else rows[0])
    if not isinstance(digits, int) or not 1 <= digits <= 17:
        raise ValueError(f"table: digits: expected an integer from 1 to 17, got {digits!r}")
    for k, row in enumerate(rows):
        missing = [c for c in columns if c not in row]
        if missing:
            raise ValueError(f"table: row {k} has no column {', '.join(map(repr, missing))}; "
                             f"its keys are {list(row)}")
    return {"columns": columns, "digits": digits,
            "rows": [[_cell_value(row[c]) for c in columns] for row in rows]}


def cell_text(value: Any, digits: int) -> str:
    """How a cell prints: a float to ``digits`` significant digits, anything else as is."""
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def text(data: Mapping[str, Any]) -> str:
    """The printed form of a table (:func:`table`): right-justified columns two spaces
    apart, under a line of the column names."""
    columns, digits = data["columns"], data["digits"]
    body = [[cell_text(value, digits) for value in row] for row in data["rows"]]
    widths = [max(len(c), *(len(line[i]) for line in body)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(line, widths)) for line in body]
    return "\n".join(lines)


_shown: list[dict[str, Any]] = []  # the tables shown since the last taken()


def show(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
         digits: int = 4) -> None:
    """Print a table (:func:`text`) and keep it as data for the figure's save cell
    (:func:`taken`)."""
    data = table(rows, columns, digits)
    _shown.append(data)
    print(text(data))


def taken(headers: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The tables shown since the last call, in order, each with its ``headers`` (a column
    name to its header: ``headers`` where it names the column, else :func:`default_header`);
    the record is then emptied."""
    shown = [{**data, "headers": [(headers or {}).get(c) or default_header(c)
                                  for c in data["columns"]]} for data in _shown]
    _shown.clear()
    return shown
