"""The tables the notebooks show (:func:`qkov.tables.show`) come as one display output with
text, HTML and LaTeX from the same data: the HTML page takes the HTML, and this extension
gives the PDF the LaTeX as it is (myst-nb reads any ``text/latex`` output as a formula)."""

from __future__ import annotations

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform


class LatexTables(SphinxPostTransform):
    """A ``text/latex`` output that is a shown table becomes raw LaTeX instead of math."""

    default_priority = 10  # after myst-nb's choice of one output per display (priority 4)
    formats = ("latex",)

    def run(self, **kwargs):
        for block in list(self.document.findall(nodes.math_block)):
            text = block.astext()
            if "text_latex" in block["classes"] and text.lstrip().startswith(r"\begin{center}"):
                block.replace_self(nodes.raw("", text, format="latex"))


def setup(app):
    app.add_post_transform(LatexTables)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
