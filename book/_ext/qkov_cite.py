"""``{qkov-citation}``: the BibTeX of the paper (from the book's bibliography) and of the
companion (from ``CITATION.cff``); the BibTeX of each figure is made here too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from qkov_nodes import _code
from sphinx.util.docutils import SphinxDirective

if TYPE_CHECKING:
    from qkov_figures import BookFigure

CITATION_FILE = "CITATION.cff"  # relative to the book's source folder
PAPER_KEY = "vashisht26a"


def citation(srcdir: Path) -> dict:
    """``CITATION.cff`` of the book's source folder."""
    import yaml

    return yaml.safe_load((Path(srcdir) / CITATION_FILE).read_text())


def bibliography(env) -> list[Path]:
    """The book's BibTeX files (``bibtex_bibfiles`` of ``_config.yml``)."""
    return [Path(env.srcdir) / name for name in env.config.bibtex_bibfiles]


def paper_bibtex(bibfiles: list[Path]) -> str:
    """The paper's entry of the book's bibliography, verbatim."""
    for path in bibfiles:
        match = re.search(rf"@\w+\{{{PAPER_KEY},.*?\n\}}", Path(path).read_text(), re.S)
        if match is not None:
            return match.group(0)
    raise ValueError(f"{', '.join(map(str, bibfiles))}: no entry {PAPER_KEY}")


def _bibtex_names(authors: list[dict]) -> str:
    return " and ".join("{" + a["name"] + "}" if "name" in a
                        else f"{a['family-names']}, {a['given-names']}" for a in authors)


def companion_bibtex(cff: dict, figure: BookFigure | None = None, page: str = "",
                     commit: str | None = None, state: str = "") -> str:
    """BibTeX for the companion (from CITATION.cff), or for one of its figures: then the
    url is the figure's anchor in the published book and the note names the commit."""
    url = cff["url"].rstrip("/") + "/"
    fields = {"author": _bibtex_names(cff["authors"]), "title": cff["title"],
              "version": cff["version"], "url": url, "howpublished": f"\\url{{{url}}}"}
    key = "qkov"
    if figure is not None:
        key = "qkov-" + figure.label
        fields["url"] = f"{url}{page}#{figure.label}"
        fields["howpublished"] = f"\\url{{{fields['url']}}}"
        fields["title"] = f"{cff['title']}: figure {figure.label}"
        what = (f"reproduces {figure.reproduces} of \\cite{{{PAPER_KEY}}}" if figure.reproduces
                else f"the companion's own figure, on \\cite{{{PAPER_KEY}}}")
        fields["note"] = (f"Figure {figure.label}, {what}; commit {(commit or 'unknown')[:12]}"
                          + (f" with {state}" if state else ""))
    if "repository-code" in cff:
        fields["note"] = "; ".join(filter(None, [fields.get("note"),
                                                 f"code: {cff['repository-code']}"]))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields.items())
    return f"@misc{{{key},\n{body}\n}}"


class CitationDirective(SphinxDirective):
    """``{qkov-citation}``: BibTeX for the paper and for the companion."""

    def run(self):
        srcdir = Path(self.env.srcdir)
        bibfiles = bibliography(self.env)
        for path in (srcdir / CITATION_FILE, *bibfiles):
            self.env.note_dependency(str(path))
        return [_code(paper_bibtex(bibfiles), "bibtex"),
                _code(companion_bibtex(citation(srcdir)), "bibtex")]


def _repository_from_citation(app, config) -> None:
    """The repository link and the launch buttons point at CITATION.cff's repository-code,
    the one place the repository's URL is written (Jupyter Book would need it typed in
    _config.yml too, and refuses a repository button without it there, so _config.yml turns
    the button off and this turns it on)."""
    options = config.html_theme_options
    options["repository_url"] = citation(app.srcdir)["repository-code"]
    options["use_repository_button"] = True


def setup(app):
    app.add_directive("qkov-citation", CitationDirective)
    app.connect("config-inited", _repository_from_citation)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
