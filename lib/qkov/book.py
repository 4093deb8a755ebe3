"""A Sphinx extension for the book: serve MathJax from the book itself.

Jupyter Book loads MathJax from a CDN by default, so an offline reader sees raw TeX. The
``django-static-mathjax`` wheel carries MathJax 3 (pinned in pyproject.toml); this extension
copies its self-contained ``tex-svg-full.js`` (all TeX extensions and the SVG font in one
file, nothing loaded later) into ``_static/mathjax/`` and points Sphinx at it.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

MATHJAX_FILE = "tex-svg-full.js"
MATHJAX_PATH = f"mathjax/{MATHJAX_FILE}"  # relative to _static/, as Sphinx reads it


def mathjax_source() -> Path:
    source = resources.files("mathjax") / "static" / "mathjax" / "es5" / MATHJAX_FILE
    if not source.is_file():
        raise FileNotFoundError(
            f"{source} is missing: install the book's dependencies with "
            "`pip install -e '.[dev]'` (django-static-mathjax)"
        )
    return Path(str(source))


def _use_local_mathjax(app, config) -> None:
    config.mathjax_path = MATHJAX_PATH


def _copy_mathjax(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / MATHJAX_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(mathjax_source(), target)


def setup(app):
    mathjax_source()  # fail at start, not after a long build, if MathJax is not installed
    app.connect("config-inited", _use_local_mathjax, priority=900)
    app.connect("build-finished", _copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
