"""The theory chapter's notebooks at a small scale: parameters, rows, artifacts, failures."""

import json

import nbformat
import pytest

from conftest import REPO
from qkov import theory_runs
from qkov.params import ParameterError

SMALL = ["-p", "m", "2", "-p", "n", "7", "-p", "b", "3.5", "-p", "M", "4"]


def run_notebook(run_tool, tmp_path, name, *args, check=True):
    return run_tool("papermill", REPO / "notebooks" / f"{name}.ipynb", tmp_path / "o.ipynb",
                    *args, check=check)


def first_error(tmp_path):
    executed = nbformat.read(tmp_path / "o.ipynb", as_version=4)
    return next(o for c in executed.cells if c.cell_type == "code"
                for o in c.get("outputs", []) if o.output_type == "error")


def test_reduction_notebook_tracks_the_ode(run_tool, tmp_path):
    out = tmp_path / "reduction"
    run_notebook(run_tool, tmp_path, "theory-reduction", *SMALL, "-y", "ratios: [0.5, 4]",
                 "-p", "target_loss", "0.1", "-p", "step_fraction", "0.0005",
                 "-p", "artifacts_dir", out)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["curves.csv", "data.csv", "figure.pdf", "figure.png", "figure.svg", "summary.json"])
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert [(r["r"], r["descent"]) for r in rows] == [
        (0.5, "full batch"), (0.5, "batch 4"), (4, "full batch"), (4, "batch 4")]
    for row in rows[::2]:  # full batch: on the set, within 1 % of the ODE
        assert row["max_distance_from_set"] < 1e-12
        assert max(row[f"err_{k}"] for k in ("mu_ov", "mu_qk", "alpha", "loss")) < 1e-2
    curves = (out / "curves.csv").read_text().splitlines()
    assert curves[0] == "r,source,tau,mu_ov,mu_qk,alpha,loss"


def fig2_summary(path, attention):
    rows = [{"panel": panel, "bin_lo": lo, "bin_hi": lo + 0.2, "pct_mean": 20.0,
             "pct_std": 0.0, "final_loss": 1e-3, "accuracy": 1.0,
             "attention_mean": value, "attention_mean_std": 0.01}
            for panel, value in attention.items() for lo in (0.0, 0.2, 0.4, 0.6, 0.8)]
    path.write_text(json.dumps({"figure": "paper-fig2", "rows": rows}))
    return path


def test_rescaling_notebook_compares_orderings(run_tool, tmp_path):
    out = tmp_path / "rescaling"
    summary = fig2_summary(tmp_path / "fig2.json",
                           {"FAFO": 0.3, "FACO": 0.9, "CAFO": 0.2, "CACO": 0.5})
    run_notebook(run_tool, tmp_path, "theory-rescaling", "-p", "fig2_summary", summary,
                 "-p", "init_scale", "0.01", "-p", "matched_loss", "0.01",
                 "-p", "artifacts_dir", out)
    rows = json.loads((out / "summary.json").read_text())["rows"]
    by_name = {r["parameterization"]: r for r in rows}
    assert set(by_name) == {"FAFO", "FACO", "CAFO", "CACO"}
    assert by_name["CACO"]["r_eff_at_loss"] == pytest.approx(1.0)
    assert by_name["FACO"]["r_eff_at_loss"] > 1 > by_name["CAFO"]["r_eff_at_loss"]
    assert sorted(r["measured_rank"] for r in rows) == [1, 2, 3, 4]
    assert by_name["FACO"]["measured_rank"] == 1
    text = "".join(o.get("text", "") for c in nbformat.read(tmp_path / "o.ipynb", 4).cells
                   if c.cell_type == "code" for o in c.outputs)
    assert "measured (paper-fig2):      FACO > CACO > FAFO > CAFO" in text


def test_rescaling_needs_the_fig2_summary(run_tool, tmp_path):
    out = tmp_path / "rescaling"
    result = run_notebook(run_tool, tmp_path, "theory-rescaling", "-p", "fig2_summary",
                          tmp_path / "missing.json", "-p", "artifacts_dir", out, check=False)
    assert result.returncode != 0
    error = first_error(tmp_path)
    assert error.ename == "ParameterError" and "parameter 'fig2_summary'" in error.evalue
    assert "paper-fig2" in error.evalue
    assert not out.exists(), "nothing may be written when parameters are bad"


def test_a_summary_without_attention_is_rejected(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"figure": "paper-fig2", "rows": [
        {"panel": "FAFO", "bin_lo": 0.8, "pct_mean": 1.0, "final_loss": 1e-3}]}))
    with pytest.raises(ParameterError, match=r"parameter 'fig2_summary'.*attention_mean"):
        theory_runs.measured_fig2_sharpness(path)


def test_ratio_sweep_notebook_at_a_small_scale(run_tool, tmp_path):
    out = tmp_path / "sweep"
    run_notebook(run_tool, tmp_path, "theory-ratio-sweep", *SMALL, "-y", "ratios: [0.1, 10]",
                 "-y", "seeds: [3, 4]", "-p", "matched_loss", "1.0", "-p", "max_epochs", "40",
                 "-p", "batches_per_epoch", "10", "-p", "eval_batches", "2",
                 "-p", "progress", "False", "-p", "artifacts_dir", out)
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert [r["r"] for r in rows] == [0.1, 10]
    for row in rows:
        assert row["alpha_stylized"] == pytest.approx(row["alpha_closed_form"], rel=1e-2)
        assert row["task_runs"] == 2
        assert row["task_distinct_mean"] <= row["task_informative_mean"] <= 1
    assert rows[1]["alpha_closed_form"] > rows[0]["alpha_closed_form"]


REDUCTION = {"m": 5, "n": 50, "b": 50.0, "M": 20, "eta_ov": 1.0, "ratios": [1], "target_loss": 0.01,
             "step_fraction": 1e-3, "batch_size": 4, "seed": 0, "artifacts_dir": None}
SWEEP = {"m": 5, "n": 50, "b": 50.0, "M": 20, "ratios": [1], "matched_loss": 0.05,
         "step_fraction": 1e-3, "seeds": [1], "lr_ov": 0.1, "T": 64, "batches_per_epoch": 50,
         "max_epochs": 10, "eval_batches": 10, "workers": 1, "progress": False,
         "artifacts_dir": None}


@pytest.mark.parametrize("bad, name", [
    ({"m": 2.5}, "m"), ({"M": 1}, "M"), ({"ratios": []}, "ratios"), ({"ratios": [0]}, "ratios"),
    ({"target_loss": 3.5}, "target_loss"), ({"step_fraction": 0.5}, "step_fraction"),
    ({"batch_size": 0}, "batch_size"),
])
def test_reduction_parameters_are_checked(bad, name):
    with pytest.raises(ParameterError, match=f"parameter '{name}'"):
        theory_runs.validate_reduction({**REDUCTION, **bad})


@pytest.mark.parametrize("bad, name", [
    ({"seeds": [1, 1]}, "seeds"), ({"matched_loss": 0}, "matched_loss"), ({"T": 2}, "T"),
    ({"lr_ov": 0}, "lr_ov"), ({"max_epochs": 0}, "max_epochs"), ({"workers": 0}, "workers"),
])
def test_sweep_parameters_are_checked(bad, name):
    with pytest.raises(ParameterError, match=f"parameter '{name}'"):
        theory_runs.validate_sweep({**SWEEP, **bad})
