"""Tables as data: a figure's CSV files, and the tables a notebook shows (:func:`show`, to
``digits`` significant digits) and stores in summary.json (:func:`taken`) for the book.

A shown table is one display output carrying the same data three ways: ``text/plain`` (the
text nbval compares), ``text/html`` (the book's page) and ``text/latex`` (the book's PDF).
Nothing reads a table back out of printed text: how a kernel splits stdout into outputs
depends on timing, a display output does not."""

from __future__ import annotations

import csv
import html
import io
import math
import os
import re
from collections.abc import Mapping
from typing import Any

# How the book heads the columns of shown tables: one name, one heading, on every page; any
# other name is shown with its underscores as spaces, and "L=0.1" (a loss level) as "L = 0.1".
HEADERS = {
    "alpha": "α", "alpha_closed_form": "α, closed form", "alpha_stylized": "α, stylized model",
    "alpha_at_loss": "α at the loss", "alpha_balanced_start": "α, balanced start",
    "tau": "τ", "tau_at_loss": "τ at the loss", "mu_ov": "μ_OV", "mu_qk": "μ_QK",
    "r_eff_at_loss": "r_eff at the loss",
    "err_mu_ov": "error μ_OV", "err_mu_qk": "error μ_QK", "err_alpha": "error α",
    "err_loss": "error loss", "off_set": "off the set",
    "attention_rollout": "attention (rollout)", "attention_layer_mean": "attention (layer mean)",
    "attention_layer_max": "attention (layer max)",
    "mean_attn": "mean attention", "pct_attn>=0.8": "% with attention ≥ 0.8",
    "pct_both>=0.8": "% with attention and p ≥ 0.8", "test_loss": "held-out loss",
    "pct_separable": "% separable", "drift_qk": "QK drift", "drift_ov": "OV drift",
    "companion_ci95": "± 95%", "distinct_ci95": "± 95%", "informative_ci95": "± 95%",
    "measured_attention_ci95": "± 95%", "task_informative_ci95": "± 95%",
    "task_distinct_ci95": "± 95%",
    "informative": "class-identifying", "task_informative_mean": "task: class-identifying",
    "task_distinct_mean": "task: distinct", "task_loss_mean": "task loss",
    "task_runs_reaching_loss": "runs at the loss", "runs_reaching_loss": "runs at the loss",
    "epochs_mean": "epochs",
    "measured_class_attention": "measured class-identifying attention",
}
LOSS_LEVEL = re.compile(r"L=(\S+)")

# A table wider than this is shown as several, each repeating the columns that name its rows
# (a phone's screen and the PDF's column hold about five).
MAX_COLUMNS = 5


def header(column: str) -> str:
    """The heading the book gives a column named ``column``."""
    if column in HEADERS:
        return HEADERS[column]
    level = LOSS_LEVEL.fullmatch(column)
    if level:
        return f"L = {level.group(1)}"
    return column.replace("_", " ")


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
    widths = [max([len(c), *(len(line[i]) for line in body)]) for i, c in enumerate(columns)]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(line, widths))
                     for line in [columns, *body])


def split_wide(headers: list[str], rows: list[list[str]]) -> list[tuple[list, list]]:
    """The parts a table is shown in: at most :data:`MAX_COLUMNS` columns each, each led by
    the fewest first columns that tell the rows apart (at most ``MAX_COLUMNS - 2`` of them)."""
    if len(headers) <= MAX_COLUMNS:
        return [(headers, rows)]
    key = 1
    while key < len(headers) - 1 and len({tuple(row[:key]) for row in rows}) < len(rows):
        key += 1
    key = min(key, MAX_COLUMNS - 2)
    step = MAX_COLUMNS - key
    parts = []
    for start in range(key, len(headers), step):
        part_headers = [*headers[:key], *headers[start:start + step]]
        part_rows = [[*row[:key], *row[start:start + step]] for row in rows]
        parts.append((part_headers, part_rows))
    return parts


def _parts(data: Mapping[str, Any]) -> list[tuple[list, list]]:
    body = [[cell_text(value, data["digits"]) for value in row] for row in data["rows"]]
    return split_wide(list(data["headers"]), body)


def html_text(data: Mapping[str, Any]) -> str:
    """The table as HTML for the book's page: one ``<table>`` per part (:func:`split_wide`)."""
    def row(tag, cells):
        return "<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>"

    tables = []
    for headers, rows in _parts(data):
        lines = ['<table class="qkov-printed-table">', "<thead>", row("th", headers), "</thead>",
                 "<tbody>", *(row("td", r) for r in rows), "</tbody>", "</table>"]
        tables.append("\n".join(lines))
    return "\n".join(tables)


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                 "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                 "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIAL.get(c, c) for c in text)


def latex_text(data: Mapping[str, Any]) -> str:
    """The table as LaTeX for the book's PDF: one centred ``tabular`` per part, the first
    column left-aligned (it names the row), the others right-aligned."""
    blocks = []
    for headers, rows in _parts(data):
        lines = [r"\begin{center}\small", r"\begin{tabular}{l" + "r" * (len(headers) - 1) + "}",
                 r"\hline", " & ".join(map(latex_escape, headers)) + r" \\", r"\hline",
                 *(" & ".join(map(latex_escape, r)) + r" \\" for r in rows),
                 r"\hline", r"\end{tabular}", r"\end{center}"]
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


_shown: list[dict[str, Any]] = []  # the tables shown since the last taken()


def show(rows, columns=None, digits: int = 4) -> None:
    """Shows a table and keeps it as data: its ``columns`` (default: the first row's keys),
    their ``headers`` (:func:`header`), ``digits`` and ``rows`` (lists of cells in the
    columns' order). In a notebook it is one display output (text, HTML and LaTeX, all from
    the data); elsewhere it prints the text."""
    rows = list(rows)
    if columns is None and not rows:
        raise ValueError("show: no rows, and no columns given")
    if not isinstance(digits, int) or isinstance(digits, bool) or digits < 1:
        raise ValueError(f"show: digits: expected an integer >= 1, got {digits!r}")
    columns = list(columns if columns is not None else rows[0])
    missing = [c for c in columns if any(c not in row for row in rows)]
    if missing:
        raise ValueError(f"show: column {missing[0]!r} is missing from a row")
    data = {"columns": columns, "headers": [header(c) for c in columns], "digits": digits,
            "rows": [[_cell(row[c]) for c in columns] for row in rows]}
    _display(data)
    _shown.append(data)  # for summary.json, once shown


def _display(data: Mapping[str, Any]) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # the library without IPython: a script
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        print(text(data))
        return
    display({"text/plain": text(data), "text/html": html_text(data),
             "text/latex": latex_text(data)}, raw=True)


def taken() -> list[dict[str, Any]]:
    """The tables shown since the last call (for summary.json); then forgotten."""
    shown = list(_shown)
    _shown.clear()
    return shown
