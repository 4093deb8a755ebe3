"""The book's static files: MathJax served from the book, and the book's stylesheet.

Jupyter Book loads MathJax from a CDN by default, so an offline reader sees raw TeX. The
``django-static-mathjax`` wheel carries MathJax 3 (pinned in pyproject.toml); this extension
copies its self-contained ``tex-svg-full.js`` (all TeX extensions and the SVG font in one
file, nothing loaded later) into ``_static/mathjax/`` and points Sphinx at it. The book's
own styles are ``book/_ext/qkov.css``, copied into ``_static/`` and added to every page.

The book's extensions live with the book (``book/_ext``), not in the science library;
``_config.yml`` loads each with ``sphinx: local_extensions``. Every file they read is found
from the book's source folder (``app.srcdir``, the repository root that holds
``_config.yml``), so the build does not depend on where the ``qkov`` library is installed:
``qkov_records`` (measured records), ``qkov_tables`` (printed tables from their data),
``qkov_figures`` (the figures' names, images and links), ``qkov_figure_info`` (the block
below each figure), ``qkov_gallery`` (the gallery and the table of figures), ``qkov_cite``
(BibTeX), ``qkov_pdf`` and ``qkov_explorer``.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

HERE = Path(__file__).resolve().parent  # book/_ext: this extension and its stylesheet
CSS_FILE = "qkov.css"
MATHJAX_FILE = "tex-svg-full.js"
MATHJAX_PATH = f"mathjax/{MATHJAX_FILE}"  # relative to _static/, as Sphinx reads it


def mathjax_source() -> Path:
    source = resources.files("mathjax") / "static" / "mathjax" / "es5" / MATHJAX_FILE
    if not source.is_file():
        raise FileNotFoundError(
            f"{source} is missing: install the book's dependencies with "
            "`pip install -e '.[book]'` (django-static-mathjax)"
        )
    return Path(str(source))


def _use_local_mathjax(app, config) -> None:
    config.mathjax_path = MATHJAX_PATH


def _copy_static(app, exception) -> None:
    """MathJax and the book's stylesheet into ``_static/``."""
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    for source, target in ((mathjax_source(), static / MATHJAX_PATH),
                           (HERE / CSS_FILE, static / CSS_FILE)):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def setup(app):
    mathjax_source()  # fail at start, not after a long build, if MathJax is not installed
    app.add_css_file(CSS_FILE)
    app.connect("config-inited", _use_local_mathjax, priority=900)
    app.connect("build-finished", _copy_static)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
