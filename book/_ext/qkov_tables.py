"""The tables a notebook printed, as HTML tables rendered from its summary.json's "tables": a
printed piece (between blank lines) whose first line is the next table's column names, with a
line per row, is replaced by it (its values never read). One not printed fails the build."""

from __future__ import annotations

import json
import re

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

from qkov.artifacts import default_dir
from qkov.figures import specs
from qkov.tables import cell_text


def table(header: list[str], rows: list[list[str]]) -> nodes.table:
    def row(cells):
        return nodes.row("", *(nodes.entry("", nodes.paragraph(text=cell)) for cell in cells))
    group = nodes.tgroup("", *(nodes.colspec(colwidth=1) for _ in header), cols=len(header))
    group += [nodes.thead("", row(header)), nodes.tbody("", *map(row, rows))]
    return nodes.table("", group, classes=["qkov-printed-table"])


MAX_COLUMNS = 5  # a wider table is shown as several, each repeating the rows' key columns


def split_wide(header: list[str], rows: list[list[str]]) -> list[tuple[list, list]]:
    """Parts of MAX_COLUMNS columns, each led by the fewest that tell the rows apart."""
    if len(header) <= MAX_COLUMNS:
        return [(header, rows)]
    key = next((k for k in range(1, len(header)) if len({tuple(r[:k]) for r in rows}) == len(rows)), 1)
    key = min(key, MAX_COLUMNS - 2)
    step = MAX_COLUMNS - key
    return [([*header[:key], *header[k:k + step]], [[*r[:key], *r[k:k + step]] for r in rows])
            for k in range(key, len(header), step)]


class PrintedTables(SphinxTransform):
    default_priority = 410

    def apply(self):
        figure_id = self.env.docname.removeprefix("notebooks/")
        path = default_dir(figure_id, self.env.srcdir) / "summary.json"
        if figure_id not in specs() or not path.is_file():
            return
        self.env.note_dependency(str(path))
        tables, found = json.loads(path.read_text())["tables"], 0
        for block in list(self.document.findall(nodes.literal_block)):
            if not {"output", "stream"} <= set(block["classes"]):
                continue
            shown = []
            for chunk in re.split(r"\n\s*\n", block.astext()):
                lines = chunk.strip("\n").split("\n")
                t = tables[found] if found < len(tables) else None
                if t and len(lines) == len(t["rows"]) + 1 \
                        and lines[0].split() == " ".join(t["columns"]).split():
                    rows = [[cell_text(v, t["digits"]) for v in row] for row in t["rows"]]
                    shown += [table(h, part) for h, part in split_wide(list(t["headers"]), rows)]
                    found += 1
                elif chunk.strip():
                    shown.append(nodes.literal_block(chunk, chunk, classes=block["classes"],
                                                     language=block.get("language", "none")))
            if any(isinstance(node, nodes.table) for node in shown):
                block.replace_self(shown)
        if found < len(tables):
            logging.getLogger(__name__).warning(f"{figure_id}: the stored notebook prints {found} "
                                                f"of its summary.json's {len(tables)} tables: "
                                                "re-run it", location=self.env.docname)


def setup(app):
    app.add_transform(PrintedTables)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
