"""The book's pages: MathJax and the stylesheet served from the book (Jupyter Book loads
MathJax from a CDN, so an offline reader would see raw TeX), the measured records of the
reproducibility page (``{qkov-record} KIND``), the citation page's BibTeX
(``{qkov-citation}``) and the repository URL, written once in CITATION.cff."""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from pathlib import Path

import yaml
from sphinx.util.docutils import SphinxDirective

from qkov.artifacts import default_dir
from qkov.figures import specs

CSS_FILE = "qkov.css"
MATHJAX = "mathjax/tex-svg-full.js"  # under _static/; one file: every TeX extension and font
PAPER_KEY = "vashisht26a"


def citation(srcdir) -> dict:
    return yaml.safe_load((Path(srcdir) / "CITATION.cff").read_text())


def companion_bibtex(cff: dict, label: str = "", url: str = "", note: str = "") -> str:
    """The companion's BibTeX (from CITATION.cff), or one figure's: ``label``, its anchor
    ``url`` and a ``note`` (what it reproduces, the commit)."""
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


def test_run(srcdir: Path):
    path = srcdir / "artifacts" / "test-run.json"
    if not path.is_file():
        return [], [], ("No passing `make test` is recorded in this checkout yet (a passing "
                        "run writes `artifacts/test-run.json`).")
    r = json.loads(path.read_text())
    return (["run", "wall time", "commit"],
            [["make test: unit tests, nbval over every notebook, book build, browser checks",
              f"{r['wall_time_s']:.0f} s", (r["commit"] or "?")[:10]]],
            f"Recorded on {r['date']} ({r['machine']}) by the last passing `make test` of the "
            "checkout that built this book (installation not included).")


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


RECORDS = {"trainer-speed": trainer_speed, "figure-times": figure_times, "test-run": test_run}


class RecordDirective(SphinxDirective):
    """``{qkov-record} KIND``: a record as the measurement wrote it, never typed by hand; a
    missing or malformed one fails the strict build."""

    required_arguments = 1

    def run(self):
        kind = self.arguments[0]
        for path in ["benchmarks/results/trainer-speed.json", "artifacts/test-run.json",
                     *(default_dir(f, self.env.srcdir) / "summary.json" for f in specs())]:
            self.env.note_dependency(str(Path(self.env.srcdir, path)))
        try:
            header, rows, note = RECORDS[kind](Path(self.env.srcdir))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self.error(f"qkov-record: {kind} is missing or malformed ({exc!r})") from exc
        lines = [header, ["---"] * len(header), *rows] if rows else []
        return self.parse_text_to_nodes("".join(f"| {' | '.join(r)} |\n" for r in lines)
                                        + "\n" + note)


class CitationDirective(SphinxDirective):
    """``{qkov-citation}``: the paper's entry of the bibliography, verbatim, and the
    companion's from CITATION.cff."""

    def run(self):
        bib = "".join(Path(self.env.srcdir, f).read_text() for f in self.config.bibtex_bibfiles)
        paper = re.search(rf"@\w+\{{{PAPER_KEY},.*?\n\}}", bib, re.S).group(0)
        return self.parse_text_to_nodes(f"```bibtex\n{paper}\n```\n\n```bibtex\n"
                                        f"{companion_bibtex(citation(self.env.srcdir))}\n```")


def _config(app, config) -> None:
    config.mathjax_path = MATHJAX
    # Jupyter Book refuses a repository button without a URL in _config.yml: it is off there.
    config.html_theme_options["repository_url"] = citation(app.srcdir)["repository-code"]
    config.html_theme_options["use_repository_button"] = True


def _copy_static(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        mathjax = resources.files("mathjax") / "static" / "mathjax" / "es5" / Path(MATHJAX).name
        for source, target in ((mathjax, MATHJAX), (Path(__file__).with_name(CSS_FILE), CSS_FILE)):
            Path(app.outdir, "_static", target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(str(source), Path(app.outdir, "_static", target))


def setup(app):
    app.add_css_file(CSS_FILE)
    app.add_directive("qkov-record", RecordDirective)
    app.add_directive("qkov-citation", CitationDirective)
    app.connect("config-inited", _config, priority=900)
    app.connect("build-finished", _copy_static)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
