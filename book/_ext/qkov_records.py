"""The ``qkov-record`` directive: a table from a JSON file that a measurement wrote
(``benchmarks/results/trainer-speed.json`` from the trainer benchmark,
``benchmarks/results/figures-run.json`` from the last from-scratch ``make figures``,
``benchmarks/results/test-run.json`` from the last passing ``make test``), so the numbers
the book shows are the measurement's, never typed by hand. A missing or malformed record
fails the (strict) build with the file's name.
"""

from __future__ import annotations

import json
from pathlib import Path

from qkov_nodes import _table
from sphinx.util.docutils import SphinxDirective

RECORDS = Path("benchmarks") / "results"  # relative to the book's source folder


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


def setup(app):
    app.add_directive("qkov-record", RecordDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
