"""A Sphinx extension for the book: MathJax served from the book, and measured records.

MathJax:
Jupyter Book loads MathJax from a CDN by default, so an offline reader sees raw TeX. The
``django-static-mathjax`` wheel carries MathJax 3 (pinned in pyproject.toml); this extension
copies its self-contained ``tex-svg-full.js`` (all TeX extensions and the SVG font in one
file, nothing loaded later) into ``_static/mathjax/`` and points Sphinx at it.

Records: the ``qkov-record`` directive renders a table from a JSON file that a measurement
wrote (``benchmarks/results/trainer-speed.json`` from the trainer benchmark,
``benchmarks/results/figures-run.json`` from the last from-scratch ``make figures``,
``benchmarks/results/test-run.json`` from the last passing ``make test``), so the
numbers the book shows are the measurement's, never typed by hand. A missing or malformed
record fails the (strict) build with the file's name.

Figures: every figure of the registry ``qkov.pipeline.FIGURE_JOBS`` (and each extra drawing
``figure-<name>.png`` of a job, labelled ``<figure-id>-<name>``) that the book shows as a
figure named by its label gets the same block, added by a transform so that a figure added
later gets it without a line of its own: a caption that starts with the label and the paper
figure it reproduces, and below it download links (PNG, PDF, SVG, every CSV of the job,
``summary.json``, the notebook), the command that regenerates it, its provenance read from
``artifacts/<figure-id>/summary.json`` and a "cite this figure" snippet. A missing file fails
the strict build with a warning that names the page and the file. ``{qkov-gallery}`` shows
every figure as a thumbnail with its label, caption and links; ``{qkov-citation}`` the
BibTeX of the paper (from ``book/references.bib``) and of the companion (from
``CITATION.cff``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from .artifacts import default_dir
from .pipeline import FIGURE_JOBS, FigureJob

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "benchmarks" / "results"
CITATION_FILE = ROOT / "CITATION.cff"
BIBLIOGRAPHY = ROOT / "book" / "references.bib"
PAPER_KEY = "vashisht26a"
CSS_FILE = "qkov.css"

logger = logging.getLogger(__name__)

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


def _table(header: list[str], rows: list[list[str]]) -> nodes.table:
    table = nodes.table()
    group = nodes.tgroup(cols=len(header))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in header]

    def row(cells):
        line = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += nodes.paragraph(text=cell)
            line += entry
        return line

    head, body = nodes.thead(), nodes.tbody()
    head += row(header)
    body += [row(r) for r in rows]
    group += [head, body]
    return table


def trainer_speed_rows(r: dict) -> tuple[list[str], list[list[str]], str]:
    rows = [
        ["(a) per-model baseline", f"{r['baseline_model_steps_per_s']:,.0f}", "1x"],
        ["(b) qkov.synthetic.train, one process", f"{r['trainer_model_steps_per_s']:,.0f}",
         f"{r['speedup_one_process']:.1f}x"],
        [f"(c) qkov.synthetic.train, {r['workers']} worker processes",
         f"{r['trainer_workers_model_steps_per_s']:,.0f}", f"{r['speedup_workers']:.1f}x"],
    ]
    step = r["step"]
    breakdown = (f"{step['sampling_us']:.0f} us drawing the data ({step['streams']} streams), "
                 f"{step['layout_us']:.0f} us laying it out, {step['ensemble_math_us']:.0f} us "
                 f"in {step['operators_per_step']:.0f} PyTorch operators, "
                 f"{step['overhead_us']:.0f} us Python and dispatch")
    note = (f"Measured on {r['date']} ({r['machine']}; {r['trainer_steps']:,} steps of each "
            f"of the {r['workload']}; best of {r['rounds']} interleaved rounds). One step of "
            f"(b) for all {step['members']} runs: {breakdown}. The trainer does "
            f"{r['mflop_per_model_step']:.2f} MFLOP of matrix work per model-step: (c) runs "
            f"at {r['trainer_gflops']:.1f} GFLOP/s, "
            f"{100 * r['fraction_of_batched_matmul']:.0f}% of a batched matmul of the same "
            f"shape ({r['batched_matmul_gflops']:.0f} GFLOP/s) and "
            f"{100 * r['trainer_gflops'] / r['large_matmul_gflops']:.0f}% of a large matmul "
            f"({r['large_matmul_gflops']:.0f} GFLOP/s).")
    return ["", "model-steps/s", "vs (a)"], rows, note


def figures_run_rows(r: dict) -> tuple[list[str], list[list[str]], str]:
    rows = [[f, f"{v['wall_time_s']:.0f} s", (v["commit"] or "?")[:10]
             + (" with uncommitted changes" if v.get("uncommitted_changes") else "")]
            for f, v in r["figures"].items()]
    rows.append(["make figures, from scratch", f"{r['total_wall_time_s']:.0f} s", ""])
    note = (f"Recorded on {r['date']} ({r['machine']}) by the last from-scratch "
            "`make figures`; the total includes kernel start-ups and file writing.")
    return ["figure id", "wall time", "commit"], rows, note


def test_run_rows(r: dict) -> tuple[list[str], list[list[str]], str]:
    rows = [["make test: unit tests, nbval over every notebook, book build, browser checks",
             f"{r['wall_time_s']:.0f} s", (r["commit"] or "?")[:10]]]
    note = (f"Recorded on {r['date']} ({r['machine']}) by the last passing `make test` "
            "(installation not included).")
    return ["run", "wall time", "commit"], rows, note


RECORD_KINDS = {"trainer-speed": trainer_speed_rows, "figures-run": figures_run_rows,
                "test-run": test_run_rows}


class RecordDirective(SphinxDirective):
    """``{qkov-record} KIND`` (a key of RECORD_KINDS): a table from that JSON record."""

    required_arguments = 1

    def run(self):
        kind = self.arguments[0]
        if kind not in RECORD_KINDS:
            raise self.error(f"qkov-record: unknown record {kind!r}; "
                             f"expected one of {', '.join(RECORD_KINDS)}")
        path = RECORDS / f"{kind}.json"
        self.env.note_dependency(str(path))
        try:
            header, rows, note = RECORD_KINDS[kind](json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self.error(f"qkov-record: {path} is missing or not a {kind} record "
                             f"({exc!r}); regenerate it (see the reproducibility page)"
                             ) from exc
        return [_table(header, rows), nodes.paragraph(text=note)]


# --- printed tables shown as HTML tables ------------------------------------------------

def parse_text_table(text: str) -> tuple[list[str], list[list[str]]] | None:
    """The header and rows of a table printed by ``qkov.artifacts.table_text`` (columns
    right-justified, two spaces apart, so every line has the same length), else None.
    The notebooks keep printing text (nbval compares it); the book shows it as a table."""
    lines = text.rstrip("\n").split("\n")
    if len(lines) < 2 or len({len(line) for line in lines}) != 1 or len(lines[0].split()) < 2:
        return None
    width = len(lines[0])
    blank = [all(line[i] == " " for line in lines) for i in range(width)]
    spans, start, i = [], 0, 0
    while i < width:  # a column ends where two or more positions are blank in every line
        if blank[i] and i + 1 < width and blank[i + 1]:
            spans.append((start, i))
            while i < width and blank[i]:
                i += 1
            start = i
        else:
            i += 1
    spans.append((start, width))
    cells = [[line[a:b].strip() for a, b in spans] for line in lines]
    if len(spans) < 2 or any(not name or " " in name for name in cells[0]):
        return None
    return cells[0], cells[1:]


class PrintedTables(SphinxTransform):
    """Show each table that a notebook cell printed as an HTML table (wide tables scroll
    sideways instead of being clipped); the rest of the printed text stays as it is."""

    default_priority = 410

    def apply(self):
        for block in list(self.document.findall(nodes.literal_block)):
            if not {"output", "stream"} <= set(block["classes"]):
                continue
            chunks = re.split(r"\n\s*\n", block.astext())
            parsed = [parse_text_table(chunk) for chunk in chunks]
            if not any(parsed):
                continue
            shown = []
            for chunk, table in zip(chunks, parsed):
                if table:
                    node = _table(*table)
                    node["classes"] += ["qkov-printed-table"]
                    shown.append(node)
                elif chunk.strip():
                    shown.append(nodes.literal_block(chunk, chunk, classes=block["classes"],
                                                     language=block.get("language", "none")))
            block.replace_self(shown)

# --- figures: label, downloads, regenerate command, provenance, citation -----------------

# A label of the form paper-figN reproduces the paper's Fig. N; these say otherwise.
REPRODUCES = {"paper-fig2-std": "paper Fig. 2 (its spread over seeds)",
              "paper-fig2-trajectories": None}  # the companion's comparison of Fig. 2's runs


@dataclass(frozen=True)
class BookFigure:
    """One figure of the book: ``label`` (its anchor and the id readers cite) is the job's
    figure id for ``figure.png``, ``<figure-id>-<name>`` for ``figure-<name>.png``."""

    label: str
    job: FigureJob
    stem: str

    @property
    def folder(self) -> Path:
        """Where its files are: ``artifacts/<figure-id>/`` or, when ``$QKOV_ARTIFACTS`` is
        set (the tests: nbval writes there), that folder's ``<figure-id>/``."""
        return default_dir(self.job.figure_id)

    @property
    def reproduces(self) -> str | None:
        """The paper figure it reproduces ("paper Fig. 2"), or None: the companion's own."""
        if self.label in REPRODUCES:
            return REPRODUCES[self.label]
        match = re.fullmatch(r"paper-fig(\d+)", self.label)
        return f"paper Fig. {match.group(1)}" if match else None

    @property
    def headline(self) -> str:
        return (f"[{self.label}] Reproduces {self.reproduces}." if self.reproduces else
                f"[{self.label}] The companion's own figure, not one of the paper's.")

    def downloads(self, srcdir: Path) -> list[tuple[str, Path]]:
        """(text, file) of every file a reader may want; ``srcdir``: the book's source."""
        files = [(fmt.upper(), self.folder / f"{self.stem}.{fmt}") for fmt in ("png", "pdf", "svg")]
        tables = ["data.csv", *(n for n in self.job.extra_files if n.endswith(".csv"))]
        files += [(name, self.folder / name) for name in tables]
        files += [("summary.json", self.folder / "summary.json"),
                  ("notebook", Path(srcdir) / self.job.notebook)]
        return files


def book_figures() -> dict[str, BookFigure]:
    """Every figure the registry's jobs draw, by label, in registry order."""
    figures = {}
    for job in FIGURE_JOBS:
        stems = ["figure"] + [name[:-len(".png")] for name in job.extra_files
                              if name.startswith("figure-") and name.endswith(".png")]
        for stem in stems:
            label = job.figure_id + stem[len("figure"):]
            figures[label] = BookFigure(label, job, stem)
    return figures


def read_summary(path: Path) -> dict:
    """A figure's summary.json; a clear error naming the file if it is not one."""
    try:
        summary = json.loads(Path(path).read_text())
        summary["parameters"], summary["provenance"]  # noqa: B018 (both must be there)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is missing or not a figure summary ({exc!r}); "
                         "regenerate the figure (see the reproducibility page)") from exc
    return summary


def papermill_command(figure: BookFigure, parameters: dict) -> str:
    """The papermill line that re-runs the figure's notebook with ``parameters`` (those of
    the shown run): numbers and text as ``-p``, lists, booleans and None as one ``-y``."""
    plain, structured = [], {}
    for name, value in parameters.items():
        if name == "artifacts_dir" and value is None:
            continue  # the default folder, artifacts/<figure-id>/
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            plain += ["-p", name, str(value)]
        else:
            structured[name] = value
    words = ["papermill", figure.job.notebook, f"{figure.job.figure_id}-run.ipynb", *plain]
    if structured:
        words += ["-y", json.dumps(structured)]  # JSON is YAML
    return shlex.join(words)


def snakemake_command(figure: BookFigure) -> str:
    return f"snakemake --cores 2 {figure.job.rule}"


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


def citation() -> dict:
    import yaml

    return yaml.safe_load(CITATION_FILE.read_text())


def paper_bibtex() -> str:
    """The paper's entry of book/references.bib, verbatim."""
    text = BIBLIOGRAPHY.read_text()
    match = re.search(rf"@\w+\{{{PAPER_KEY},.*?\n\}}", text, re.S)
    if match is None:
        raise ValueError(f"{BIBLIOGRAPHY} has no entry {PAPER_KEY}")
    return match.group(0)


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


def _source_path(path: Path, srcdir: Path) -> str:
    """``path`` as Sphinx takes a file of the source: "/" + relative to the source folder
    (with ".." where the tests point $QKOV_ARTIFACTS outside it)."""
    return "/" + Path(os.path.relpath(Path(path).resolve(), Path(srcdir).resolve())).as_posix()


def _download(text: str, path: Path, srcdir: Path) -> addnodes.download_reference:
    ref = addnodes.download_reference("", "", reftarget=_source_path(path, srcdir),
                                      refexplicit=True, refdomain="", reftype="download")
    ref += nodes.literal(text, text)
    return ref


def _code(text: str, language: str) -> nodes.literal_block:
    block = nodes.literal_block(text, text, language=language)
    block["classes"].append("qkov-code")
    return block


def _links(figure: BookFigure, srcdir: Path, docname: str, line: int) -> nodes.paragraph:
    """Download links; a missing file is a warning (so a strict build fails) naming it."""
    para = nodes.paragraph()
    para += nodes.strong(text="Download: ")
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


def figure_info(figure: BookFigure, srcdir: Path, docname: str, page: str,
                line: int = 0) -> nodes.container:
    """The block below a figure: downloads, regenerate command, provenance, citation."""
    box = nodes.container(classes=["qkov-figure-info"], ids=[f"{figure.label}-info"])
    box += _links(figure, srcdir, docname, line)
    summary_path = figure.folder / "summary.json"
    try:
        summary = read_summary(summary_path)
    except ValueError as exc:
        if summary_path.is_file():  # a missing one is reported with the downloads
            logger.warning(f"figure {figure.label}: {exc}", location=(docname, line))
        return box
    box += nodes.paragraph("", "", nodes.strong(text="Regenerate "),
                           nodes.Text("(from the repository root; the first line re-runs "
                                      "this run's parameters, the second the notebook's "
                                      "defaults through the pipeline):"))
    box += _code(papermill_command(figure, summary["parameters"]) + "\n"
                 + snakemake_command(figure), "bash")
    box += nodes.paragraph("", "", nodes.strong(text="Provenance "),
                           nodes.Text("(from summary.json): " + provenance_text(summary)))
    box += nodes.paragraph("", "", nodes.strong(text="Cite this figure: "),
                           nodes.Text("the paper and this figure of the companion."))
    box += _code(paper_bibtex() + "\n\n" + companion_bibtex(
        citation(), figure, page, summary["provenance"].get("commit"),
        input_state(summary["provenance"], names=False)), "bibtex")
    return box


class FigureBlocks(SphinxTransform):
    """Give every figure whose name is a figure label its headline and info block."""

    default_priority = 400

    def apply(self):
        figures = book_figures()
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
            store[figure.label] = {"docname": docname, "caption": caption.astext()}
            caption.insert(0, nodes.strong(text=figure.headline + " ",
                                           classes=["qkov-headline"]))
            info = figure_info(figure, Path(self.app.srcdir), docname, page, node.line or 0)
            node.parent.insert(node.parent.index(node) + 1, info)


class _FigureLink(nodes.General, nodes.Element):
    """A gallery entry's link to its figure, resolved once every page has been read."""


class _FigureCaption(nodes.General, nodes.Element):
    """A gallery entry's caption, copied from its figure once every page has been read."""


class GalleryDirective(SphinxDirective):
    """``{qkov-gallery}``: every figure as a thumbnail with its label, caption and links."""

    def run(self):
        self.env.__dict__.setdefault("qkov_gallery_docs", set()).add(self.env.docname)
        entries = []
        for figure in book_figures().values():
            entry = nodes.container(classes=["qkov-gallery-item"], ids=[f"gallery-{figure.label}"])
            image = nodes.image(uri=_source_path(figure.folder / f"{figure.stem}.png",
                                                 Path(self.env.srcdir)),
                                alt=f"figure {figure.label}", classes=["qkov-thumbnail"])
            entry += _FigureLink("", image, label=figure.label)
            title = nodes.paragraph(classes=["qkov-gallery-title"])
            title += _FigureLink("", nodes.strong(text=figure.label), label=figure.label)
            title += nodes.Text(" — " + (f"reproduces {figure.reproduces}" if figure.reproduces
                                         else "the companion's own figure"))
            entry += title
            entry += _FigureCaption(label=figure.label)
            entry += _links(figure, Path(self.env.srcdir), self.env.docname, self.lineno)
            entries.append(entry)
        return [nodes.container("", *entries, classes=["qkov-gallery"])]


class CitationDirective(SphinxDirective):
    """``{qkov-citation}``: BibTeX for the paper and for the companion."""

    def run(self):
        self.env.note_dependency(str(CITATION_FILE))
        self.env.note_dependency(str(BIBLIOGRAPHY))
        return [_code(paper_bibtex(), "bibtex"), _code(companion_bibtex(citation()), "bibtex")]


def _resolve_figure_links(app, doctree, docname) -> None:
    """Gallery links and captions; a figure image that opens its SVG when clicked."""
    from sphinx.util.osutil import relative_uri

    store = getattr(app.env, "qkov_figures", {})
    for node in list(doctree.findall(_FigureLink)):
        label = node["label"]
        if label not in store:
            logger.warning(f"gallery: figure {label} is not shown on any page of the book",
                           location=(docname, node.line or 0))
            node.replace_self(node.children)
            continue
        uri = app.builder.get_relative_uri(docname, store[label]["docname"]) + "#" + label
        node.replace_self(nodes.reference("", "", *node.children, refuri=uri,
                                          internal=True))
    for node in list(doctree.findall(_FigureCaption)):
        shown = store.get(node["label"], {})
        number = app.env.toc_fignumbers.get(shown.get("docname"), {}).get(
            "figure", {}).get(node["label"])
        prefix = f"Companion Fig. {'.'.join(map(str, number))}: " if number else ""
        node.replace_self(nodes.paragraph(text=prefix + shown.get("caption", ""),
                                          classes=["qkov-gallery-caption"]))
    if app.builder.format != "html":
        return
    figures = book_figures()
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
                break


def _gallery_outdated(app, env, added, changed, removed) -> list[str]:
    """A gallery shows other pages' captions: re-read it whenever a page changes."""
    return sorted(getattr(env, "qkov_gallery_docs", set())) if added | changed | removed else []


def _purge_figures(app, env, docname) -> None:
    store = getattr(env, "qkov_figures", {})
    for label in [k for k, v in store.items() if v["docname"] == docname]:
        del store[label]


def _merge_figures(app, env, docnames, other) -> None:
    env.__dict__.setdefault("qkov_figures", {}).update(
        {k: v for k, v in getattr(other, "qkov_figures", {}).items() if v["docname"] in docnames})


# Display equations scroll sideways instead of being clipped (desktop and phone widths);
# tables too; the gallery is a grid of cards.
CSS = """\
mjx-container[display="true"], div.math, .math-wrapper { overflow-x: auto; overflow-y: hidden;
  max-width: 100%; }
.cell_output .output, table.dataframe, div.pst-scrollable-table-container { overflow-x: auto; }
table.qkov-printed-table { display: block; overflow-x: auto; max-width: 100%;
  font-size: 0.85em; font-variant-numeric: tabular-nums; }
table.qkov-printed-table td { text-align: right; white-space: nowrap; }
.qkov-figure-info { font-size: 0.9em; border-left: 3px solid #bbb; padding: 0.2em 0.8em;
  margin: 0.5em 0 1.5em 0; }
.qkov-figure-info pre { white-space: pre-wrap; word-break: break-all; }
.qkov-headline { display: block; }
.qkov-gallery { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr));
  gap: 1.2em; }
.qkov-gallery-item { border: 1px solid #ddd; border-radius: 4px; padding: 0.6em;
  font-size: 0.85em; }
.qkov-gallery-item img { width: 100%; height: auto; }
"""


def _write_css(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / CSS_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(CSS)


def setup(app):
    mathjax_source()  # fail at start, not after a long build, if MathJax is not installed
    app.add_directive("qkov-record", RecordDirective)
    app.add_directive("qkov-gallery", GalleryDirective)
    app.add_directive("qkov-citation", CitationDirective)
    app.add_node(_FigureLink)
    app.add_node(_FigureCaption)
    app.add_transform(FigureBlocks)
    app.add_transform(PrintedTables)
    app.add_css_file(CSS_FILE)
    app.connect("config-inited", _use_local_mathjax, priority=900)
    app.connect("doctree-resolved", _resolve_figure_links)
    app.connect("env-purge-doc", _purge_figures)
    app.connect("env-get-outdated", _gallery_outdated)
    app.connect("env-merge-info", _merge_figures)
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _write_css)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
