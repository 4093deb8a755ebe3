"""The book's Sphinx extension: MathJax served from the book, the measured records, and
everything the book shows about each figure, made from the figures' specs.

It lives with the book (``book/_ext``), not in the science library: ``_config.yml`` loads it
with ``sphinx: local_extensions: {qkov_book: book/_ext}``. Every file it reads is found from
the book's source folder (``app.srcdir``, the repository root that holds ``_config.yml``),
so the build does not depend on where the ``qkov`` library is installed. What it knows about
the figures comes from ``qkov.figures.specs()``: one ``FigureSpec`` per figure module.

MathJax:
Jupyter Book loads MathJax from a CDN by default, so an offline reader sees raw TeX. The
``django-static-mathjax`` wheel carries MathJax 3 (pinned in pyproject.toml); this extension
copies its self-contained ``tex-svg-full.js`` (all TeX extensions and the SVG font in one
file, nothing loaded later) into ``_static/mathjax/`` and points Sphinx at it. The book's
own styles are ``book/_ext/qkov.css``, copied into ``_static/`` and added to every page.

Records: the ``qkov-record`` directive renders a table from a JSON file that a measurement
wrote (``benchmarks/results/trainer-speed.json`` from the trainer benchmark,
``benchmarks/results/figures-run.json`` from the last from-scratch ``make figures``,
``benchmarks/results/test-run.json`` from the last passing ``make test``), so the
numbers the book shows are the measurement's, never typed by hand. A missing or malformed
record fails the (strict) build with the file's name.

Figures: every drawing of every spec (``figure.png``, labelled by the figure's id, and each
extra ``Drawing``, ``figure-<name>.png``, labelled ``<id>-<name>``) has one name in the
book: "Fig. 2 (reproduced)" for a drawing that reproduces one of the paper's
(``Drawing.reproduces``), C1, C2, ... for the companion's own, in book order. Sphinx's own
figure numbers are removed, so no other numbering competes; equations keep theirs. A
chapter shows a drawing where its text discusses it with ``{qkov-figure} LABEL`` (the
caption as content; the image is the figure's PNG, with the spec's alt text) and cites it
with ``{qkov-fig}`LABEL``` (a link titled by its name). A transform gives every figure named
by a label, added later or not, the same block: its name at the head of the caption, then
its id, an "Open full size" link and the download links (PNG, PDF, SVG, ``data.csv`` and
the spec's ``tables``, ``summary.json``, the notebook) on one line, and folded below them
the command that regenerates it, its provenance read from ``artifacts/<figure-id>/summary.json``,
its BibTeX (the paper's entry is on the citing page, once) and a "Code:" line naming the
figure's module (``qkov.figures.<module>``, ``lib/qkov/figures/<module>.py``) and linking
the page that shows the core of the library it builds on (``book/core``). A missing file
fails the strict build with a warning that names the page and the file. The files are read
from ``$QKOV_ARTIFACTS/<figure-id>/`` when that is set (the tests), else from
``artifacts/<figure-id>/`` of the source folder.

Directives: ``{qkov-gallery}`` shows every figure as a thumbnail with its name, id, caption
and links (to the figure in its chapter); ``{qkov-figure-table}`` a table of the figures (id,
notebook, what it reproduces, what it reads of other figures, whether it needs a dataset,
linked to the page that says where to get it); both in the book's order (the page that
shows each, then its notebook, as ``_toc.yml`` lists them), so a new figure needs no edit of
either page. A figure whose spec says ``needs_dataset`` and whose ``summary.json`` is absent
(its data cannot be downloaded where the book is built; its notebook is stored without a
figure) is in the table but not in the gallery. ``{qkov-citation}`` shows the BibTeX of the
paper (from the book's bibliography) and of the companion (from ``CITATION.cff``).

Printed tables: a table a notebook printed (``qkov.artifacts.table_text``) is shown as an
HTML table with readable column headers, split into several when wider than the page.
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
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from qkov.artifacts import default_dir, not_canonical, verify_set
from qkov.figures import module, specs
from qkov.spec import DRAWING_FORMATS, Drawing, FigureSpec

HERE = Path(__file__).resolve().parent  # book/_ext: this extension and its stylesheet
CSS_FILE = "qkov.css"
RECORDS = Path("benchmarks") / "results"  # relative to the book's source folder
CITATION_FILE = "CITATION.cff"  # likewise
PAPER_KEY = "vashisht26a"
CORE_PAGE = "book/core"  # the page that shows the library's core, linked from every figure
CITE_PAGE = "book/cite"  # the page with the paper's BibTeX, linked from every figure

logger = logging.getLogger(__name__)

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


def _cell(content) -> nodes.entry:
    """A table cell from text, a node or a list of nodes."""
    entry = nodes.entry()
    if isinstance(content, str):
        entry += nodes.paragraph(text=content)
    else:
        entry += nodes.paragraph("", "", *(content if isinstance(content, list) else [content]))
    return entry


def _table(header: list[str], rows: list[list]) -> nodes.table:
    table = nodes.table()
    group = nodes.tgroup(cols=len(header))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in header]

    def row(cells):
        line = nodes.row()
        line += [_cell(cell) for cell in cells]
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
    note = (f"Measured on {r['date']} ({r['machine']}; {r['trainer_steps']:,} steps of each "
            f"of the {r['workload']}; best of {r['rounds']} interleaved rounds). "
            "`python benchmarks/trainer_speed.py` prints this table and where the time of "
            "one step goes.")
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
        path = Path(self.env.srcdir) / RECORDS / f"{kind}.json"
        self.env.note_dependency(str(path))
        try:
            header, rows, note = RECORD_KINDS[kind](json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self.error(f"qkov-record: {path} is missing or not a {kind} record "
                             f"({exc!r}); regenerate it (see the reproducibility page)"
                             ) from exc
        return [_table(header, rows), *self.parse_text_to_nodes(note)]  # `code` as code


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


# How the book heads the columns that notebooks print under their data.csv names; other
# names are shown with spaces for underscores.
COLUMN_HEADERS = {
    "mean_attn": "mean attention", "pct_attn>=0.8": "% with attention ≥ 0.8",
    "pct_both>=0.8": "% with attention and p ≥ 0.8", "test_loss": "held-out loss",
    "pct_separable": "% separable", "drift_qk": "QK drift", "drift_ov": "OV drift",
    "mu_ov": "μ_OV", "mu_qk": "μ_QK", "tau": "τ", "alpha": "α",
    "alpha_closed_form": "α, closed form", "alpha_stylized": "α, stylized model",
    "task_informative_mean": "task: class-identifying", "task_informative_ci95": "± 95%",
    "task_distinct_mean": "task: distinct", "task_distinct_ci95": "± 95%",
    "task_loss_mean": "task loss", "task_runs_reaching_loss": "runs at the loss",
    "runs_reaching_loss": "runs at the loss", "distinct_ci95": "± 95%",
    "informative": "class-identifying", "informative_ci95": "± 95%",
    "companion_ci95": "± 95%", "epochs_mean": "epochs", "err_mu_ov": "error μ_OV",
    "err_mu_qk": "error μ_QK", "err_alpha": "error α", "err_loss": "error loss",
    "off_set": "off the set", "alpha_at_loss": "α at the loss",
    "alpha_balanced_start": "α, balanced start", "tau_at_loss": "τ at the loss",
    "r_eff_at_loss": "r_eff at the loss", "measured_attention_ci95": "± 95%",
    "measured_class_attention": "measured class-identifying attention",
    "attention_rollout": "attention (rollout)", "attention_layer_mean": "attention (layer mean)",
    "attention_layer_max": "attention (layer max)",
}
MAX_COLUMNS = 5  # a wider printed table is shown as several, each repeating the first column


def column_header(name: str) -> str:
    if name in COLUMN_HEADERS:
        return COLUMN_HEADERS[name]
    if name.startswith("L="):
        return "L = " + name[2:]
    return name.replace("_", " ")


def split_wide(header: list[str], rows: list[list[str]]) -> list[tuple[list, list]]:
    """A table as tables of at most MAX_COLUMNS columns, so that none is wider than the
    page; each repeats the leading columns that tell the rows apart (the row's key: the
    panel, or the condition and r)."""
    if len(header) <= MAX_COLUMNS:
        return [(header, rows)]
    key = next((k for k in range(1, len(header))
                if len({tuple(row[:k]) for row in rows}) == len(rows)), 1)
    key = min(key, MAX_COLUMNS - 2)  # leave room for at least two other columns
    step = MAX_COLUMNS - key
    return [([*header[:key], *header[k:k + step]], [[*row[:key], *row[k:k + step]] for row in rows])
            for k in range(key, len(header), step)]


class PrintedTables(SphinxTransform):
    """Show each table that a notebook cell printed as an HTML table, with readable column
    headers (COLUMN_HEADERS) and wide tables split (split_wide); the rest of the printed
    text stays as it is."""

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
                    for header, rows in split_wide(*table):
                        node = _table([column_header(name) for name in header], rows)
                        node["classes"] += ["qkov-printed-table"]
                        shown.append(node)
                elif chunk.strip():
                    shown.append(nodes.literal_block(chunk, chunk, classes=block["classes"],
                                                     language=block.get("language", "none")))
            block.replace_self(shown)

# --- figures: label, downloads, regenerate command, provenance, citation, code -----------


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


def _source_path(path: Path, srcdir: Path) -> str:
    """``path`` as Sphinx takes a file of the source: "/" + relative to the source folder
    (with ".." where the tests point $QKOV_ARTIFACTS outside it)."""
    return "/" + Path(os.path.relpath(Path(path).resolve(), Path(srcdir).resolve())).as_posix()


def _download(text: str, path: Path, srcdir: Path) -> addnodes.download_reference:
    ref = addnodes.download_reference("", "", reftarget=_source_path(path, srcdir),
                                      refexplicit=True, refdomain="", reftype="download")
    ref += nodes.literal(text, text)
    return ref


def _doc_link(docname: str, refdoc: str, *children: nodes.Node) -> addnodes.pending_xref:
    """A link to page ``docname``, titled ``children`` (or, given none, by the page's title);
    a page missing from the book is a warning (so a strict build fails)."""
    ref = addnodes.pending_xref("", *(children or [nodes.inline()]), refdomain="std",
                                reftype="doc", reftarget="/" + docname, refdoc=refdoc,
                                refexplicit=bool(children), refwarn=True)
    return ref


def _code(text: str, language: str) -> nodes.literal_block:
    block = nodes.literal_block(text, text, language=language)
    block["classes"].append("qkov-code")
    return block


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


def _literal(text: str) -> nodes.literal:
    return nodes.literal(text, text)


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


class CitationDirective(SphinxDirective):
    """``{qkov-citation}``: BibTeX for the paper and for the companion."""

    def run(self):
        srcdir = Path(self.env.srcdir)
        bibfiles = bibliography(self.env)
        for path in (srcdir / CITATION_FILE, *bibfiles):
            self.env.note_dependency(str(path))
        return [_code(paper_bibtex(bibfiles), "bibtex"),
                _code(companion_bibtex(citation(srcdir)), "bibtex")]


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


def _gallery_outdated(app, env, added, changed, removed) -> list[str]:
    """The gallery and the figure table show other pages' figures: re-read them whenever a
    page changes."""
    return sorted(getattr(env, "qkov_gallery_docs", set())) if added | changed | removed else []


def _purge_figures(app, env, docname) -> None:
    store = getattr(env, "qkov_figures", {})
    for label in [k for k, v in store.items() if v["docname"] == docname]:
        del store[label]


def _merge_figures(app, env, docnames, other) -> None:
    env.__dict__.setdefault("qkov_figures", {}).update(
        {k: v for k, v in getattr(other, "qkov_figures", {}).items() if v["docname"] in docnames})
    env.__dict__.setdefault("qkov_gallery_docs", set()).update(
        getattr(other, "qkov_gallery_docs", set()) & set(docnames))


def setup(app):
    mathjax_source()  # fail at start, not after a long build, if MathJax is not installed
    app.add_directive("qkov-record", RecordDirective)
    app.add_directive("qkov-gallery", GalleryDirective)
    app.add_directive("qkov-figure-table", FigureTableDirective)
    app.add_directive("qkov-citation", CitationDirective)
    app.add_directive("qkov-figure", FigureDirective)
    app.add_role("qkov-fig", figure_role)
    app.add_node(_Details, html=(_visit_details_html, _depart_details_html),
                 latex=(_pass, _pass), text=(_pass, _pass), man=(_pass, _pass),
                 texinfo=(_pass, _pass))
    app.add_node(_FigureLink)
    app.add_node(_FigureCaption)
    app.add_transform(FigureBlocks)
    app.add_transform(PrintedTables)
    app.add_post_transform(GalleryCaptions)
    app.add_css_file(CSS_FILE)
    app.connect("config-inited", _use_local_mathjax, priority=900)
    app.connect("builder-inited", _verify_sets)
    app.connect("doctree-resolved", _resolve_figure_links)
    app.connect("env-purge-doc", _purge_figures)
    app.connect("env-get-outdated", _gallery_outdated)
    app.connect("env-merge-info", _merge_figures)
    app.connect("env-get-updated", _unnumber_figures, priority=900)
    app.connect("build-finished", _copy_static)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
