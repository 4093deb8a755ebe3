"""The figures, from their specs: ``{qkov-figure} LABEL`` shows one with its downloads,
regenerate command, provenance, BibTeX and code; ``{qkov-fig}`LABEL``` cites it by its one
name ("Fig. 2 (reproduced)", or C1, C2, ... in book order); ``{qkov-gallery}`` and
``{qkov-figure-table}`` list all. Only whole canonical sets are shown."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import NamedTuple

from docutils import nodes
from docutils.parsers.rst import directives
from qkov_book import PAPER_KEY, citation, companion_bibtex
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx_external_toc.parsing import parse_toc_yaml

from qkov.artifacts import default_dir, not_canonical
from qkov.figures import module, specs
from qkov.sets import verify_set
from qkov.spec import DRAWING_FORMATS, Drawing, FigureSpec

logger = logging.getLogger(__name__)


class BookFigure(NamedTuple):
    spec: FigureSpec
    drawing: Drawing
    folder: Path
    name: str  # "Fig. 2 (reproduced)" or "C1"
    label: str  # its anchor, the id readers cite

    def file(self, suffix: str) -> Path:
        return self.folder / f"{self.drawing.stem}.{suffix}"

    def downloads(self, srcdir) -> list[tuple[str, Path]]:
        return [*((fmt.upper(), self.file(fmt)) for fmt in DRAWING_FORMATS),
                *((name, self.folder / name) for name in ("data.csv", *self.spec.tables,
                                                          "summary.json")),
                ("notebook", Path(srcdir, self.spec.notebook))]


def reproduction_name(reproduces: str, pipeline: bool = False) -> str:
    """"paper Fig. 2 (x)": "Fig. 2 (reproduced; x)", or "Fig. 2 (x; pipeline)" not run here."""
    base, _, extra = reproduces.removeprefix("paper ").partition(" (")
    base, extra = base[:1].upper() + base[1:], extra.removesuffix(")")
    if pipeline:
        return f"{base} ({extra + '; ' if extra else ''}pipeline)"
    return f"{base} (reproduced{'; ' + extra if extra else ''})"


def book_figures(srcdir) -> dict[str, BookFigure]:  # by page, then notebook, as _toc.yml lists them
    order = list(parse_toc_yaml(Path(srcdir) / "_toc.yml"))

    def position(spec):
        return (*(order.index(d) for d in (spec.page, spec.notebook.removesuffix(".ipynb"))),
                spec.id)

    figures, own = {}, 0
    for spec in sorted(specs().values(), key=position):
        for drawing in spec.drawings:
            own += drawing.reproduces is None
            name = (reproduction_name(drawing.reproduces, spec.needs_dataset)
                    if drawing.reproduces else f"C{own}")
            label = spec.label(drawing)
            figures[label] = BookFigure(spec, drawing, default_dir(spec.id, srcdir), name, label)
    return figures


def set_problems(srcdir) -> list[str]:  # each set the book shows not whole or not canonical
    problems = []
    for spec in specs().values():
        folder = default_dir(spec.id, srcdir)
        try:
            custom = folder.exists() and not_canonical(verify_set(folder).get("parameters", {}),
                                                       module(spec.id).Parameters.defaults())
        except ValueError as exc:  # not whole: a file missing or not as its digest says
            problems.append(str(exc))
            continue
        if custom:
            problems.append(f"{folder}: made with parameters other than the figure's defaults "
                            f"({', '.join(custom)}); move it away and regenerate the figure")
    return problems


def _verify_sets(app) -> None:
    for problem in set_problems(app.srcdir):
        logger.warning(f"the book cannot show this figure's files: {problem}")


def source_path(path: Path, srcdir) -> str:  # as Sphinx names a file ("/.." for one outside)
    return "/" + Path(os.path.relpath(Path(path).resolve(), Path(srcdir).resolve())).as_posix()


def ref_node(figure: BookFigure) -> nodes.Node:
    if figure.spec.needs_dataset:
        return nodes.Text(figure.name)
    return addnodes.pending_xref("", nodes.Text(figure.name), refdomain="std", reftype="ref",
                                 reftarget=figure.label, refexplicit=True, refwarn=True)


def download_line(figure: BookFigure, srcdir, full_size: str = "") -> str:  # Sphinx warns
    return f"{full_size}**Files:** " + " · ".join(
        f"{{download}}`{text} <{source_path(path, srcdir)}>`"
        for text, path in figure.downloads(srcdir)) + f" (figure id `{figure.label}`)"


class FigureDirective(SphinxDirective):
    """``{qkov-figure} LABEL`` (content: its caption); ``:echo:``, a copy linking the figure."""

    required_arguments = 1
    has_content = True
    option_spec = {"echo": directives.flag}

    def run(self):
        figures, srcdir, docname = book_figures(self.env.srcdir), self.env.srcdir, self.env.docname
        if (figure := figures.get(self.arguments[0])) is None:
            raise self.error(f"qkov-figure: unknown figure {self.arguments[0]!r}")
        svg, _ = self.env.relfn2path(source_path(figure.file("svg"), srcdir), docname)
        svg = "../" * docname.count("/") + "_downloads/" + self.env.dlfiles.add_file(docname, svg)
        node = nodes.figure("", nodes.reference("", "", nodes.image(
            uri=source_path(figure.file("png"), srcdir), alt=figure.drawing.alt),
            refuri=svg, classes=["qkov-full-size"]), classes=["qkov-figure"])
        parsed = nodes.Element()
        self.state.nested_parse(self.content, self.content_offset, parsed)
        caption = nodes.caption("", "", nodes.strong(text=figure.name + ". ",
                                                     classes=["qkov-headline"]),
                                *parsed.children[0].children)
        node += [caption, *[nodes.legend("", *parsed.children[1:])] * (len(parsed) > 1)]
        if "echo" in self.options:
            caption += [nodes.Text(" (Shown with its data and code as "), ref_node(figure),
                        nodes.Text(".)")]
            return [node]
        self.options["name"] = figure.label
        self.add_name(node)
        return [node, *self.parse_text_to_nodes(self.block(figure, svg))]

    def block(self, figure: BookFigure, svg: str) -> str:  # the downloads, then folded the rest
        if not (path := figure.folder / "summary.json").is_file():
            raise self.error(f"qkov-figure {figure.label}: no {path}: regenerate the figure")
        summary = json.loads(path.read_text())
        prov, srcdir, spec = summary["provenance"], self.env.srcdir, figure.spec
        source = f"lib/qkov/figures/{spec.module}.py"
        full_size = f'<a class="qkov-open-full" href="{svg}">Open full size</a> · '
        # One folded menu in the HTML; in the PDF a line to the figure's record in the appendix.
        return f"""
::::{{only}} latex
Data, code and provenance: {{ref}}`Figure records <{figure.label}-record>`.
::::

::::{{only}} html
:::{{container}} qkov-figure-info
:name: {figure.label}-info

<details class="qkov-details"><summary>Data and code</summary>

{download_line(figure, srcdir, full_size)}

**Regenerate** (from the repository root; the first line re-runs this run's parameters, the
second the notebook's defaults through the pipeline):

```bash
{papermill_command(figure, summary["parameters"])}
snakemake --cores 2 {spec.module}
```

**Provenance** (from summary.json): {provenance_text(prov, summary["parameters"])}

**Cite this figure** as {figure.label}, with the paper (its entry is on {{doc}}`/book/cite`):

```bibtex
{figure_bibtex(figure, prov, srcdir)}
```

**Code:** the notebook calls `qkov.figures.{spec.module}` ({{download}}`{source} </{source}>`);
the core of the library (the models, their gradient and training step, the reduced dynamics,
the language measures), shown from its source: {{doc}}`/book/core`.

</details>
:::
::::
"""


def figure_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    if (figure := book_figures(env.srcdir).get(text)) is None:
        logger.warning(f"qkov-fig: unknown figure {text!r}", location=(env.docname, lineno))
        return [nodes.Text(text)], []
    return [ref_node(figure)], []


def papermill_command(figure: BookFigure, parameters: dict) -> str:  # -p plain, -y the rest
    plain, structured = [], {}
    for name, value in parameters.items():
        if (name, value) in (("artifacts_dir", None), ("allow_long", False)):
            continue
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            plain += ["-p", name, str(value)]
        else:
            structured[name] = value
    return shlex.join(["papermill", figure.spec.notebook, f"{figure.spec.id}-run.ipynb", *plain,
                       *(["-y", json.dumps(structured)] if structured else [])])


def commit_text(prov: dict) -> str:  # the commit, and how the inputs stood against it
    changed = [what for what in ("library", "notebook") if prov.get(f"{what}_changed")]
    custom = prov.get("custom_parameters")
    state = "; ".join(filter(None, [
        prov.get("uncommitted_changes") and "uncommitted changes"
        + (f" ({', '.join(changed)})" if changed else ""),
        custom and "parameters other than the defaults: " + ", ".join(custom)]))
    return f"commit {(prov.get('commit') or 'unknown')[:12]}" + (f" with {state}" if state else "")


def provenance_text(prov: dict, parameters: dict) -> str:
    m = prov.get("machine", {})
    seeds = [f"{k} = {json.dumps(v)}" for k, v in parameters.items() if "seed" in k]
    return "; ".join([
        commit_text(prov) + f", qkov {prov.get('qkov_version')}",
        f"Python {prov.get('python')}, NumPy {prov.get('numpy')}, PyTorch {prov.get('torch')}",
        f"wall time {prov['wall_time_s']:.1f} s on {m.get('platform')} ({m.get('cpu_model')}, "
        f"{m.get('cpu_count')} CPUs, {m.get('torch_threads')} PyTorch threads, kernels "
        f"{m.get('torch_cpu_capability')}, MKL_CBWR {m.get('mkl_cbwr')}, {m.get('dtype')})",
        "seeds: " + "; ".join(seeds) if seeds else "no random seeds (deterministic)"]) + "."


def _unnumber_figures(app, env) -> list[str]:  # named, not numbered (equations keep theirs)
    for numbers in env.toc_fignumbers.values():
        numbers.pop("figure", None)
    return []


class GalleryDirective(SphinxDirective):  # each drawn figure: thumbnail, name, caption, downloads
    def run(self):
        for docname in self.env.found_docs:  # re-read when a page (a caption, a glued value) changes
            self.env.note_dependency(self.env.doc2path(docname))
        entries, here = [], Path(self.env.docname).parent
        for figure in book_figures(self.env.srcdir).values():
            if figure.spec.needs_dataset and not (figure.folder / "summary.json").is_file():
                continue  # not run where the book is built
            target = f":target: {os.path.relpath(figure.spec.page, here)}.html#{figure.label}"
            own = "" if figure.drawing.reproduces else " — the companion's own figure"
            [entry] = self.parse_text_to_nodes(f"""
::::{{container}} qkov-gallery-item
:name: gallery-{figure.label}

```{{image}} {source_path(figure.file("png"), self.env.srcdir)}
:alt: {figure.drawing.alt}
:class: qkov-thumbnail
{target * (not figure.spec.needs_dataset)}
```

**{{qkov-fig}}`{figure.label}`**{own}

<details class="qkov-details"><summary>Files</summary>

{download_line(figure, self.env.srcdir)}

</details>
::::
""")
            entry.insert(2, nodes.paragraph(classes=["qkov-gallery-caption"], qkov=figure.label))
            entries.append(entry)
        # The captions copied in may hold math: an empty formula makes Sphinx load MathJax.
        return [nodes.container("", *entries, classes=["qkov-gallery"]),
                nodes.paragraph("", "", nodes.math("", ""), classes=["qkov-hidden"])]


class GalleryCaptions(SphinxPostTransform):
    """Each figure's caption, from its chapter, before myst-nb fills in glued values (priority
    5); chapters and gallery are in book/, so the captions' relative links hold in both."""

    default_priority = 4

    def run(self, **kwargs):
        labels = self.env.get_domain("std").anonlabels
        for para in list(self.document.findall(lambda n: "qkov" in getattr(n, "attributes", ()))):
            if para["qkov"] in labels:
                docname, anchor = labels[para["qkov"]]
                caption = self.env.get_doctree(docname).ids[anchor].next_node(nodes.caption)
                para += [child.deepcopy() for child in caption.children[1:]]  # not its headline
            else:
                para += nodes.Text("Not shown on a page of the book: its notebook is stored "
                                   "without a figure (it needs a dataset).")


class FigureTableDirective(SphinxDirective):  # a row per spec, in book order
    def run(self):
        rows = [["figure id", "notebook", "reproduces", "reads", "needs a dataset"]]
        for figure in book_figures(self.env.srcdir).values():
            spec = figure.spec
            if figure.label == spec.id:
                rows.append([
                    spec.id if spec.needs_dataset else f"{{ref}}`{spec.id} <{spec.id}>`",
                    f"{{doc}}`{spec.notebook} </{spec.notebook[:-6]}>`",
                    "; ".join(f"`{spec.label(d)}`: " * (len(spec.drawings) > 1)
                              + (d.reproduces or "none (the companion's own)") for d in spec.drawings),
                    ", ".join(f"`{read}`" for read in spec.reads) or "nothing",
                    f"{{doc}}`yes </{spec.page}>`" if spec.needs_dataset else "no"])
        return self.parse_text_to_nodes(":::{list-table}\n:header-rows: 1\n:class: qkov-figure-table"
                                        "\n\n" + "".join("* - " + "\n  - ".join(row) + "\n"
                                                         for row in rows) + ":::")


def setup(app):
    app.add_js_file(None, body=Path(__file__).with_name("qkov_zoom.js").read_text())
    app.add_directive("qkov-figure", FigureDirective)
    app.add_directive("qkov-gallery", GalleryDirective)
    app.add_directive("qkov-figure-table", FigureTableDirective)
    app.add_directive("qkov-figure-records", FigureRecordsDirective)
    app.add_role("qkov-fig", figure_role)
    app.add_post_transform(GalleryCaptions)
    app.connect("builder-inited", _verify_sets)
    app.connect("env-get-updated", _unnumber_figures, priority=900)
    return {"env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}


def figure_bibtex(figure: BookFigure, prov: dict, srcdir) -> str:  # with its URL in the online book
    reproduces = figure.drawing.reproduces
    note = (f"Figure {figure.label}, " + (f"reproduces {reproduces} of" if reproduces
                                          else "the companion's own figure, on")
            + f" \\cite{{{PAPER_KEY}}}; " + commit_text(prov).replace("_", "\\_"))  # (LaTeX)
    url = f"{citation(srcdir)['url'].rstrip('/')}/{figure.spec.page}.html#{figure.label}"
    return companion_bibtex(citation(srcdir), figure.label, url, note)


class FigureRecordsDirective(SphinxDirective):
    """``{qkov-figure-records}``: every figure the book shows, in book order, compactly: its
    name and id, its provenance in one line and its BibTeX (the PDF's appendix, where the
    chapters only point to it; the HTML folds the same below each figure)."""

    def run(self):
        srcdir, text = self.env.srcdir, []
        for figure in book_figures(srcdir).values():
            if not (path := figure.folder / "summary.json").is_file():
                continue  # not run where the book is built (needs a dataset), so not shown
            self.env.note_dependency(str(path))
            summary = json.loads(path.read_text())
            prov = summary["provenance"]
            text.append(f"({figure.label}-record)=\n**{{qkov-fig}}`{figure.label}`** "
                        f"(`{figure.label}`): {provenance_text(prov, summary['parameters'])}\n\n"
                        f"```bibtex\n{figure_bibtex(figure, prov, srcdir)}\n```\n")
        small = r"\begingroup\footnotesize\fvset{fontsize=\footnotesize}", r"\endgroup"  # (LaTeX)
        return [nodes.raw("", small[0], format="latex"),
                *self.parse_text_to_nodes("\n".join(text)), nodes.raw("", small[1], format="latex")]
