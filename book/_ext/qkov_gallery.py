"""``{qkov-gallery}`` shows every figure as a thumbnail with its name, id, caption and
links (to the figure in its chapter); ``{qkov-figure-table}`` a table of the figures (id,
notebook, what it reproduces, what it reads of other figures, whether it needs a dataset,
linked to the page that says where to get it); both in the book's order, so a new figure
needs no edit of either page. A figure whose spec says ``needs_dataset`` and whose
``summary.json`` is absent (its data cannot be downloaded where the book is built; its
notebook is stored without a figure) is in the table but not in the gallery.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from qkov_figure_info import _links
from qkov_figures import _book_figures, _FigureLink, ordered_specs, toc_order
from qkov_nodes import _doc_link, _literal, _source_path, _table
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective


class _FigureCaption(nodes.General, nodes.Element):
    """A gallery entry's caption, copied from its figure once every page has been read."""


class GalleryCaptions(SphinxPostTransform):
    """Copy each figure's caption into its gallery entry before myst-nb fills in glued
    values (its ReplacePendingGlueReferences runs at priority 5), so that the copied
    references are filled in too. The chapters and the gallery are pages of one folder
    (book/), so the captions' relative references to the notebooks hold in both."""

    default_priority = 4

    def run(self, **kwargs):
        store = getattr(self.env, "qkov_figures", {})
        for node in list(self.document.findall(_FigureCaption)):
            shown = store.get(node["label"])
            para = nodes.paragraph(classes=["qkov-gallery-caption"])
            if shown is None:
                para += nodes.Text("Not shown on a page of the book: its notebook is stored "
                                   "without a figure (it needs a dataset).")
            else:
                para += [child.deepcopy() for child in shown["caption"]]
            node.replace_self(para)


def _listed_on(env) -> None:
    """Note the page being read as one that lists figures of other pages."""
    env.__dict__.setdefault("qkov_gallery_docs", set()).add(env.docname)


class GalleryDirective(SphinxDirective):
    """``{qkov-gallery}``: every figure that has been drawn as a thumbnail with its label,
    caption and links, in the book's order."""

    def run(self):
        _listed_on(self.env)
        srcdir = Path(self.env.srcdir)
        entries = []
        for figure in _book_figures(self.env).values():
            if not figure.drawn:
                continue
            entry = nodes.container(classes=["qkov-gallery-item"], ids=[f"gallery-{figure.label}"])
            image = nodes.image(uri=_source_path(figure.folder / f"{figure.stem}.png", srcdir),
                                alt=figure.alt, classes=["qkov-thumbnail"])
            entry += _FigureLink("", image, label=figure.label,
                                 optional=figure.spec.needs_dataset)
            title = nodes.paragraph(classes=["qkov-gallery-title"])
            title += _FigureLink("", nodes.strong(text=figure.name), label=figure.label,
                                 optional=figure.spec.needs_dataset)
            if not figure.reproduces:
                title += nodes.Text(" — the companion's own figure")
            entry += title
            entry += _FigureCaption(label=figure.label)
            entry += _links(figure, srcdir, self.env.docname, self.lineno)
            entries.append(entry)
        # The captions, copied in when pages are written, may hold math: an empty formula
        # makes Sphinx load MathJax on this page (it decides from what it read).
        marker = nodes.math("", "")
        return [nodes.container("", *entries, classes=["qkov-gallery"]),
                nodes.paragraph("", "", marker, classes=["qkov-hidden"])]


class FigureTableDirective(SphinxDirective):
    """``{qkov-figure-table}``: one row per figure spec, in the book's order: its id (a link
    to the figure where the book shows it), its notebook, what each of its drawings
    reproduces, the files of other figures it reads, whether it needs a dataset."""

    HEADER = ["figure id", "notebook", "reproduces", "reads", "needs a dataset"]

    def run(self):
        _listed_on(self.env)
        docname = self.env.docname
        rows = []
        for spec in ordered_specs(toc_order(self.env.config)):
            figure_id = _FigureLink("", _literal(spec.id), label=spec.id,
                                    optional=spec.needs_dataset)
            notebook = _doc_link(spec.notebook.removesuffix(".ipynb"), docname,
                                 _literal(spec.notebook))
            reproduces = []
            for drawing in spec.drawings:
                what = drawing.reproduces or "none (the companion's own)"
                if len(spec.drawings) == 1:
                    reproduces.append(nodes.Text(what))
                    continue
                if reproduces:
                    reproduces.append(nodes.Text("; "))
                reproduces += [_literal(spec.label(drawing)), nodes.Text(f": {what}")]
            reads = []
            for k, read in enumerate(spec.reads):
                reads += [nodes.Text(", ")] * bool(k) + [_literal(read)]
            dataset = (_doc_link(spec.page, docname, nodes.Text("yes"))  # where to get it
                       if spec.needs_dataset else "no")
            rows.append([figure_id, notebook, reproduces, reads or "nothing", dataset])
        table = _table(self.HEADER, rows)
        table["classes"] += ["qkov-figure-table"]
        return [table]


def _gallery_outdated(app, env, added, changed, removed) -> list[str]:
    """The gallery and the figure table show other pages' figures: re-read them whenever a
    page changes."""
    return sorted(getattr(env, "qkov_gallery_docs", set())) if added | changed | removed else []


def _merge_listing_pages(app, env, docnames, other) -> None:
    env.__dict__.setdefault("qkov_gallery_docs", set()).update(
        getattr(other, "qkov_gallery_docs", set()) & set(docnames))


def setup(app):
    app.add_directive("qkov-gallery", GalleryDirective)
    app.add_directive("qkov-figure-table", FigureTableDirective)
    app.add_node(_FigureCaption)
    app.add_post_transform(GalleryCaptions)
    app.connect("env-get-outdated", _gallery_outdated)
    app.connect("env-merge-info", _merge_listing_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
