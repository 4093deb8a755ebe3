"""The book as one PDF. ``make pdf`` builds it with xelatex into ``_build/latex/`` before the
HTML; the HTML build copies it into the book and links it from every page's download menu,
only when it is there (no TeX where the book was built: no link to a missing file)."""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

from qkov.plotting import png_size

PDF = "qkov-book.pdf"  # _config.yml's latex_documents targetname, as .pdf
TALL = 0.9  # a PNG taller than this fraction of its width is drawn at that height in the PDF


def built_pdf(outdir) -> Path:
    return Path(outdir).parent / "latex" / PDF


def _note_pdf(app, config) -> None:
    # In html_context, so that the HTML builder rewrites every page when the PDF comes or goes.
    config.html_context = {**config.html_context, "qkov_pdf": built_pdf(app.outdir).is_file()}


def _copy_pdf(app, exception) -> None:
    if exception is None and app.builder.format == "html" and built_pdf(app.outdir).is_file():
        shutil.copyfile(built_pdf(app.outdir), Path(app.outdir, PDF))


def _pdf_button(app, pagename, templatename, context, doctree) -> None:
    """After sphinx-book-theme has made the download menu (priority 501)."""
    for button in context.get("header_buttons", []) if context.get("qkov_pdf") else []:
        if button.get("label") == "download-buttons":
            button["buttons"].append({
                "type": "link", "text": "Book (PDF)", "icon": "fas fa-book",
                "tooltip": "Download the whole book as a PDF", "url": context["pathto"](PDF, 1),
                "label": "download-book-pdf-button"})


class TallFiguresFitThePage(SphinxPostTransform):
    """A figure drawn for the book's column (the 4 x 2 heatmaps) may not fit a PDF page
    with its caption: it gets TALL of the line width as its height. No link to the SVG."""

    default_priority = 200
    builders = ("latex",)

    def run(self, **kwargs):
        for image in list(self.document.findall(nodes.image)):
            if "qkov-full-size" in image.parent["classes"]:  # a link to the HTML's SVG
                image.parent.replace_self(image)
            path = Path(self.env.srcdir, image["uri"].lstrip("/"))
            if path.suffix == ".png" and path.is_file() and "height" not in image:
                width, height = png_size(path.read_bytes()[:24])
                if height > TALL * width:
                    image["height"] = f"{100 * TALL:.0f}%"


def setup(app):
    app.add_post_transform(TallFiguresFitThePage)
    app.connect("config-inited", _note_pdf)
    app.connect("build-finished", _copy_pdf)
    app.connect("html-page-context", _pdf_button, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
