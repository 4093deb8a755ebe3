"""The claims ledger on its page, and its citations from every other page.

``{qkov-ledger} paper`` (or ``companion``) shows the rows of the stored ledger
(``artifacts/claims-ledger/data.csv``, which the claims-ledger notebook writes) whose claim
is the paper's (or the companion's own): per row its verdict in words, the claim, where it
holds, the rule that decides it, the evidence with a link to the figure, and the chapters
that state the finding (those citing it), under the anchor ``claim-<id>``.
``{qkov-claim}`<id>``` cites a row from any page: it reads "ledger: <verdict>" and links to
the row. An unknown id is a warning, which the strict build (``-W``) turns into an error;
``tests/test_claims.py`` checks that every row is cited from a chapter.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from docutils import nodes
from qkov_figures import book_figures, ref_node
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from qkov.artifacts import default_dir
from qkov.figures import claims_ledger

logger = logging.getLogger(__name__)

SOURCES = ("paper", "companion")
CITATION = re.compile(r"\{qkov-claim\}`([^`]*)`")


def ledger_file(srcdir) -> Path:
    return default_dir(claims_ledger.SPEC.id, srcdir) / "data.csv"


def ledger_rows(srcdir) -> dict[str, dict]:
    """The stored ledger's rows by claim id, in the ledger's order."""
    path = ledger_file(srcdir)
    try:
        with path.open(newline="") as handle:
            return {row["id"]: row for row in csv.DictReader(handle)}
    except OSError as err:
        raise FileNotFoundError(f"qkov-ledger: cannot read {path} ({err.strerror}); run the "
                                "claims-ledger notebook (make figures) first") from None


def anchor(claim_id: str) -> str:
    """The row's anchor on the ledger page: the name {qkov-claim} links to."""
    return f"claim-{claim_id}"


def citing_pages(srcdir) -> dict[str, list[Path]]:
    """Per row id, the chapters (book/*.md, the ledger page aside) that cite it."""
    cited: dict[str, list[Path]] = {}
    for page in sorted(Path(srcdir, "book").glob("*.md")):
        if page.name != "claims.md":
            for claim_id in dict.fromkeys(CITATION.findall(page.read_text())):
                cited.setdefault(claim_id, []).append(page)
    return cited


def _paragraph(label: str, *children: nodes.Node) -> nodes.paragraph:
    return nodes.paragraph("", "", nodes.emphasis(text=label), nodes.Text(": "), *children)


class LedgerDirective(SphinxDirective):
    """The rows of one source ("paper" or "companion"), in the ledger's order."""

    required_arguments = 1

    def run(self):
        source = self.arguments[0]
        if source not in SOURCES:
            raise self.error(f"qkov-ledger: expected one of {', '.join(SOURCES)}, got {source!r}")
        self.env.note_dependency(str(ledger_file(self.env.srcdir)))
        figures = book_figures(self.env.srcdir)
        cited = citing_pages(self.env.srcdir)
        for page in Path(self.env.srcdir, "book").glob("*.md"):
            self.env.note_dependency(str(page))  # a chapter that starts or stops citing a row
        boxes = []
        for row in ledger_rows(self.env.srcdir).values():
            if row["source"] != source:
                continue
            verdict = row["verdict"]
            # a target node, which the HTML and the LaTeX writers both turn into an anchor
            target = nodes.target("", "", names=[anchor(row["id"])])
            self.state.document.note_explicit_target(target)
            boxes.append(target)
            box = nodes.container(classes=["qkov-claim", "qkov-verdict-" + verdict.replace(" ", "-")])
            box += nodes.paragraph("", "", nodes.strong(text=verdict[:1].upper() + verdict[1:] + "."),
                                   nodes.Text(" " + row["claim"]))
            box += _paragraph("Setting", nodes.Text(row["scope"]))
            box += _paragraph("Decided by", nodes.Text(row["decided_by"][:1].upper()
                                                      + row["decided_by"][1:] + "."))
            figure = figures.get(row["figure"])
            box += _paragraph("Evidence", nodes.Text(row["evidence"] + " ("),
                              ref_node(figure) if figure else nodes.Text(row["figure"]),
                              nodes.Text("; row "), nodes.literal(text=row["id"]), nodes.Text(")"))
            links = []
            for page in cited.get(row["id"], []):
                links += [nodes.Text(", ")] * bool(links) + [addnodes.pending_xref(
                    "", nodes.inline(text=page.stem), refdomain="std", reftype="doc",
                    reftarget=f"/book/{page.stem}", refexplicit=False, refwarn=True)]
            box += _paragraph("Stated in", *(links or [nodes.Text("no chapter")]))
            boxes.append(box)
        return boxes


def claim_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    env.note_dependency(str(ledger_file(env.srcdir)))  # its verdict is read from the ledger
    row = ledger_rows(env.srcdir).get(text)
    if row is None:
        logger.warning(f"qkov-claim: no row {text!r} in the claims ledger "
                       f"({ledger_file(env.srcdir)})", location=(env.docname, lineno))
        return [nodes.Text(text)], []
    return [addnodes.pending_xref("", nodes.Text(f"ledger: {row['verdict']}"), refdomain="std",
                                  reftype="ref", reftarget=anchor(text), refexplicit=True,
                                  refwarn=True)], []


def setup(app):
    app.add_directive("qkov-ledger", LedgerDirective)
    app.add_role("qkov-claim", claim_role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
