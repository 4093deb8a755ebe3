"""The paper-fig4 notebook run through papermill: parameters, artifacts, failures."""

import json

import nbformat
import pytest

from conftest import REPO

NOTEBOOK = REPO / "notebooks" / "paper-fig4.ipynb"


@pytest.mark.parametrize("cwd", [REPO, REPO / "notebooks"], ids=["repo-root", "notebooks"])
def test_runs_from_root_and_notebooks_and_writes_artifacts(run_tool, tmp_path, cwd):
    out = tmp_path / "fig4"
    nb_path = NOTEBOOK.relative_to(cwd)
    # "1e0": YAML 1.1 (papermill's -y) reads it as text; the notebook reads the number.
    run_tool("papermill", nb_path, tmp_path / "out.ipynb", "-p", "artifacts_dir", out,
             "-y", "ratios: [0.1, 10]\nloss_max: 1e0", cwd=cwd)
    assert sorted(p.name for p in out.iterdir()) == [
        "data.csv", "figure.pdf", "figure.png", "figure.svg", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["figure"] == "paper-fig4"
    assert summary["parameters"]["ratios"] == [0.1, 10]
    assert summary["parameters"]["loss_max"] == 1.0
    assert summary["provenance"]["custom_parameters"] == ["ratios"]
    assert {"commit", "qkov_version", "wall_time_s", "machine"} <= set(summary["provenance"])
    rows = summary["rows"]
    assert {"r", "loss", "mu_ov", "mu_qk", "alpha"} <= set(rows[0])
    for r in (0.1, 10):
        assert {row["loss"] for row in rows if row["r"] == r} >= {1.0, 1e-2, 1e-4}
    at = {row["r"]: row["alpha"] for row in rows if row["loss"] == 1e-4}
    assert at[10] > at[0.1]
    csv_lines = (out / "data.csv").read_text().splitlines()
    assert csv_lines[0].startswith("r,loss,") and len(csv_lines) == len(rows) + 1
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_bad_parameter_fails_in_the_kernel_before_any_work(run_tool, tmp_path):
    """The papermill route: a name papermill injects that the figure does not declare is
    told apart from the kernel's own globals and named, and nothing is written. (Each
    check's message is tested in-process: tests/test_params.py, test_figures.py.)"""
    out = tmp_path / "fig4"
    result = run_tool("papermill", NOTEBOOK, tmp_path / "out.ipynb", "-p", "artifacts_dir",
                      out, "-p", "ratio", "3", check=False)
    assert result.returncode != 0
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert errors and errors[0].ename == "ParameterError"
    assert "parameter 'ratio': unknown parameter" in errors[0].evalue
    assert not out.exists(), "nothing may be written when parameters are bad"
