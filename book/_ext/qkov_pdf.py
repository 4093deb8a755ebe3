"""The book as one PDF: LaTeX fixes, and a link to it in every page's download menu.

``make pdf`` builds the PDF with Debian's TeX (``jupyter-book build . --builder pdflatex``,
xelatex; ``_config.yml``'s ``latex:`` names it ``qkov-book.pdf``) into ``_build/latex/``
before ``make book`` builds the HTML. When the HTML build finds that PDF next to its output
folder (``<outdir>/../latex/``), it copies it into the HTML book and adds "Book (PDF)" to
the download menu of every page; without it (no TeX where the book was built) there is no
link, so the book never links a missing file.

LaTeX: figures keep the names the book gives them and get no LaTeX number (see below).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes
from sphinx.errors import ConfigError
from sphinx.transforms.post_transforms import SphinxPostTransform

from qkov.plotting import png_size

PDF = "qkov-book.pdf"
BUTTON = {"type": "link", "text": "Book (PDF)", "icon": "fas fa-book",
          "tooltip": "Download the whole book as a PDF", "label": "download-book-pdf-button"}


def built_pdf(outdir: str | Path) -> Path:
    """Where ``make pdf`` leaves the PDF, for an HTML build into ``outdir``."""
    return Path(outdir).parent / "latex" / PDF


def _check_latex_name(app, env, docnames) -> None:
    """(Once jupyter-book has applied _config.yml's latex_documents.)"""
    if app.builder.name != "latex":
        return
    names = [doc[1] for doc in app.config.latex_documents]
    if names != [PDF.replace(".pdf", ".tex")]:
        raise ConfigError(f"latex_documents names {names}; the download menu links {PDF}: "
                          f"set latex: latex_documents: targetname: "
                          f"{PDF.replace('.pdf', '.tex')} in _config.yml")


def _copy_pdf(app) -> None:
    """Copy the PDF into the HTML book; remember whether there is one to link."""
    app.qkov_pdf = False
    if app.builder.format != "html":
        return
    source = built_pdf(app.outdir)
    if source.is_file():
        shutil.copyfile(source, Path(app.outdir) / PDF)
        app.qkov_pdf = True


def _relink(app, env, added, changed, removed) -> list[str]:
    """Every page again when the PDF came or went since the last build (an incremental
    build would keep the old download menus)."""
    if app.builder.format != "html":
        return []
    previous = getattr(env, "qkov_pdf_linked", None)  # None: not recorded yet
    env.qkov_pdf_linked = app.qkov_pdf
    return sorted(env.found_docs) if previous != app.qkov_pdf else []


def add_pdf_button(app, pagename, templatename, context, doctree) -> None:
    """Append the book's PDF to the theme's download menu (sphinx-book-theme builds it in
    ``context["header_buttons"]`` at priority 501; this runs after)."""
    if not getattr(app, "qkov_pdf", False):
        return
    for button in context.get("header_buttons", []):
        if button.get("label") == "download-buttons":
            button["buttons"].append({**BUTTON, "url": context["pathto"](PDF, 1)})


# LaTeX numbers every figure itself ("Fig. 5.1: ..."); the book names its figures instead
# (qkov_figures: C1, "Fig. 2 (reproduced)", the name starts each caption) and gives no figure a
# number, so the PDF's captions get no label either: one numbering, the same as the HTML's.
UNNUMBERED_FIGURES = r"""
\usepackage{caption}
\captionsetup[figure]{labelformat=empty}
"""


def _latex_preamble(app, config) -> None:
    elements = dict(config.latex_elements)
    elements["preamble"] = elements.get("preamble", "") + UNNUMBERED_FIGURES
    config.latex_elements = elements


TALL = 0.9  # a figure taller than this fraction of its width is drawn by height in the PDF


def _png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) of a PNG file, or None for another file."""
    try:
        return png_size(Path(path).read_bytes()[:24])
    except (OSError, ValueError):
        return None


class TallFiguresFitThePage(SphinxPostTransform):
    """In the PDF, a figure drawn for the book's column may be taller than a page once its
    caption is added (the heatmaps are 4 x 2): such a figure is given a height of
    ``TALL`` of the line width (keeping its aspect), so figure and caption fit."""

    default_priority = 200
    builders = ("latex",)

    def run(self, **kwargs):
        for image in self.document.findall(nodes.image):
            size = _png_size(Path(self.env.srcdir) / image["uri"].lstrip("/"))
            if size and size[1] > TALL * size[0] and "height" not in image:
                image["height"] = f"{100 * TALL:.0f}%"


def setup(app):
    app.add_post_transform(TallFiguresFitThePage)
    app.connect("env-before-read-docs", _check_latex_name)
    app.connect("builder-inited", _copy_pdf)
    app.connect("env-get-outdated", _relink)
    app.connect("html-page-context", add_pdf_button, priority=502)
    app.connect("config-inited", _latex_preamble)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
