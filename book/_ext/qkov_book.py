"""MathJax and the stylesheet from the book itself (Jupyter Book's MathJax is a CDN's), the
records (``{qkov-record} KIND``), BibTeX (``{qkov-citation}``), the repository URL from
CITATION.cff, the PDF in every page's download menu where it was built, the bibliography's
labels as the text cites them, and the PDF's layout (:class:`PaperStructure`)."""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from pathlib import Path

import yaml
from docutils import nodes
from pybtex.plugin import register_plugin
from pybtex.style.formatting.alpha import Style as AlphaStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx import addnodes
from sphinx.builders.latex.nodes import thebibliography
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

from qkov.artifacts import default_dir
from qkov.figures import specs
from qkov.plotting import png_size

CSS_FILE = "qkov.css"
MATHJAX = "mathjax/tex-svg-full.js"  # under _static/; one file: every TeX extension and font
PAPER_KEY = "vashisht26a"
PDF = "qkov-book.pdf"  # _config.yml's latex_documents targetname, as .pdf


def built_pdf(outdir) -> Path:
    return Path(outdir).parent / "latex" / PDF


def citation(srcdir) -> dict:
    return yaml.safe_load((Path(srcdir) / "CITATION.cff").read_text())


def companion_bibtex(cff: dict, label: str = "", url: str = "", note: str = "") -> str:
    url = url or cff["url"].rstrip("/") + "/"
    names = " and ".join("{" + a["name"] + "}" if "name" in a
                         else f"{a['family-names']}, {a['given-names']}" for a in cff["authors"])
    fields = {"author": names, "title": cff["title"] + (f": figure {label}" if label else ""),
              "version": cff["version"], "url": url, "howpublished": f"\\url{{{url}}}",
              "note": "; ".join(filter(None, [note, f"code: {cff['repository-code']}"]))}
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items())
    return f"@misc{{qkov{'-' + label if label else ''},\n{body}\n}}"


def figure_times(srcdir: Path):
    rows, total = [], 0.0
    for figure_id, spec in specs().items():
        path = default_dir(figure_id, srcdir) / "summary.json"
        if spec.needs_dataset and not path.is_file():
            continue  # not run where the book is built
        prov = json.loads(path.read_text())["provenance"]
        total += prov["wall_time_s"]
        rows.append([figure_id, f"{prov['wall_time_s']:.0f} s",
                     f"{prov['machine']['cpu_model']}, {prov['machine']['cpu_count']} cores",
                     (prov["commit"] or "?")[:10]
                     + " with uncommitted changes" * bool(prov.get("uncommitted_changes"))])
    rows.append(["all of them", f"{total:.0f} s", "", ""])
    return (["figure id", "wall time", "machine", "commit"], rows,
            "Each figure's own record of the run the book shows (its `summary.json`): the "
            "notebook's computation, without the kernel's start-up.")


TIER_NAMES = {"unit": "unit tests", "notebook": "nbval over every notebook, and the tools run",
              "book": "the strict book build (PDF and HTML) and its checks",
              "browser": "every page in headless Chromium", "cluster": "a single-node SLURM"}


def test_run(srcdir: Path):
    path = srcdir / "artifacts" / "test-run.json"
    if not path.is_file():
        return [], [], ("No passing `make test` is recorded in this checkout yet (a passing "
                        "run writes `artifacts/test-run.json`).")
    r = json.loads(path.read_text())
    tiers = r.get("tiers", {})  # a record from before tiers were recorded has none
    rows = [[f"{name}: {TIER_NAMES.get(name, name)}", f"{t['tests']}",
             f"{t['seconds'] / 60:.1f} min"] for name, t in tiers.items()]
    rows.append(["all of make test's tests", f"{sum(t['tests'] for t in tiers.values()) or '-'}",
                 f"{r['wall_time_s'] / 60:.1f} min"])
    slowest = "; ".join(f"`{t['test']}` {t['seconds'] / 60:.1f} min"
                        for t in r.get("slowest", [])[:5])
    return (["tier", "tests", "time"], rows,
            f"Recorded on {r['date']} ({r['machine']}, commit {(r['commit'] or '?')[:10]}) by the "
            "last passing `make test` of the checkout that built this book (installation not "
            "included)." + (f" The slowest tests: {slowest}." if slowest else ""))


def trainer_speed(srcdir: Path):
    r = json.loads((srcdir / "benchmarks" / "results" / "trainer-speed.json").read_text())
    rows = [["(a) per-model baseline", f"{r['baseline_model_steps_per_s']:,.0f}", "1x"],
            ["(b) qkov.synthetic.train, one process", f"{r['trainer_model_steps_per_s']:,.0f}",
             f"{r['speedup_one_process']:.1f}x"],
            [f"(c) qkov.synthetic.train, {r['workers']} worker processes",
             f"{r['trainer_workers_model_steps_per_s']:,.0f}", f"{r['speedup_workers']:.1f}x"]]
    return (["", "model-steps/s", "vs (a)"], rows,
            f"Measured on {r['date']} ({r['machine']}; {r['trainer_steps']:,} steps of each of "
            f"the {r['workload']}; best of {r['rounds']} interleaved rounds). `python "
            "benchmarks/trainer_speed.py` prints this table and where the time of one step goes.")


class AuthorYearLabels(BaseLabelStyle):  # as the text cites: "Linzen et al., 2016"
    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            names = [" ".join(person.last_names) for person in entry.persons["author"]]
            who = " and ".join(names) if len(names) < 3 else f"{names[0]} et al."
            yield f"{who}, {entry.fields['year']}"


class AuthorYearStyle(AlphaStyle):  # _config.yml's bibtex_default_style: sorted by author
    default_label_style = AuthorYearLabels


register_plugin("pybtex.style.formatting", "qkov_author_year", AuthorYearStyle)


def language_speed(srcdir: Path):
    r = json.loads((srcdir / "benchmarks" / "results" / "language-speed.json").read_text())
    rows = [[m["model"], f"{m['runs']} runs, {m['workers']} workers",
             f"{m['loop_examples_per_s']:,.0f}", f"{m['batched_examples_per_s']:,.0f}",
             f"{m['speedup']:.1f}x", f"{m['bmm_fraction']:.0%}"] for m in r["results"]]
    data = "; ".join(f"{m['model']}: {m['data']}" for m in r["results"])
    return (["model", "run set", "(a) per-model loop, examples/s", "(b) batched, examples/s",
             "(b) / (a)", "(b)'s products vs bmm"], rows,
            f"Measured on {r['date']} ({r['machine']}, torch {r['torch']}; {r['steps']} batches "
            f"of each run for (b), {r['loop_steps']} of {r['loop_runs']} runs for (a); best of "
            f"{r['rounds']} interleaved rounds). Data: {data}. `python "
            "benchmarks/language_speed.py` prints this record.")


RECORDS = {"trainer-speed": trainer_speed, "language-speed": language_speed,
           "figure-times": figure_times, "test-run": test_run}


class RecordDirective(SphinxDirective):  # as the measurement wrote it, or an error
    required_arguments = 1

    def run(self):
        kind = self.arguments[0]
        for path in ["benchmarks/results/trainer-speed.json",
                     "benchmarks/results/language-speed.json", "artifacts/test-run.json",
                     *(default_dir(f, self.env.srcdir) / "summary.json" for f in specs())]:
            self.env.note_dependency(str(Path(self.env.srcdir, path)))
        try:
            header, rows, note = RECORDS[kind](Path(self.env.srcdir))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self.error(f"qkov-record: {kind} is missing or malformed ({exc!r})") from exc
        lines = [header, ["---"] * len(header), *rows] if rows else []
        return self.parse_text_to_nodes("".join(f"| {' | '.join(r)} |\n" for r in lines)
                                        + "\n" + note)


class CitationDirective(SphinxDirective):  # the paper's BibTeX entry and the companion's
    def run(self):
        bib = "".join(Path(self.env.srcdir, f).read_text() for f in self.config.bibtex_bibfiles)
        paper = re.search(rf"@\w+\{{{PAPER_KEY},.*?\n\}}", bib, re.S).group(0)
        return self.parse_text_to_nodes(f"```bibtex\n{paper}\n```\n\n```bibtex\n"
                                        f"{companion_bibtex(citation(self.env.srcdir))}\n```")


def _config(app, config) -> None:
    config.mathjax_path = MATHJAX
    # In html_context, so that the HTML builder rewrites every page when the PDF comes or goes.
    config.html_context = {**config.html_context, "qkov_pdf": built_pdf(app.outdir).is_file()}
    # Jupyter Book refuses a repository button without a URL in _config.yml: it is off there.
    config.html_theme_options["repository_url"] = citation(app.srcdir)["repository-code"]
    config.html_theme_options["use_repository_button"] = True


def _copy(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        mathjax = resources.files("mathjax") / "static" / "mathjax" / "es5" / Path(MATHJAX).name
        for source, target in ((mathjax, f"_static/{MATHJAX}"), (built_pdf(app.outdir), PDF),
                               (Path(__file__).with_name(CSS_FILE), f"_static/{CSS_FILE}")):
            if target != PDF or app.config.html_context["qkov_pdf"]:
                Path(app.outdir, target).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(str(source), Path(app.outdir, target))


def _pdf_button(app, pagename, templatename, context, doctree) -> None:  # after the theme's (501)
    for button in context.get("header_buttons", []) if context.get("qkov_pdf") else []:
        if button.get("label") == "download-buttons":
            button["buttons"].append({"type": "link", "text": "Book (PDF)", "icon": "fas fa-book",
                                      "url": context["pathto"](PDF, 1), "label": "download-book-pdf-button",
                                      "tooltip": "Download the whole book as a PDF"})


class TallFiguresFitThePage(SphinxPostTransform):  # in the PDF, with its caption; no SVG link
    default_priority = 200
    builders = ("latex",)

    def run(self, **kwargs):
        for image in list(self.document.findall(nodes.image)):
            if "qkov-full-size" in image.parent["classes"]:  # a link to the HTML's SVG
                image.parent.replace_self(image)
            path = Path(self.env.srcdir, image["uri"].lstrip("/"))
            if path.suffix == ".png" and path.is_file() and "height" not in image:
                width, height = png_size(path.read_bytes()[:24])
                if height > 0.9 * width:  # (the 4 x 2 heatmaps) 0.9 of the line width high
                    image["height"] = "90%"


class PaperStructure(SphinxPostTransform):
    """The whole book as LaTeX reads it (the root page with every page inlined) laid out as
    a paper, numbered as the HTML: the root page is the front matter, one unnumbered chapter
    (its sections would be chapters); the parts before the first numbered one (the gallery, an
    index of the web pages) are left out, links to them go online; the numbered parts are the
    main matter, the parts after them the back matter (_config.yml: the book class)."""

    default_priority = 800
    builders = ("latex",)

    def run(self, **kwargs):
        root = self.config.root_doc
        if self.document.get("docname") != root:
            return
        parts = [(bool(t.get("numbered")), t["includefiles"])
                 for t in self.env.get_doctree(root).findall(addnodes.toctree)]
        first = next(i for i, (numbered, _) in enumerate(parts) if numbered)
        last = max(i for i, (numbered, _) in enumerate(parts) if numbered)
        files = {f["docname"]: f for f in self.document.findall(addnodes.start_of_file)}
        left_out = [d for _, docs in parts[:first] for d in docs]
        for docname in left_out:
            files[docname].parent.remove(files[docname])
        url = citation(self.env.srcdir)["url"].rstrip("/")
        for ref in self.document.findall(nodes.reference):
            docname, _, anchor = ref.get("refuri", "").removeprefix("%").partition("#")
            if ref.get("refuri", "").startswith("%") and docname in left_out:
                ref["refuri"] = f"{url}/{docname}.html" + f"#{anchor}" * bool(anchor)
        # (listings in the back matter numbered 1, 2, ... as in the HTML, not after the last chapter)
        for i, command in ((first, r"\mainmatter"), (last + 1, r"\backmatter\setcounter{chapter}{0}")):
            if i < len(parts):
                start = files[parts[i][1][0]]
                start.parent.insert(start.parent.index(start), nodes.raw("", command + "\n",
                                                                         format="latex"))
        bibliography = self.document.next_node(thebibliography)  # Sphinx moved it to the end
        if bibliography is not None:  # back to the page that lists it, the References
            bibliography.parent.remove(bibliography)
            files[bibliography[0]["docname"]].next_node(nodes.section).append(bibliography)
        intro = self.document.next_node(nodes.section)
        children = intro.children[1:]
        ends = next(i for i, child in enumerate(children)
                    if isinstance(child, addnodes.start_of_file)
                    or child.next_node(addnodes.start_of_file) is not None)
        front = nodes.section("", nodes.title("", intro[0].astext()), ids=["qkov-front-matter"])
        for child in children[:ends]:
            intro.remove(child)
            front += child
        intro.insert(1, front)


def setup(app):
    app.add_css_file(CSS_FILE)
    app.add_directive("qkov-record", RecordDirective)
    app.add_directive("qkov-citation", CitationDirective)
    app.connect("config-inited", _config, priority=900)
    app.connect("build-finished", _copy)
    app.connect("html-page-context", _pdf_button, priority=502)
    app.add_post_transform(TallFiguresFitThePage)
    app.add_post_transform(PaperStructure)
    return {"env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}
