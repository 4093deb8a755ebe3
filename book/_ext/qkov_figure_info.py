"""The block below every figure of the book: its name at the head of the caption, then its
id, an "Open full size" link and the download links (PNG, PDF, SVG, ``data.csv`` and the
spec's ``tables``, ``summary.json``, the notebook) on one line, and folded below them the
command that regenerates it, its provenance read from ``summary.json``, its BibTeX (the
paper's entry is on the citing page, once) and a "Code:" line naming the figure's module
and linking the page that shows the core of the library it builds on (``book/core``). A
missing file fails the strict build with a warning that names the page and the file.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from docutils import nodes
from qkov_cite import citation, companion_bibtex
from qkov_figures import BookFigure, _book_figures, read_summary
from qkov_nodes import _code, _doc_link, _download
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

CORE_PAGE = "book/core"  # the page that shows the library's core, linked from every figure
CITE_PAGE = "book/cite"  # the page with the paper's BibTeX, linked from every figure

logger = logging.getLogger(__name__)


def papermill_command(figure: BookFigure, parameters: dict) -> str:
    """The papermill line that re-runs the figure's notebook with ``parameters`` (those of
    the shown run): numbers and text as ``-p``, lists, booleans and None as one ``-y``."""
    plain, structured = [], {}
    for name, value in parameters.items():
        if (name, value) in (("artifacts_dir", None), ("allow_long", False)):
            continue  # the default folder; no long run to allow
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            plain += ["-p", name, str(value)]
        else:
            structured[name] = value
    words = ["papermill", figure.spec.notebook, f"{figure.spec.id}-run.ipynb", *plain]
    if structured:
        words += ["-y", json.dumps(structured)]  # JSON is YAML
    return shlex.join(words)


def snakemake_command(figure: BookFigure) -> str:
    """The Snakefile's rule of the figure: one per spec, named by its module."""
    return f"snakemake --cores 2 {figure.spec.module}"


def input_state(prov: dict, names: bool = True) -> str:
    """How the run's inputs stood against its commit, in words ("" when they were the
    commit's): uncommitted changes to the code, parameters other than the defaults (named
    when ``names``; BibTeX gets no names, whose underscores LaTeX would reject)."""
    words = []
    if prov.get("uncommitted_changes"):
        changed = [what for what, key in (("library", "library_changed"),
                                          ("notebook", "notebook_changed")) if prov.get(key)]
        words.append("uncommitted changes" + (f" ({', '.join(changed)})" if changed else ""))
    if prov.get("custom_parameters"):
        words.append("parameters other than the defaults"
                     + (": " + ", ".join(prov["custom_parameters"]) if names else ""))
    return "; ".join(words)


def provenance_text(summary: dict) -> str:
    """One sentence of what produced the run, from its summary.json."""
    prov, params = summary["provenance"], summary["parameters"]
    commit = (prov.get("commit") or "unknown")[:12]
    state = input_state(prov)
    machine = prov.get("machine", {})
    seeds = [f"{k} = {json.dumps(v)}" for k, v in params.items() if "seed" in k]
    parts = [
        f"commit {commit}" + (f" with {state}" if state else "")
        + f", qkov {prov.get('qkov_version')}",
        f"Python {prov.get('python')}, NumPy {prov.get('numpy')}, PyTorch {prov.get('torch')}",
        f"wall time {prov['wall_time_s']:.1f} s on {machine.get('platform')} "
        f"({machine.get('cpu_model', machine.get('processor'))}, {machine.get('cpu_count')} CPUs, "
        f"{machine.get('torch_threads')} PyTorch threads, "
        f"kernels {machine.get('torch_cpu_capability')}, MKL_CBWR {machine.get('mkl_cbwr')}, "
        f"{machine.get('dtype')})",
        "seeds: " + "; ".join(seeds) if seeds else "no random seeds (deterministic)",
    ]
    return "; ".join(parts) + "."


def _links(figure: BookFigure, srcdir: Path, docname: str, line: int) -> nodes.paragraph:
    """Download links; a missing file is a warning (so a strict build fails) naming it."""
    para = nodes.paragraph(classes=["qkov-downloads"])
    para += nodes.literal(figure.label, figure.label)
    para += nodes.strong(text=" Download: ")
    for k, (text, path) in enumerate(figure.downloads(srcdir)):
        if k:
            para += nodes.Text(" · ")
        if path.is_file():
            para += _download(text, path, srcdir)
        else:
            logger.warning(f"figure {figure.label}: {path} is missing; regenerate it with "
                           f"`{snakemake_command(figure)}`", location=(docname, line))
            para += nodes.Text(f"{text} (missing)")
    return para


def code_line(figure: BookFigure, srcdir: Path, docname: str, line: int = 0) -> nodes.paragraph:
    """"Code:" the figure's module (its file, to download) and the page of the core it uses."""
    module, path = f"qkov.figures.{figure.spec.module}", Path(srcdir) / figure.module_file
    para = nodes.paragraph(classes=["qkov-code-line"])
    para += nodes.strong(text="Code: ")
    para += nodes.Text("the notebook calls ")
    para += nodes.literal(module, module)
    para += nodes.Text(" (")
    if path.is_file():
        para += _download(figure.module_file, path, srcdir)
    else:
        logger.warning(f"figure {figure.label}: its module {path} is missing",
                       location=(docname, line))
        para += nodes.literal(figure.module_file, figure.module_file)
    para += nodes.Text("); the core of the library (the models, their gradient and training "
                       "step, the reduced dynamics, the language measures), shown from its "
                       "source: ")
    para += _doc_link(CORE_PAGE, docname)
    para += nodes.Text(".")
    return para


class _Details(nodes.General, nodes.Element):
    """A block folded under a one-line summary (HTML ``<details>``; other builders show
    its content as it is)."""


def _visit_details_html(self, node):
    self.body.append(f'<details class="qkov-details"><summary>{node["summary"]}</summary>')


def _depart_details_html(self, node):
    self.body.append("</details>")


def _pass(self, node):
    pass


def figure_info(figure: BookFigure, env, page: str, line: int = 0) -> nodes.container:
    """The block below a figure: the downloads on one line; the regenerate command,
    provenance, citation and code folded below it."""
    srcdir, docname = Path(env.srcdir), env.docname
    box = nodes.container(classes=["qkov-figure-info"], ids=[f"{figure.label}-info"])
    box += _links(figure, srcdir, docname, line)
    details = _Details(summary="Regenerate, provenance, cite, code")
    box += details
    summary_path = figure.folder / "summary.json"
    try:
        summary = read_summary(summary_path)
    except ValueError as exc:
        if summary_path.is_file():  # a missing one is reported with the downloads
            logger.warning(f"figure {figure.label}: {exc}", location=(docname, line))
        details += code_line(figure, srcdir, docname, line)
        return box
    details += nodes.paragraph("", "", nodes.strong(text="Regenerate "),
                               nodes.Text("(from the repository root; the first line re-runs "
                                          "this run's parameters, the second the notebook's "
                                          "defaults through the pipeline):"))
    details += _code(papermill_command(figure, summary["parameters"]) + "\n"
                     + snakemake_command(figure), "bash")
    details += nodes.paragraph("", "", nodes.strong(text="Provenance "),
                               nodes.Text("(from summary.json): " + provenance_text(summary)))
    details += nodes.paragraph("", "", nodes.strong(text="Cite this figure "),
                               nodes.Text(f"as {figure.label}, together with the paper (its "
                                          "entry is on "), _doc_link(CITE_PAGE, docname),
                               nodes.Text("):"))
    details += _code(companion_bibtex(
        citation(srcdir), figure, page, summary["provenance"].get("commit"),
        input_state(summary["provenance"], names=False)), "bibtex")
    details += code_line(figure, srcdir, docname, line)
    return box


class FigureBlocks(SphinxTransform):
    """Give every figure whose name is a figure label its headline and info block."""

    default_priority = 400

    def apply(self):
        figures = _book_figures(self.env)
        builder = getattr(self.app, "builder", None)
        docname = self.env.docname
        page = (builder.get_target_uri(docname) if builder and builder.format == "html"
                else f"{docname}.html")
        store = self.env.__dict__.setdefault("qkov_figures", {})
        for node in list(self.document.findall(nodes.figure)):
            labels = [name for name in node["names"] if name in figures]
            if not labels:
                continue
            figure = figures[labels[0]]
            caption = node.next_node(nodes.caption)
            if caption is None:
                logger.warning(f"figure {figure.label} has no caption",
                               location=(docname, node.line or 0))
                continue
            # The caption as nodes: its glued values are filled in only when pages are
            # written, in the gallery too (GalleryCaptions).
            store[figure.label] = {"docname": docname,
                                   "caption": [child.deepcopy() for child in caption.children]}
            caption.insert(0, nodes.strong(text=figure.name + ". ", classes=["qkov-headline"]))
            info = figure_info(figure, self.env, page, node.line or 0)
            node.parent.insert(node.parent.index(node) + 1, info)


def setup(app):
    app.add_node(_Details, html=(_visit_details_html, _depart_details_html),
                 latex=(_pass, _pass), text=(_pass, _pass), man=(_pass, _pass),
                 texinfo=(_pass, _pass))
    app.add_transform(FigureBlocks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
