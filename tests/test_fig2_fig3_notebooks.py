"""The paper-fig2 and paper-fig3 notebooks at a tiny scale: parameters, rows, artifacts."""

import csv
import json

import numpy as np
import pytest

from conftest import REPO
from qkov.checks import ParameterError
from qkov.figures import fig2_controls, paper_fig2, paper_fig3


def test_fig2_notebook_writes_its_artifacts(run_tool, tmp_path):
    out = tmp_path / "fig2"
    run_tool("papermill", REPO / "notebooks" / "paper-fig2.ipynb", tmp_path / "o.ipynb",
             "-p", "epochs_scale", "0.002", "-p", "eval_batches", "3", "-p", "progress",
             "False", "-y", "seeds: [7, 8]", "-p", "artifacts_dir", out)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["data.csv", "figure.pdf", "figure.png", "figure.svg",
                            "figure-std.pdf", "figure-std.png", "figure-std.svg",
                            "figure-trajectories.pdf", "figure-trajectories.png",
                            "figure-trajectories.svg", "heatmaps.csv", "trajectories.csv",
                            "matched-loss.csv", "summary.json"])
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["rows"]
    assert len(rows) == 8 * 5
    assert set(rows[0]) == {"panel", "bin_lo", "bin_hi", "pct_mean", "pct_std",
                            "final_loss", "accuracy", "attention_mean", "attention_mean_std",
                            "attention_mean_ci95", "top_row_pct", "epochs_mean", "epochs_ci95",
                            "separability_mean", "separability_ci95"}
    assert all(0 <= r["attention_mean"] <= 1 for r in rows)
    for key in {r["panel"] for r in rows}:
        assert sum(r["pct_mean"] for r in rows if r["panel"] == key) == pytest.approx(100)
    assert len((out / "heatmaps.csv").read_text().splitlines()) == 8 * 25 + 1
    # One trajectory row per run and measured epoch, epoch 0 (before training) included.
    trajectories = (out / "trajectories.csv").read_text().splitlines()
    assert trajectories[0] == ("panel,seed,epoch,loss,attention_distinct,attention_class,"
                               "rate_qk,rate_ov,conserved_qk,conserved_ov")
    epochs = {p.key: max(1, round(p.template.epochs * 0.002)) for p in paper_fig2.PANELS}
    assert len(trajectories) - 1 == 2 * sum(e + 1 for e in epochs.values())
    start = [line.split(",") for line in trajectories[1:] if line.split(",")[2] == "0"]
    faco = [float(row[3]) for row in start if row[0] == "FACO"]  # from 1e-6 I: loss log 50
    assert len(faco) == 2 and faco == pytest.approx([np.log(50)] * 2, abs=1e-4)
    # FACO's factorized QK circuit starts at 1e-6 I: rate factor 2e-12, balanced (quantity 0);
    # its collapsed OV circuit has rate 1 and no conserved quantity (an empty field)
    faco_start = [row for row in start if row[0] == "FACO"][0]
    assert float(faco_start[6]) == pytest.approx(2e-12, rel=1e-5) and float(faco_start[7]) == 1
    assert float(faco_start[8]) == 0 and faco_start[9] == ""


def test_fig3_notebook_writes_its_artifacts(run_tool, tmp_path):
    out = tmp_path / "fig3"
    run_tool("papermill", REPO / "notebooks" / "paper-fig3.ipynb", tmp_path / "o.ipynb",
             "-p", "epochs", "2", "-p", "batches_per_epoch", "10", "-p", "eval_batches", "3",
             "-p", "progress", "False", "-y", "alphas: [0.5, 1.0]", "-y", "seeds: [3, 4, 5]",
             "-p", "artifacts_dir", out)
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert [(r["ov"], r["alpha"]) for r in rows] == [
        ("collapsed", 0.5), ("collapsed", 1.0), ("factorized", 0.5), ("factorized", 1.0)]
    statistics = ("final_loss", "peak_sensitivity", "epoch_of_peak", "min_sensitivity",
                  "epoch_of_min")
    assert set(rows[0]) == {"ov", "alpha", "seeds", *statistics,
                            *(f"{name}_ci95" for name in statistics),
                            *(f"{name}_{k}" for name in statistics if name.startswith("epoch")
                              for k in ("median", "min", "max"))}
    assert all(r["seeds"] == 3 and r["final_loss_ci95"] > 0 for r in rows)
    assert all(r["min_sensitivity"] <= r["peak_sensitivity"] for r in rows)
    assert all(r["peak_sensitivity"] == 0 for r in rows if r["alpha"] == 1.0)
    with open(out / "curves.csv") as f:
        curves = list(csv.DictReader(f))
    assert list(curves[0]) == ["ov", "alpha", "seed", "epoch", "loss", "sensitivity"]
    assert len(curves) == 4 * 3 * 3  # runs x seeds x epochs 0..2
    # The table's mean is the mean of the seeds' own final losses.
    finals = [float(c["loss"]) for c in curves if c["ov"] == "collapsed"
              and float(c["alpha"]) == 0.5 and c["epoch"] == "2"]
    assert rows[0]["final_loss"] == pytest.approx(np.mean(finals))


FIG2 = {"seeds": [1, 2], "epochs_scale": 1.0, "eval_batches": 200, "trajectory_batches": 16,
        "workers": 2, "progress": True, "artifacts_dir": None}
FIG3 = {"alphas": [0.2, 1.0], "epochs": 500, "batches_per_epoch": 250, "seeds": [1234],
        "lr": 0.01, "eval_batches": 250, "d": 0.005, "workers": 2, "progress": True,
        "artifacts_dir": None}


@pytest.mark.parametrize("bad, name", [
    ({"seeds": [1, 1]}, "seeds"), ({"seeds": [1.5]}, "seeds"), ({"epochs_scale": 0}, "epochs_scale"),
    ({"epochs_scale": 2.0}, "epochs_scale"), ({"eval_batches": 0}, "eval_batches"),
    ({"progress": "yes"}, "progress"), ({"workers": 0}, "workers"),
    ({"trajectory_batches": 0}, "trajectory_batches"),
])
def test_fig2_parameters_are_checked(bad, name):
    with pytest.raises(ParameterError, match=f"parameter '{name}'"):
        paper_fig2.Parameters(**{**FIG2, **bad})


@pytest.mark.parametrize("bad, name", [
    ({"alphas": [0.0]}, "alphas"), ({"alphas": [1.2]}, "alphas"), ({"epochs": 0}, "epochs"),
    ({"lr": -1}, "lr"), ({"d": 0.0}, "d"), ({"seeds": [-1]}, "seeds"),
])
def test_fig3_parameters_are_checked(bad, name):
    with pytest.raises(ParameterError, match=f"parameter '{name}'"):
        paper_fig3.Parameters(**{**FIG3, **bad})


def test_controls_notebook_compares_row_2_with_its_controls(run_tool, tmp_path):
    fig2 = tmp_path / "fig2"
    run_tool("papermill", REPO / "notebooks" / "paper-fig2.ipynb", tmp_path / "f.ipynb",
             "-p", "epochs_scale", "0.002", "-p", "eval_batches", "3", "-p", "progress",
             "False", "-y", "seeds: [7, 8]", "-p", "artifacts_dir", fig2)
    out = tmp_path / "controls"
    run_tool("papermill", REPO / "notebooks" / "fig2-controls.ipynb", tmp_path / "o.ipynb",
             "-p", "epochs_scale", "0.002", "-p", "eval_batches", "3", "-p", "progress",
             "False", "-y", "seeds: [7, 8]", "-y", "qk_rates: [0.1]",
             "-y", "matched_losses: [3.0, 1.0]", "-p", "fig2_summary", fig2 / "summary.json",
             "-p", "artifacts_dir", out)
    with open(out / "data.csv") as f:
        rows = list(csv.DictReader(f))
    pairs = {(r["panel"], r["control"]) for r in rows}
    assert pairs == {("FAFO-qk20x", "FAFO-r1"), ("FAFO-ramp40x", "FAFO-r1"),
                     ("CACO-qk5x", "CACO-T128-r1"), ("CACO-ramp10x", "CACO-T128-r1"),
                     ("CACO-T128-qk0.1", "CACO-T128-r1")}
    assert {r["verdict"] for r in rows} <= {"sharper", "blunter", "tie", "not resolved",
                                            "not reached"}
    # FAFO from 1e-6 I still attends uniformly at loss 3 (below log 50 = 3.9), whatever its
    # QK rate (its QK factors have not moved), if these few epochs reach it at all
    assert {r["verdict"] for r in rows if float(r["loss"]) == 3.0
            and r["panel"].startswith("FAFO")} <= {"tie", "not resolved", "not reached"}
    with open(out / "trajectories.csv") as f:
        panels = {r["panel"] for r in csv.DictReader(f)}
    assert panels == {"FAFO-r1", "CACO-T128-r1", "FAFO-authors-stop", "CACO-T128-qk0.1"}
    with open(out / "authors-stop.csv") as f:
        stops = list(csv.DictReader(f))
    assert stops[0]["run"] == "authors' saved run" and stops[0]["epochs"] == "1101"
    assert float(stops[0]["attn_0.2-0.4"]) == 64.1  # theirs, as qkov.synthetic.authors says
    assert stops[1]["run"] == "companion, paper-fig2 (epoch rule)"
    cells = [float(stops[2][f"attn_{lo:.1f}-{lo + 0.2:.1f}"]) for lo in (0, .2, .4, .6, .8)]
    assert 0 <= sum(cells) <= 100 + 1e-9  # the top row holds at most every sequence
    # paper-fig2 run with other held-out sets is refused: the cells would not compare
    with pytest.raises(ParameterError, match="parameter 'fig2_summary': .* eval_batches"):
        fig2_controls.fig2_inputs(fig2_controls.Parameters(
            fig2_summary=str(fig2 / "summary.json"), seeds=[7, 8], epochs_scale=0.002,
            eval_batches=4))
    # the comparison is seed by seed: a paper-fig2 run of other seeds is refused
    with pytest.raises(ParameterError, match="parameter 'fig2_summary': .* seeds"):
        fig2_controls.fig2_inputs(fig2_controls.Parameters(
            fig2_summary=str(fig2 / "summary.json"), seeds=[1, 2], epochs_scale=0.002,
            eval_batches=3))
    with pytest.raises(ParameterError, match="parameter 'fig2_summary': no file .*run "
                                             "notebooks/paper-fig2.ipynb first"):
        fig2_controls.fig2_inputs(fig2_controls.Parameters(
            fig2_summary=str(tmp_path / "none" / "summary.json")))
