"""Docutils nodes the book's extensions build (tables, links, code blocks); no Sphinx
extension of its own (the others import it from ``book/_ext``)."""

from __future__ import annotations

import os
from pathlib import Path

from docutils import nodes
from sphinx import addnodes


def _cell(content) -> nodes.entry:
    """A table cell from text, a node or a list of nodes."""
    entry = nodes.entry()
    if isinstance(content, str):
        entry += nodes.paragraph(text=content)
    else:
        entry += nodes.paragraph("", "", *(content if isinstance(content, list) else [content]))
    return entry


def _table(header: list[str], rows: list[list]) -> nodes.table:
    table = nodes.table()
    group = nodes.tgroup(cols=len(header))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in header]

    def row(cells):
        line = nodes.row()
        line += [_cell(cell) for cell in cells]
        return line

    head, body = nodes.thead(), nodes.tbody()
    head += row(header)
    body += [row(r) for r in rows]
    group += [head, body]
    return table


def _literal(text: str) -> nodes.literal:
    return nodes.literal(text, text)


def _code(text: str, language: str) -> nodes.literal_block:
    block = nodes.literal_block(text, text, language=language)
    block["classes"].append("qkov-code")
    return block


def _doc_link(docname: str, refdoc: str, *children: nodes.Node) -> addnodes.pending_xref:
    """A link to page ``docname``, titled ``children`` (or, given none, by the page's title);
    a page missing from the book is a warning (so a strict build fails)."""
    ref = addnodes.pending_xref("", *(children or [nodes.inline()]), refdomain="std",
                                reftype="doc", reftarget="/" + docname, refdoc=refdoc,
                                refexplicit=bool(children), refwarn=True)
    return ref


def _source_path(path: Path, srcdir: Path) -> str:
    """``path`` as Sphinx takes a file of the source: "/" + relative to the source folder
    (with ".." where the tests point $QKOV_ARTIFACTS outside it)."""
    return "/" + Path(os.path.relpath(Path(path).resolve(), Path(srcdir).resolve())).as_posix()


def _download(text: str, path: Path, srcdir: Path) -> addnodes.download_reference:
    ref = addnodes.download_reference("", "", reftarget=_source_path(path, srcdir),
                                      refexplicit=True, refdomain="", reftype="download")
    ref += nodes.literal(text, text)
    return ref
