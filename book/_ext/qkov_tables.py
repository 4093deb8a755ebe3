"""The tables a figure's notebook printed, shown as HTML tables rendered from their data.

A notebook prints a table with ``qkov.tables.show`` and its save cell writes the table, as
data, into the figure's ``summary.json`` (``"tables"``, in the order they were printed, with
the column headers its module declares). On the notebook's page, each piece of printed
output (split at blank lines) that is the next of those tables - its first line the table's
column names, then one line per row - is replaced by the table rendered from the data,
split when wider than the page (:func:`split_wide`). The printed text is only located,
never read for its values. A table of the figure's files that the stored notebook does not
print (the notebook or the files are out of date) is a warning, so the strict build fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from qkov_nodes import _table
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

from qkov.artifacts import default_dir
from qkov.figures import specs
from qkov.tables import cell_text

logger = logging.getLogger(__name__)

MAX_COLUMNS = 5  # a wider printed table is shown as several, each repeating the first column


def split_wide(header: list[str], rows: list[list[str]]) -> list[tuple[list, list]]:
    """A table as tables of at most MAX_COLUMNS columns, so that none is wider than the
    page; each repeats the leading columns that tell the rows apart (the row's key: the
    panel, or the condition and r)."""
    if len(header) <= MAX_COLUMNS:
        return [(header, rows)]
    key = next((k for k in range(1, len(header))
                if len({tuple(row[:k]) for row in rows}) == len(rows)), 1)
    key = min(key, MAX_COLUMNS - 2)  # leave room for at least two other columns
    step = MAX_COLUMNS - key
    return [([*header[:key], *header[k:k + step]], [[*row[:key], *row[k:k + step]] for row in rows])
            for k in range(key, len(header), step)]


def printed_as(chunk: str, table: dict) -> bool:
    """Whether ``chunk`` of printed output is ``table``'s printed form: its first line the
    column names, then a line per row."""
    lines = chunk.strip("\n").split("\n")
    return (len(lines) == len(table["rows"]) + 1
            and lines[0].split() == " ".join(table["columns"]).split())


def html_tables(table: dict) -> list[nodes.table]:
    """``table`` (``qkov.tables.table`` with its headers) as one or more HTML tables."""
    rows = [[cell_text(value, table["digits"]) for value in row] for row in table["rows"]]
    shown = []
    for header, part in split_wide(list(table["headers"]), rows):
        node = _table(header, part)
        node["classes"] += ["qkov-printed-table"]
        shown.append(node)
    return shown


def figure_tables(figure_id: str, env) -> list[dict] | None:
    """The tables in the figure's summary.json; None where it has none (not run: a figure
    that needs a dataset); a ValueError when it was written before tables were data."""
    path = default_dir(figure_id, Path(env.srcdir)) / "summary.json"
    env.note_dependency(str(path))
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    if "tables" not in summary:
        raise ValueError(f"{path} holds no printed tables (written before they were kept as "
                         "data): regenerate the figure")
    return summary["tables"]


class PrintedTables(SphinxTransform):
    """Each table a figure's notebook printed, as HTML tables from the figure's data; the
    rest of the printed text stays as it is."""

    default_priority = 410

    def apply(self):
        docname = self.env.docname
        figure_id = docname.removeprefix("notebooks/")
        if not docname.startswith("notebooks/") or figure_id not in specs():
            return
        try:
            tables = figure_tables(figure_id, self.env)
        except ValueError as exc:
            logger.warning(str(exc), location=docname)
            return
        if not tables:
            return
        found = 0
        for block in list(self.document.findall(nodes.literal_block)):
            if not {"output", "stream"} <= set(block["classes"]):
                continue
            shown, before = [], found
            for chunk in re.split(r"\n\s*\n", block.astext()):
                if found < len(tables) and printed_as(chunk, tables[found]):
                    shown += html_tables(tables[found])
                    found += 1
                elif chunk.strip():
                    shown.append(nodes.literal_block(chunk, chunk, classes=block["classes"],
                                                     language=block.get("language", "none")))
            if found > before:
                block.replace_self(shown)
        if found < len(tables):
            logger.warning(f"{figure_id}: its summary.json holds {len(tables)} printed tables, "
                           f"and the stored notebook prints the first {found} of them; re-run "
                           "the notebook, or regenerate the figure", location=docname)


def setup(app):
    app.add_transform(PrintedTables)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
