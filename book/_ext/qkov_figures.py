"""The figures as the book shows them, made from the figures' specs
(``qkov.figures.specs()``: one ``FigureSpec`` per figure module).

Every drawing of every spec (``figure.png``, labelled by the figure's id, and each extra
``Drawing``, ``figure-<name>.png``, labelled ``<id>-<name>``) has one name in the book:
"Fig. 2 (reproduced)" for a drawing that reproduces one of the paper's
(``Drawing.reproduces``), C1, C2, ... for the companion's own, in book order (the page that
shows each, then its notebook, as ``_toc.yml`` lists them). Sphinx's own figure numbers are
removed, so no other numbering competes; equations keep theirs. A chapter shows a drawing
where its text discusses it with ``{qkov-figure} LABEL`` (the caption as content; the image
is the figure's PNG, with the spec's alt text, opening its SVG when clicked) and cites it
with ``{qkov-fig}`LABEL``` (a link titled by its name). The files are read from
``$QKOV_ARTIFACTS/<figure-id>/`` when that is set (the tests), else from
``artifacts/<figure-id>/`` of the source folder; a canonical set that is not whole or not
at the figure's defaults fails the strict build.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from qkov_nodes import _source_path
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from qkov.artifacts import default_dir, not_canonical
from qkov.figures import module, specs
from qkov.sets import verify_set
from qkov.spec import DRAWING_FORMATS, Drawing, FigureSpec

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BookFigure:
    """One drawing of a figure as the book shows it: ``label`` (its anchor and the id
    readers cite, ``spec.label(drawing)``) and ``folder``, where its files are."""

    spec: FigureSpec
    drawing: Drawing
    folder: Path
    name: str = ""  # what the book calls it: "Fig. 2 (reproduced)" or "C1" (book_figures)

    @property
    def label(self) -> str:
        return self.spec.label(self.drawing)

    @property
    def stem(self) -> str:
        return self.drawing.stem

    @property
    def reproduces(self) -> str | None:
        """The paper figure it reproduces ("paper Fig. 2"), or None: the companion's own."""
        return self.drawing.reproduces

    @property
    def alt(self) -> str:
        """What the figure shows, in words, for readers who cannot see it."""
        return getattr(self.drawing, "alt", "") or f"figure {self.label}"

    @property
    def module_file(self) -> str:
        """Its figure module's file, relative to the repository root."""
        return f"lib/qkov/figures/{self.spec.module}.py"

    @property
    def drawn(self) -> bool:
        """Whether the book has its files to show: always, except for a figure that needs
        a dataset (which cannot be downloaded where the book is built) and was not run."""
        return not self.spec.needs_dataset or (self.folder / "summary.json").is_file()

    def downloads(self, srcdir: Path) -> list[tuple[str, Path]]:
        """(text, file) of every file a reader may want; ``srcdir``: the book's source."""
        files = [(fmt.upper(), self.folder / f"{self.stem}.{fmt}") for fmt in DRAWING_FORMATS]
        files += [(name, self.folder / name) for name in ("data.csv", *self.spec.tables)]
        files += [("summary.json", self.folder / "summary.json"),
                  ("notebook", Path(srcdir) / self.spec.notebook)]
        return files


def toc_order(config) -> list[str]:
    """The book's documents in reading order (the ``_toc.yml`` that sphinx-external-toc
    parsed into ``config.external_site_map``); [] without one."""
    site_map = getattr(config, "external_site_map", None)
    if site_map is None:
        return []
    order: list[str] = []

    def walk(docname: str) -> None:
        if docname in order or docname not in site_map:
            return
        order.append(docname)
        for tree in site_map[docname].subtrees:
            for child in tree.files():
                walk(child)

    walk(site_map.root.docname)
    return order


def ordered_specs(order: list[str]) -> list[FigureSpec]:
    """Every spec, in the book's order: by where the page that shows it stands in ``order``,
    then its notebook; figures the book does not list last, by id."""
    def position(spec: FigureSpec) -> tuple[int, int, str]:
        where = [order.index(d) if d in order else len(order)
                 for d in (spec.page, spec.notebook.removesuffix(".ipynb"))]
        return (*where, spec.id)

    return sorted(specs().values(), key=position)


def book_figures(srcdir: Path, order: list[str]) -> dict[str, BookFigure]:
    """Every drawing of every spec, by label, in the book's order (``order``: the documents
    in reading order, :func:`toc_order`); a figure's main drawing first, then its others."""
    # $QKOV_ARTIFACTS when set (the tests: nbval writes there), else the source's artifacts/.
    figures, own = {}, 0
    for spec in ordered_specs(list(order)):
        for drawing in spec.drawings:
            own += drawing.reproduces is None
            name = (reproduction_name(drawing.reproduces, spec.needs_dataset)
                    if drawing.reproduces else f"C{own}")
            figures[spec.label(drawing)] = BookFigure(spec, drawing, default_dir(spec.id, srcdir),
                                                      name)
    return figures


def reproduction_name(reproduces: str, pipeline: bool = False) -> str:
    """The book's name for a drawing that reproduces one of the paper's: "paper Fig. 2" is
    "Fig. 2 (reproduced)", "paper Fig. 2 (its spread over seeds)" is "Fig. 2 (reproduced;
    its spread over seeds)"; with ``pipeline`` (its data cannot be had where the book is
    built, so nothing was reproduced here) "Section 5 (HateXplain; pipeline)". The
    companion's own figures are C1, C2, ... in book order."""
    base, _, extra = reproduces.removeprefix("paper ").partition(" (")
    base, extra = f"{base[:1].upper()}{base[1:]}", extra.removesuffix(")")
    if pipeline:
        return f"{base} ({extra + '; ' if extra else ''}pipeline)"
    return f"{base} (reproduced{'; ' + extra if extra else ''})"


def _book_figures(env) -> dict[str, BookFigure]:
    return book_figures(Path(env.srcdir), toc_order(env.config))


def set_problems(srcdir: Path) -> list[str]:
    """What is wrong with the figures' canonical sets the book would show: a set that is not
    whole (a file missing or differing from the digest its summary.json records) or whose
    parameters are not the figure's defaults (input paths aside; such a run belongs in a run
    folder). A figure that was not run is no problem here (its page says so)."""
    problems = []
    for spec in specs().values():
        folder = default_dir(spec.id, srcdir)
        if not folder.exists():
            continue
        try:
            summary = verify_set(folder)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        custom = not_canonical(summary.get("parameters", {}),
                               module(spec.id).Parameters.defaults())
        if custom:
            problems.append(f"{folder}: made with parameters other than the figure's defaults "
                            f"({', '.join(custom)}), so it is not the figure; move it away and "
                            "regenerate the figure (make figures; a figure that needs a "
                            f"dataset: its notebook with -p artifacts_dir {folder})")
    return problems


def _verify_sets(app) -> None:
    """A warning per canonical set that is not whole or not at the defaults: the strict
    build (-W, as `make book` and the tests build) then refuses to finish, and with
    --keep-going reports every problem of the book at once."""
    for problem in set_problems(Path(app.srcdir)):
        logger.warning(f"the book cannot show this figure's files: {problem}")


def read_summary(path: Path) -> dict:
    """A figure's summary.json; a clear error naming the file if it is not one."""
    try:
        summary = json.loads(Path(path).read_text())
        summary["parameters"], summary["provenance"]  # noqa: B018 (both must be there)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is missing or not a figure summary ({exc!r}); "
                         "regenerate the figure (see the reproducibility page)") from exc
    return summary


class FigureDirective(SphinxDirective):
    """``{qkov-figure} LABEL`` with the caption as content: the figure where a chapter
    discusses it, from its files in the figure's folder (the PNG, with the spec's alt
    text). The figure gets the label as its name, so FigureBlocks gives it its headline and
    info block. With ``:echo:`` it is a copy shown elsewhere (the introduction): no name and
    no block, and the caption ends with a link to the figure in its chapter."""

    required_arguments = 1
    has_content = True
    option_spec = {"echo": directives.flag}

    def run(self):
        label = self.arguments[0]
        figures = _book_figures(self.env)
        if label not in figures:
            raise self.error(f"qkov-figure: unknown figure {label!r}; expected one of "
                             f"{', '.join(figures)}")
        figure = figures[label]
        if not figure.drawn:
            note = nodes.admonition(classes=["note"])
            note += nodes.title(text=f"{figure.name}: not run here")
            note += nodes.paragraph(text="It needs a dataset that cannot be downloaded where "
                                    "the book is built; its notebook says how to run it.")
            return [note]
        png = figure.folder / f"{figure.stem}.png"
        node = nodes.figure(classes=["qkov-figure"])
        node += nodes.image(uri=_source_path(png, Path(self.env.srcdir)), alt=figure.alt)
        caption = nodes.caption()
        parsed = nodes.Element()
        self.state.nested_parse(self.content, self.content_offset, parsed)
        paragraphs = list(parsed.children)
        if not paragraphs or not isinstance(paragraphs[0], nodes.paragraph):
            raise self.error(f"qkov-figure {label}: expected a caption paragraph as content")
        caption += paragraphs[0].children
        node += caption
        if len(paragraphs) > 1:
            node += nodes.legend("", *paragraphs[1:])
        if "echo" in self.options:
            caption.insert(0, nodes.strong(text=figure.name + ". "))
            caption += [nodes.Text(" Its files, provenance and citation: "),
                        _FigureLink("", nodes.Text(figure.name), label=label, optional=False),
                        nodes.Text(".")]
        else:
            self.options["name"] = label
            self.add_name(node)
        node.line = self.lineno
        return [node]


def figure_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{qkov-fig}`LABEL``: a link to a figure, titled by its name ("Fig. 2 (reproduced)",
    "C3"), the one way the book numbers figures."""
    env = inliner.document.settings.env
    figures = _book_figures(env)
    if text not in figures:
        logger.warning(f"qkov-fig: unknown figure {text!r}; expected one of "
                       f"{', '.join(figures)}", location=(env.docname, lineno))
        return [nodes.Text(text)], []
    figure = figures[text]
    return [_FigureLink("", nodes.Text(figure.name), label=text,
                        optional=figure.spec.needs_dataset)], []


def _unnumber_figures(app, env) -> list[str]:
    """Sphinx numbers figures by section ("3.1"); the book names them instead (C1, "Fig. 2
    (reproduced)"), so no figure gets a Sphinx number: one numbering. Equations keep theirs.
    (Sphinx recomputes the numbers on every build and, finding them changed, rewrites the
    pages with figures: harmless.)"""
    for numbers in env.toc_fignumbers.values():
        numbers.pop("figure", None)
    return []


class _FigureLink(nodes.General, nodes.Element):
    """A link to a figure, resolved once every page has been read. ``optional``: a figure
    that may be shown on no page (it needs a dataset): then plain text, not a warning."""


def _resolve_figure_links(app, doctree, docname) -> None:
    """Links to figures and gallery captions; a figure image that opens its SVG when
    clicked."""
    from sphinx.util.osutil import relative_uri

    store = getattr(app.env, "qkov_figures", {})
    for node in list(doctree.findall(_FigureLink)):
        label = node["label"]
        if label not in store:
            if not node.get("optional"):
                logger.warning(f"figure {label} is not shown on any page of the book",
                               location=(docname, node.line or 0))
            node.replace_self(node.children)
            continue
        uri = app.builder.get_relative_uri(docname, store[label]["docname"]) + "#" + label
        node.replace_self(nodes.reference("", "", *node.children, refuri=uri,
                                          internal=True))
    if app.builder.format != "html":
        return
    figures = _book_figures(app.env)
    for figure_node in doctree.findall(nodes.figure):
        labels = [n for n in figure_node["names"] if n in figures]
        image = figure_node.next_node(nodes.image)
        if not labels or image is None or isinstance(image.parent, nodes.reference):
            continue
        figure = figures[labels[0]]
        svg = _source_path(figure.folder / f"{figure.stem}.svg", Path(app.srcdir))
        for ref in doctree.findall(addnodes.download_reference):
            if ref["reftarget"] == svg and "filename" in ref:
                dlpath = relative_uri(app.builder.get_target_uri(docname), "_downloads")
                link = nodes.reference("", "", refuri=f"{dlpath}/{ref['filename']}",
                                       classes=["qkov-full-size"])
                image.replace_self(link)
                link += image
                _add_full_size_link(doctree, figure.label, link["refuri"])
                break


def _add_full_size_link(doctree, label: str, uri: str) -> None:
    """A visible "Open full size" link (the SVG, opened in the browser, not downloaded) in
    the figure's download line, after its id."""
    for para in doctree.findall(nodes.paragraph):
        if "qkov-downloads" in para["classes"] and f"{label}-info" in para.parent["ids"]:
            para.insert(1, nodes.Text(" · "))
            para.insert(1, nodes.reference("", "Open full size", refuri=uri,
                                           classes=["qkov-open-full"]))
            para.insert(1, nodes.Text(" "))
            return


def _purge_figures(app, env, docname) -> None:
    store = getattr(env, "qkov_figures", {})
    for label in [k for k, v in store.items() if v["docname"] == docname]:
        del store[label]


def _merge_figures(app, env, docnames, other) -> None:
    env.__dict__.setdefault("qkov_figures", {}).update(
        {k: v for k, v in getattr(other, "qkov_figures", {}).items() if v["docname"] in docnames})


def setup(app):
    app.add_directive("qkov-figure", FigureDirective)
    app.add_role("qkov-fig", figure_role)
    app.add_node(_FigureLink)
    app.connect("builder-inited", _verify_sets)
    app.connect("doctree-resolved", _resolve_figure_links)
    app.connect("env-purge-doc", _purge_figures)
    app.connect("env-merge-info", _merge_figures)
    app.connect("env-get-updated", _unnumber_figures, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
