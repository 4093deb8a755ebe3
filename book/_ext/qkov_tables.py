"""Notebook outputs on the book's pages, the same however the kernel happened to flush them.

- A cell's stdout arrives in as many outputs as the kernel's flushes made (timing: a re-run
  may join two prints or split one). Adjacent stdout outputs are shown as one block, in their
  order; myst-nb's ``nb_merge_streams`` is not used, since it joins all of a cell's stdout into
  the first output, moving lines printed after a table above it, and drops blank lines.
- The tables the notebooks show (:func:`qkov.tables.show`) come as one display output with
  text, HTML and LaTeX from the same data. The page takes the HTML; the PDF takes the LaTeX as
  it is (myst-nb reads any ``text/latex`` output as a formula). A figure's page that shows
  fewer tables than its summary.json holds (a notebook stored before tables were display
  outputs) fails the strict build.
"""

from __future__ import annotations

import json

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

from qkov.artifacts import default_dir
from qkov.figures import specs

HTML_TABLE = '<table class="qkov-printed-table">'
LATEX_TABLE = r"\begin{center}\small"  # how qkov.tables.latex_text opens each part


def is_stdout(node) -> bool:  # myst-nb's classes: stdout "output stream", stderr "output stderr"
    return isinstance(node, nodes.literal_block) and {"output", "stream"} <= set(node["classes"])


class JoinedStreams(SphinxTransform):
    """Adjacent stdout blocks of a cell's output become one, in their order."""

    default_priority = 410

    def apply(self):
        joined = set()
        for block in list(self.document.findall(is_stdout)):
            if id(block) in joined:  # joined into the block before it already
                continue
            following = block.next_node(descend=False, siblings=True)
            while following is not None and is_stdout(following):
                text = block.astext() + following.astext()
                block.children = []
                block += nodes.Text(text)
                block.rawsource = text
                following.parent.remove(following)
                joined.add(id(following))
                following = block.next_node(descend=False, siblings=True)


class ShownTables(SphinxPostTransform):
    """A shown table's LaTeX as LaTeX in the PDF; a figure page with a table missing fails."""

    default_priority = 10  # after myst-nb's choice of one output per display (priority 4)

    def run(self, **kwargs):
        shown = 0
        for block in list(self.document.findall(nodes.math_block)):
            text = block.astext()
            if "text_latex" in block["classes"] and text.lstrip().startswith(LATEX_TABLE):
                block.replace_self(nodes.raw("", text, format="latex"))
        for raw in self.document.findall(nodes.raw):
            shown += raw.astext().lstrip().startswith((HTML_TABLE, LATEX_TABLE))
        figure_id = self.env.docname.removeprefix("notebooks/")
        path = default_dir(figure_id, self.env.srcdir) / "summary.json"
        if figure_id not in specs() or not path.is_file():
            return
        expected = len(json.loads(path.read_text())["tables"])
        if shown < expected:
            logging.getLogger(__name__).warning(
                f"{figure_id}: the stored notebook shows {shown} of its summary.json's "
                f"{expected} tables: re-run it", location=self.env.docname)


def setup(app):
    app.add_transform(JoinedStreams)
    app.add_post_transform(ShownTables)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
