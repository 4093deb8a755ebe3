"""The regeneration pipeline: stored notebooks, Snakemake's view of what is stale, nbval."""

import copy
import os
import re
import shutil
import time

import nbformat

from conftest import REPO
from qkov.figures import specs
from qkov_tools import records
from qkov_tools.imports import library_inputs
from qkov_tools.notebooks import strip

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def test_stored_notebooks_are_stripped_and_executed():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert "papermill" not in nb.metadata, path.name
        code = [c for c in nb.cells if c.cell_type == "code"]
        # The install cell (tests/test_project.py), then the parameters.
        assert "parameters" in code[1].metadata.get("tags", []), path.name
        for cell in code:
            assert "papermill" not in cell.metadata and "execution" not in cell.metadata
            assert not [o for o in cell.outputs if o.output_type == "error"], path.name
        # A figure is shown directly (image/png) or glued for a {glue:figure} caption
        # (application/papermill.record/image/png).
        def pngs(cell):
            return sum(any(k.endswith("image/png") for k in o.get("data", {}))
                       for o in cell.outputs)
        images = [c for c in code if pngs(c)]
        # A real-data notebook (its SPEC says needs_dataset) is stored as run without its
        # data, which cannot be downloaded here: it draws nothing.
        if specs()[path.stem].needs_dataset:
            assert not images, f"{path.name} stored a figure of data the build cannot have"
            continue
        assert images, f"{path.name} has no stored figure"
        for cell in images:  # one image per figure cell, or the book's label is duplicated
            assert pngs(cell) == 1, path.name


def test_strip_removes_only_volatile_metadata():
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    dirty = copy.deepcopy(nb)
    dirty.metadata["papermill"] = {"start_time": "2026-01-01T00:00:00", "duration": 1.0}
    for cell in dirty.cells:
        cell.metadata["papermill"] = {"duration": 0.1}
        if cell.cell_type == "code":
            cell.metadata["execution"] = {"iopub.execute_input": "2026-01-01"}
    assert strip(dirty) == nb


def make_workflow_copy(tmp_path):
    for name in ("Snakefile", "lib", "notebooks"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / name)
    return tmp_path


def dry_run(run_tool, workdir):
    return run_tool("snakemake", "--dry-run", "--cores", "1", cwd=workdir).stdout


def test_snakemake_reruns_a_figure_when_the_library_changes(run_tool, tmp_path):
    work = make_workflow_copy(tmp_path)
    plan = dry_run(run_tool, work)
    assert "paper_fig4" in plan  # no outputs yet
    # Every output present and newer than every input: nothing to do.
    summary = run_tool("snakemake", "--summary", "--cores", "1", cwd=work).stdout
    outputs = [line.split("\t")[0] for line in summary.splitlines()[1:] if "\t" in line]
    assert "artifacts/paper-fig2/summary.json" in outputs
    later = time.time() + 5
    for name in outputs:
        out = work / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("x")
        os.utime(out, (later, later))
    assert "Nothing to be done" in dry_run(run_tool, work)
    # A module only a figure without a rule imports (it needs a dataset) re-runs nothing.
    os.utime(work / "lib" / "qkov" / "figures" / "language_squad.py", (later + 5, later + 5))
    assert "Nothing to be done" in dry_run(run_tool, work)
    # Editing a module re-runs the figures that import it, directly or not, and only those,
    # and the figures that read their files: Fig. 4 and the theory chapter use
    # qkov.theory.reduced, Figs. 2 and 3 do not; the claims ledger reads the theory's files.
    os.utime(work / "lib" / "qkov" / "theory" / "reduced.py", (later + 5, later + 5))
    plan = dry_run(run_tool, work)
    assert "Updated input files: lib/qkov/theory/reduced.py" in plan
    planned = set(re.findall(r"^rule (\w+):", plan, flags=re.MULTILINE))
    assert planned == {"all", "paper_fig4", "theory_reduction", "theory_rescaling",
                       "theory_ratio_sweep", "claims_ledger"}, plan


def test_each_figure_rule_is_made_from_its_spec(run_tool):
    """The Snakefile's rules are the specs: outputs, threads and cluster resources. `all`
    leaves out the figures that need a dataset."""
    plan = run_tool("snakemake", "--dry-run", "--forceall", "--cores", "2").stdout
    jobs = {m.group(1): m.group(2) for m in re.finditer(
        r"^(?:local)?rule (\w+):\n(.*?)(?=^\[|^(?:local)?rule |\Z)", plan, re.M | re.S)}
    built = [s for s in specs().values() if not s.needs_dataset]
    assert set(jobs) == {"all"} | {s.module for s in built}, plan[-3000:]
    for spec in built:
        job = jobs[spec.module]
        assert f"output: {', '.join(spec.outputs())}\n" in job
        assert f"threads: {spec.threads}\n" in job or spec.threads == 1, job
        for name, value in spec.resources.items():
            assert f"{name}={value}" in job, (spec.id, name, job)


def test_nbval_detects_a_changed_result(run_tool, tmp_path):
    """The nbval check can fail: a stored number that the code does not reproduce."""
    nb = nbformat.read(REPO / "notebooks" / "paper-fig4.ipynb", as_version=4)
    stream = next(o for c in nb.cells if c.cell_type == "code" for o in c.outputs
                  if o.output_type == "stream" and "mu_ov" in o.text)
    assert "0.5588" in stream.text
    stream.text = stream.text.replace("0.5588", "0.5589")
    nbformat.write(nb, tmp_path / "paper-fig4.ipynb")
    result = run_tool("pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
                      "--nbval-sanitize-with", REPO / "tests" / "nbval-sanitize.cfg",
                      tmp_path / "paper-fig4.ipynb", "--rootdir", tmp_path, check=False)
    assert result.returncode == 1, result.stdout[-2000:]
    assert "0.5589" in result.stdout and "1 failed" in result.stdout


def test_a_cell_tagged_for_tolerance_accepts_last_digit_rounding_only(run_tool, tmp_path):
    """tests/nbval_tolerance.py: a cell tagged nbval-ignore-output and nbval-tolerance passes
    with a stored number a unit off in its last digit (another machine's float32 rounding)
    and fails with one that is off by more than the tolerance; a glued figure's PNG is not
    compared (tests/nbval-sanitize.cfg); a cell tagged for tolerance alone is refused."""
    nb = nbformat.read(REPO / "notebooks" / "paper-fig4.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" for o in c.outputs
                if o.output_type == "stream" and "mu_ov" in o.text)
    glued = next(o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                 if "application/papermill.record/image/png" in o.get("data", {}))
    glued.data["application/papermill.record/image/png"] = "iVBORw0KGgoAAAA"  # not the figure
    original = cell.outputs[0].text
    for tags, stored, passes in ((["nbval-ignore-output", "nbval-tolerance"], "0.5589", True),
                                 (["nbval-ignore-output", "nbval-tolerance"], "0.5688", False),
                                 (["nbval-tolerance"], "0.5588", False)):
        cell.metadata["tags"] = tags
        cell.outputs[0].text = original.replace("0.5588", stored)
        nbformat.write(nb, tmp_path / "paper-fig4.ipynb")
        result = run_tool("pytest", "-p", "nbval_tolerance", "--nbval", "--nbval-current-env",
                          "-p", "no:cacheprovider", "--nbval-sanitize-with",
                          REPO / "tests" / "nbval-sanitize.cfg", tmp_path / "paper-fig4.ipynb",
                          "--rootdir", tmp_path, check=False,
                          env={"PYTHONPATH": os.pathsep.join(
                              [str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])})
        assert (result.returncode == 0) == passes, (stored, result.stdout[-2000:])
        if stored == "0.5688":
            assert "differ beyond the tolerance" in result.stdout and "0.5688" in result.stdout
        if tags == ["nbval-tolerance"]:
            assert "must also be tagged nbval-ignore-output" in result.stdout + result.stderr


def test_the_tolerance_rules_on_printed_results():
    from nbval_tolerance import texts_close

    # Seen between two machines: last digits, a half-width, a drift.
    assert texts_close("0.0009997 ± 1.3e-05  38.33 ± 0.49", "0.0009998 ± 1.3e-05  38.33 ± 0.52")
    assert texts_close("0.00023   0.00081", "0.00023   0.00082")
    assert texts_close("FAFO-qk20x  687.8 ± 1", "FAFO-qk20x    688 ± 0.96")  # columns widen
    assert not texts_close("0.5588", "0.5688")  # 1.8%: more than rounding
    assert not texts_close("38.33 ± 0.49", "38.33 ± 0.70")  # a half-width 43% off
    assert not texts_close("FAFO 0.5", "FACO 0.5")  # other text


def test_a_glued_value_is_compared_like_printed_text():
    """A number glued for the book to quote (myst-nb's text record) gets the same tolerance
    as a printed one in a cell tagged nbval-tolerance; a glued PNG is not compared, any
    other difference in the outputs is."""
    from nbval_tolerance import output_differences

    def glued(text, png="iVBORw0KGgoAAAA"):
        return nbformat.v4.new_output("display_data", data={
            "application/papermill.record/text/plain": text,
            "application/papermill.record/image/png": png})

    def printed(*texts):  # a print arrives in pieces: streams of one name are joined
        return [nbformat.v4.new_output("stream", name="stdout", text=t) for t in texts]

    stored = [glued("'0.8831 ± 0.16'")]
    assert output_differences([glued("'0.8832 ± 0.17'", png="iVBORw0KGgoBBBB")], stored) == []
    assert output_differences([glued("'0.9831 ± 0.16'")], stored)
    assert output_differences(printed("a 0.4833\n", "b 1\n"), printed("a 0.4834\nb 1\n")) == []
    assert output_differences(printed("a 0.4833\n"), stored)  # another kind of output
    assert output_differences(printed("in /tmp/x 0.5\n"), printed("in /tmp/y 0.5\n"))
    from nbval_tolerance import sanitize_patterns
    masks = sanitize_patterns(REPO / "tests" / "nbval-sanitize.cfg")
    assert output_differences(printed("in /tmp/x 0.5\n"), printed("in /tmp/y 0.5\n"),
                                 masks) == []


def test_a_passing_test_run_is_recorded(tmp_path):
    import json

    path = records.record_test(since=1000.0, now=1060.5, root=tmp_path)
    assert path == tmp_path / "artifacts" / "test-run.json"  # not committed
    record = json.loads(path.read_text())
    assert record["wall_time_s"] == 60.5 and record["date"] == "1970-01-01"
    assert "cores" in record["machine"] and "commit" in record


def test_the_trainer_is_an_input_of_the_figures_that_train():
    """Editing the trainer must re-run the trained figures, and only those."""
    inputs = {nb: library_inputs(f"notebooks/{nb}.ipynb", REPO)
              for nb in ("paper-fig2", "paper-fig3", "paper-fig4")}
    for module in ("lib/qkov/synthetic/models.py", "lib/qkov/synthetic/train.py"):
        assert module in inputs["paper-fig2"] and module in inputs["paper-fig3"]
        assert module not in inputs["paper-fig4"]
