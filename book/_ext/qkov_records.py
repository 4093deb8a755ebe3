"""The ``qkov-record`` directive: a table of what was measured, so the numbers the book
shows are the measurement's, never typed by hand:

- ``trainer-speed``: ``benchmarks/results/trainer-speed.json``, the trainer benchmark's last
  full run (committed with the benchmark's changes); missing or malformed, it fails the
  strict build with the file's name;
- ``figure-times``: each figure's wall time, machine and commit, from the ``summary.json``
  of the sets the book shows (each run records its own);
- ``test-run``: ``artifacts/test-run.json``, the last passing ``make test`` of this
  checkout, when there is one (not committed: a timing is a record, not a source).
"""

from __future__ import annotations

import json
from pathlib import Path

from qkov_nodes import _table
from sphinx.util.docutils import SphinxDirective

from qkov.artifacts import default_dir
from qkov.figures import specs

# relative to the book's source folder
TRAINER_SPEED = Path("benchmarks") / "results" / "trainer-speed.json"
TEST_RUN = Path("artifacts") / "test-run.json"


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


def figure_times_rows(srcdir: Path) -> tuple[list[str], list[list[str]], str]:
    rows, total = [], 0.0
    for figure_id, spec in specs().items():
        try:
            made = json.loads((default_dir(figure_id, srcdir) / "summary.json").read_text())
            provenance = made["provenance"]
            machine = provenance["machine"]
        except (OSError, ValueError, KeyError, TypeError):
            if spec.needs_dataset:
                continue  # not run where the book is built
            raise
        total += provenance["wall_time_s"]
        rows.append([figure_id, f"{provenance['wall_time_s']:.0f} s",
                     f"{machine['cpu_model']}, {machine['cpu_count']} cores",
                     (provenance["commit"] or "?")[:10]
                     + (" with uncommitted changes" if provenance.get("uncommitted_changes")
                        else "")])
    rows.append(["all of them", f"{total:.0f} s", "", ""])
    note = ("Each figure's own record of the run the book shows (its `summary.json`): the "
            "notebook's computation, without the kernel's start-up.")
    return ["figure id", "wall time", "machine", "commit"], rows, note


def test_run_rows(srcdir: Path) -> tuple[list[str], list[list[str]], str]:
    path = Path(srcdir) / TEST_RUN
    if not path.is_file():
        return [], [], (f"No passing `make test` is recorded in this checkout yet (a passing "
                        f"run writes `{TEST_RUN}`).")
    r = json.loads(path.read_text())
    rows = [["make test: unit tests, nbval over every notebook, book build, browser checks",
             f"{r['wall_time_s']:.0f} s", (r["commit"] or "?")[:10]]]
    note = (f"Recorded on {r['date']} ({r['machine']}) by the last passing `make test` of "
            "the checkout that built this book (installation not included).")
    return ["run", "wall time", "commit"], rows, note


def trainer_speed(srcdir: Path) -> tuple[list[str], list[list[str]], str]:
    return trainer_speed_rows(json.loads((Path(srcdir) / TRAINER_SPEED).read_text()))


RECORD_KINDS = {"trainer-speed": trainer_speed, "figure-times": figure_times_rows,
                "test-run": test_run_rows}


class RecordDirective(SphinxDirective):
    """``{qkov-record} KIND`` (a key of RECORD_KINDS): a table from that JSON record."""

    required_arguments = 1

    def run(self):
        kind = self.arguments[0]
        if kind not in RECORD_KINDS:
            raise self.error(f"qkov-record: unknown record {kind!r}; "
                             f"expected one of {', '.join(RECORD_KINDS)}")
        srcdir = Path(self.env.srcdir)
        read = {"trainer-speed": [srcdir / TRAINER_SPEED], "test-run": [srcdir / TEST_RUN],
                "figure-times": [default_dir(f, srcdir) / "summary.json" for f in specs()]}
        for path in read[kind]:  # rebuilt when a record changes
            self.env.note_dependency(str(path))
        try:
            header, rows, note = RECORD_KINDS[kind](srcdir)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self.error(f"qkov-record: the {kind} record is missing or malformed "
                             f"({exc!r}); regenerate it (see the reproducibility page)"
                             ) from exc
        if not rows:
            return self.parse_text_to_nodes(note)
        return [_table(header, rows), *self.parse_text_to_nodes(note)]  # `code` as code


def setup(app):
    app.add_directive("qkov-record", RecordDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
