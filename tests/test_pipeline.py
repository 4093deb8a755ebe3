"""The pipeline: stored notebooks without volatile metadata, Snakemake's rules and what makes
them stale, and nbval's contract (tests/nbval_tolerance.py)."""

import copy
import os
import re
import shutil
import subprocess
import time

import nbformat
import pytest

from conftest import BIN, REPO
from nbval_tolerance import texts_close
from qkov.figures import specs
from qkov_tools.notebooks import strip


def test_stored_notebooks_change_only_with_their_results():
    """Stored without papermill's and nbclient's timestamps and durations, and nothing else."""
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        dirty = copy.deepcopy(nb)
        dirty.metadata["papermill"] = {"start_time": "2026-01-01T00:00:00", "duration": 1.0}
        for cell in dirty.cells:
            cell.metadata["papermill"] = {"duration": 0.1}
            cell.metadata["execution"] = {"iopub.execute_input": "2026-01-01"}
        assert strip(dirty) == nb, path.name


def test_snakemake_rules_are_the_specs_and_rerun_what_a_change_touches(run_tool, tmp_path):
    """A rule per figure needing no dataset, with its spec's outputs, threads and resources;
    nothing to do when outputs are newer than inputs; editing a module re-runs exactly the
    figures whose notebooks import it, directly or not, and those that read their files."""
    for name in ("Snakefile", "lib", "notebooks"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy2)(REPO / name, tmp_path / name)
    dry_run = lambda: run_tool("snakemake", "--dry-run", "--cores", "2", cwd=tmp_path).stdout  # noqa: E731
    plan = dry_run()
    jobs = {m.group(1): m.group(2) for m in re.finditer(
        r"^(?:local)?rule (\w+):\n(.*?)(?=^\[|^(?:local)?rule |\Z)", plan, re.M | re.S)}
    built = [s for s in specs().values() if not s.needs_dataset]
    assert set(jobs) == {"all"} | {s.module for s in built}, plan[-3000:]
    for spec in built:
        assert f"output: {', '.join(spec.outputs())}\n" in jobs[spec.module]
        assert f"threads: {spec.threads}\n" in jobs[spec.module] or spec.threads == 1
        assert all(f"{k}={v}" in jobs[spec.module] for k, v in spec.resources.items()), spec.id
    later = time.time() + 5
    for output in (output for spec in built for output in spec.outputs()):
        (tmp_path / output).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / output).write_text("x")
        os.utime(tmp_path / output, (later, later))
    assert "Nothing to be done" in dry_run()
    os.utime(tmp_path / "lib" / "qkov" / "theory" / "reduced.py", (later + 5, later + 5))
    plan = dry_run()
    assert "Updated input files: lib/qkov/theory/reduced.py" in plan
    assert set(re.findall(r"^rule (\w+):", plan, flags=re.M)) == {
        "all", "paper_fig4", "theory_reduction", "theory_rescaling", "theory_ratio_sweep",
        "claims_ledger"}, plan  # Fig. 4 and the theory use it; the ledger reads their files


# A cell as a trained figure's: a glued value and figure, a table, a result. Stored outputs:
# another machine's (another PNG, another temporary path), changed as each case says.
CELL = """\
from IPython.display import display
display({"application/papermill.record/text/plain": "'0.8831 ± 0.16'",
         "application/papermill.record/image/png": "iVBORw0KGgoAAAA"}, raw=True)
print("FAFO-qk20x 687.8 ± 1 in /tmp/x")
print("mu_ov 0.5588")"""
TOLERANCE = ["nbval-ignore-output", "nbval-tolerance"]
CASES = {"exact": ([], "'0.8831 ± 0.16'", "FAFO-qk20x 687.8 ± 1", "0.5588", True),
         "exact-changed": ([], "'0.8831 ± 0.16'", "FAFO-qk20x 687.8 ± 1", "0.5589", False),
         "tolerance": (TOLERANCE, "'0.8832 ± 0.17'", "FAFO-qk20x   688 ± 0.96", "0.5589", True),
         "beyond-tolerance": (TOLERANCE, "'0.8831 ± 0.16'", "FAFO-qk20x 687.8 ± 1", "0.5688",
                              False)}


def notebook(path, tags, glued, row, result):
    cell = nbformat.v4.new_code_cell(CELL, metadata={"tags": tags}, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "application/papermill.record/text/plain": glued,
        "application/papermill.record/image/png": "iVBORw0KGgoBBBB"}),
        nbformat.v4.new_output("stream", name="stdout", text=f"{row} in /tmp/y\nmu_ov {result}\n")]
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)


def test_nbval_compares_exactly_or_within_the_tolerance_where_tagged(run_tool, tmp_path):
    """An untagged cell compared exactly but for what nbval-sanitize.cfg masks; one tagged for
    tolerance within it in printed and glued text; nbval-tolerance alone is refused."""
    def pytest_(*paths):
        result = run_tool(
            "pytest", "-p", "nbval_tolerance", "--nbval", "--nbval-current-env", "-p",
            "no:cacheprovider", "-rA", "--rootdir", ".", "--nbval-sanitize-with",
            REPO / "tests" / "nbval-sanitize.cfg", *paths, cwd=tmp_path, check=False,
            env={"PYTHONPATH": f"{REPO / 'tests'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
        return result.stdout + result.stderr

    for name, (*stored, _) in CASES.items():
        notebook(tmp_path / f"{name}.ipynb", *stored)
    out = pytest_(*(f"{name}.ipynb" for name in CASES))
    for name, (*_, passes) in CASES.items():
        assert f"{'PASSED' if passes else 'FAILED'} {name}.ipynb::" in out, (name, out[-3000:])
    assert "differ beyond the tolerance" in out and "mu_ov 0.5688" in out
    notebook(tmp_path / "alone.ipynb", ["nbval-tolerance"], *CASES["exact"][1:4])
    assert "must also be tagged nbval-ignore-output" in pytest_("alone.ipynb")


@pytest.mark.notebook
def test_a_notebook_validates_alone_as_in_the_suite():
    """With the suite's environment (pipeline_env): else the figure says it wrote a run folder."""
    result = subprocess.run(
        [BIN / "pytest", "-p", "no:cacheprovider", "notebooks/model-schematic.ipynb"], cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("QKOV_")},
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_tolerance_is_last_digits_and_a_looser_half_width_not_more():
    assert texts_close("0.0009997 ± 1.3e-05  38.33 ± 0.49", "0.0009998 ± 1.3e-05  38.33 ± 0.52")
    assert not texts_close("38.33 ± 0.49", "38.33 ± 0.70")  # a half-width 43% off
    assert not texts_close("0.5588", "0.5688") and not texts_close("FAFO 0.5", "FACO 0.5")
