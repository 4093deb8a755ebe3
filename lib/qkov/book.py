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
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

RECORDS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

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
    step = r["step"]
    rows = [
        ["(a) per-model baseline", f"{r['baseline_model_steps_per_s']:,.0f}", "1x"],
        ["(b) qkov.synthetic.train, one process", f"{r['trainer_model_steps_per_s']:,.0f}",
         f"{r['speedup_one_process']:.1f}x"],
        [f"(c) qkov.synthetic.train, {r['workers']} worker processes",
         f"{r['trainer_workers_model_steps_per_s']:,.0f}", f"{r['speedup_workers']:.1f}x"],
    ]
    note = (f"Measured on {r['date']} ({r['machine']}; {r['trainer_steps']:,} steps of each "
            f"of the {r['workload']}). One step of (b) for all {step['members']} runs: "
            f"{step['sampling_us']:.0f} us drawing the data ({step['streams']} streams), "
            f"{step['layout_us']:.0f} us laying it out, {step['ensemble_math_us']:.0f} us in "
            f"{step['operators_per_step']:.0f} PyTorch operators, "
            f"{step['overhead_us']:.0f} us Python and dispatch. The trainer does "
            f"{r['mflop_per_model_step']:.2f} MFLOP of matrix work per model-step: (c) runs "
            f"at {r['trainer_gflops']:.1f} GFLOP/s, "
            f"{100 * r['fraction_of_batched_matmul']:.0f}% of a batched matmul of the same "
            f"shape ({r['batched_matmul_gflops']:.0f} GFLOP/s) and "
            f"{100 * r['trainer_gflops'] / r['large_matmul_gflops']:.0f}% of a large matmul "
            f"({r['large_matmul_gflops']:.0f} GFLOP/s).")
    return ["", "model-steps/s", "vs (a)"], rows, note


def figures_run_rows(r: dict) -> tuple[list[str], list[list[str]], str]:
    rows = [[f, f"{v['wall_time_s']:.0f} s", (v["commit"] or "?")[:10]]
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
                             f"({exc!r}); regenerate it (see the reproducibility page)")
        return [_table(header, rows), nodes.paragraph(text=note)]


def setup(app):
    mathjax_source()  # fail at start, not after a long build, if MathJax is not installed
    app.add_directive("qkov-record", RecordDirective)
    app.connect("config-inited", _use_local_mathjax, priority=900)
    app.connect("build-finished", _copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
