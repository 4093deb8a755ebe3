"""The theory chapter's notebooks at a small scale: parameters, rows, artifacts, failures."""

import csv
import json

import nbformat
import numpy as np
import pytest

from conftest import REPO
from qkov.checks import ParameterError
from qkov.figures import theory_ratio_sweep, theory_reduction, theory_rescaling
from qkov.synthetic import trajectories

SMALL = ["-p", "m", "2", "-p", "n", "7", "-p", "b", "3.5", "-p", "M", "4"]


def run_notebook(run_tool, tmp_path, name, *args, check=True):
    return run_tool("papermill", REPO / "notebooks" / f"{name}.ipynb", tmp_path / "o.ipynb",
                    *args, check=check)


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


def fig2_artifacts(folder, attention):
    """A paper-fig2 summary.json and trajectories.csv in ``folder``: per row-1 panel two
    seeds whose held-out loss falls 1 -> 0.1 -> 0.001 over epochs 0-2 while the attention
    on distinct tokens goes 0.3 -> a -> a + 0.1 (a = attention[panel] +- 0.02 per seed). At
    a matched loss of 0.01, halfway in log loss between epochs 1 and 2, each seed's
    attention is a + 0.05, so the panel's mean is attention[panel] + 0.05."""
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"figure": "paper-fig2", "rows": []}))
    lines = [",".join(("panel", "seed", "epoch") + trajectories.MEASURES)]
    for panel, value in attention.items():
        for seed, a in ((1, value - 0.02), (2, value + 0.02)):
            for epoch, (loss, att) in enumerate([(1.0, 0.3), (0.1, a), (0.001, a + 0.1)]):
                # rate factors: QK 1, OV 10 ** (seed - epoch): at the matched loss, halfway
                # in log loss between epochs 1 and 2, r_eff = 1 / (0.055 * 10 ** seed)
                lines.append(f"{panel},{seed},{epoch},{loss},{att},{att + 0.1},1,"
                             f"{10.0 ** (seed - epoch)},,")
    (folder / "trajectories.csv").write_text("\n".join(lines) + "\n")
    return folder / "summary.json"


def test_rescaling_notebook_compares_orderings_at_equal_loss(run_tool, tmp_path):
    out = tmp_path / "rescaling"
    attention = {"FAFO": 0.3, "FACO": 0.8, "CAFO": 0.2, "CACO": 0.5}
    summary = fig2_artifacts(tmp_path / "fig2", attention)
    run_notebook(run_tool, tmp_path, "theory-rescaling", "-p", "fig2_summary", summary,
                 "-p", "init_scale", "0.01", "-p", "matched_loss", "0.01",
                 "-p", "artifacts_dir", out)
    rows = json.loads((out / "summary.json").read_text())["rows"]
    by_name = {r["parameterization"]: r for r in rows}
    assert set(by_name) == {"FAFO", "FACO", "CAFO", "CACO"}
    assert by_name["CACO"]["r_eff_at_loss"] == pytest.approx(1.0)
    assert by_name["FACO"]["r_eff_at_loss"] > 1 > by_name["CAFO"]["r_eff_at_loss"]
    for name, value in attention.items():  # interpolated at the matched loss, see above
        assert by_name[name]["measured_attention"] == pytest.approx(value + 0.05)
        assert by_name[name]["measured_attention_std"] == pytest.approx(0.02)
        assert by_name[name]["measured_attention_seeds"] == pytest.approx([value + 0.03,
                                                                           value + 0.07])
        # log10 r_eff per seed: -log10(0.055 * 10 ** seed), the rate factor interpolated
        # linearly between epochs (10 ** (seed - 1) and 10 ** (seed - 2))
        expected = [-np.log10(0.5 * 10.0 ** (s - 1) + 0.5 * 10.0 ** (s - 2)) for s in (1, 2)]
        assert by_name[name]["measured_log10_r_eff"] == pytest.approx(np.mean(expected))
        assert by_name[name]["measured_class_attention"] == pytest.approx(value + 0.15)
        assert by_name[name]["measured_seeds"] == 2
    assert [by_name[n]["measured_rank"] for n in ("FACO", "CACO", "FAFO", "CAFO")] == [1, 2, 3, 4]
    text = "".join(o.get("text", "") for c in nbformat.read(tmp_path / "o.ipynb", 4).cells
                   if c.cell_type == "code" for o in c.outputs)
    assert "measured (paper-fig2):      FACO > CACO > FAFO > CAFO" in text


def test_the_parameters_check_the_fig2_artifacts_they_read(tmp_path):
    """theory-rescaling's parameters read paper-fig2's files: a missing, foreign or stale
    one fails naming fig2_summary and what to run (before any work: the notebook checks its
    parameters first, as tests/test_fig4_notebook.py shows through papermill)."""
    def check(summary):
        return theory_rescaling.Parameters(fig2_summary=str(summary), matched_loss=0.01)

    with pytest.raises(ParameterError, match=r"^parameter 'fig2_summary': no file .*"
                                             r"missing\.json: run notebooks/paper-fig2"):
        check(tmp_path / "missing.json")
    summary = fig2_artifacts(tmp_path / "fig2", {"FAFO": 0.3})  # rows for FAFO only
    with pytest.raises(ParameterError, match=r"^parameter 'fig2_summary'.*trajectories\.csv"
                                             r".*rows for FAFO, FACO, CAFO, CACO.*re-run "
                                             r"notebooks/paper-fig2"):
        check(summary)
    summary.write_text(json.dumps({"figure": "paper-fig3", "rows": []}))
    with pytest.raises(ParameterError, match=r"^parameter 'fig2_summary'.*not written by "
                                             r"paper-fig2.*re-run notebooks/paper-fig2"):
        check(summary)
    (tmp_path / "fig2" / "trajectories.csv").unlink()
    with pytest.raises(ParameterError, match=r"^parameter 'fig2_summary': no file .*trajectories"):
        check(summary)
    whole = fig2_artifacts(tmp_path / "whole", {"FAFO": 0.3, "FACO": 0.8, "CAFO": 0.2,
                                                "CACO": 0.5})
    assert check(whole).measured["FACO"]["attention"] == pytest.approx(0.85)


def test_a_matched_loss_some_run_never_reached_is_named(tmp_path):
    summary = fig2_artifacts(tmp_path / "fig2", {"FAFO": 0.3, "FACO": 0.8, "CAFO": 0.2,
                                                 "CACO": 0.5})
    with pytest.raises(ParameterError, match=r"parameter 'matched_loss'.*FAFO.*0\.001"):
        theory_rescaling.measured_fig2_sharpness(summary, 1e-4)


def test_ratio_sweep_notebook_at_a_small_scale(run_tool, tmp_path):
    out = tmp_path / "sweep"
    run_notebook(run_tool, tmp_path, "theory-ratio-sweep", *SMALL, "-y", "ratios: [0.1, 10]",
                 "-y", "seeds: [3, 4]", "-p", "matched_loss", "1.0", "-p", "max_epochs", "40",
                 "-p", "batches_per_epoch", "10", "-p", "eval_batches", "2",
                 "-y", "variant_ratios: [10, 30]", "-y", "variants: [[128, default, 0.05]]",
                 "-p", "progress", "False", "-p", "artifacts_dir", out)
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert [r["r"] for r in rows] == [0.1, 10]
    for row in rows:
        assert row["alpha_stylized"] == pytest.approx(row["alpha_closed_form"], rel=1e-2)
        assert row["task_runs"] == 2
        assert row["task_distinct_mean"] <= row["task_informative_mean"] <= 1
    assert rows[1]["alpha_closed_form"] > rows[0]["alpha_closed_form"]
    # The conditions table: the main condition where it ran (r = 10 only), then the variant.
    with open(out / "conditions.csv") as f:
        conditions = list(csv.DictReader(f))
    assert [(int(c["T"]), c["init"], float(c["lr_ov"]), float(c["r"])) for c in conditions] == [
        (64, "identity", 0.1, 10), (128, "default", 0.05, 10), (128, "default", 0.05, 30)]
    main_at_10 = next(r for r in rows if r["r"] == 10)
    assert float(conditions[0]["distinct"]) == pytest.approx(main_at_10["task_distinct_mean"])


def test_a_smaller_ov_rate_gets_proportionally_more_epochs():
    p = theory_ratio_sweep.Parameters(**{**SWEEP, "variants": [[64, "identity", 0.01]]})
    (config,) = theory_ratio_sweep.variant_configs(p)
    assert (config.epochs, config.lr_ov, config.lr_qk, config.T) == (100, 0.01, 0.1, 64)
    assert config.model.qk_init == config.model.ov_init == "identity"
    assert config.early_stop_loss == 0.05


def test_distinct_turning_points():
    rows = [{"r": r, "task_distinct_mean": a} for r, a in
            [(0.1, 0.36), (1, 0.45), (3, 0.5), (10, 0.2), (30, 0.05)]]
    assert theory_ratio_sweep.distinct_turning_points(rows, 64) == (3, 10)
    assert theory_ratio_sweep.distinct_turning_points(rows[:3], 64) == (3, None)


REDUCTION = {"m": 5, "n": 50, "b": 50.0, "M": 20, "eta_ov": 1.0, "ratios": [1], "target_loss": 0.01,
             "step_fraction": 1e-3, "batch_size": 4, "seed": 0, "workers": 1, "artifacts_dir": None}
SWEEP = {"m": 5, "n": 50, "b": 50.0, "M": 20, "ratios": [1], "matched_loss": 0.05,
         "step_fraction": 1e-3, "seeds": [1], "lr_ov": 0.1, "T": 64, "batches_per_epoch": 50,
         "max_epochs": 10, "eval_batches": 10, "variant_ratios": [10],
         "variants": [[128, "default", 0.1]], "workers": 1, "progress": False,
         "artifacts_dir": None}


@pytest.mark.parametrize("bad, name", [
    ({"m": 2.5}, "m"), ({"M": 1}, "M"), ({"ratios": []}, "ratios"), ({"ratios": [0]}, "ratios"),
    ({"target_loss": 3.5}, "target_loss"), ({"step_fraction": 0.5}, "step_fraction"),
    ({"batch_size": 0}, "batch_size"),
])
def test_reduction_parameters_are_checked(bad, name):
    with pytest.raises(ParameterError, match=f"parameter '{name}'"):
        theory_reduction.Parameters(**{**REDUCTION, **bad})


@pytest.mark.parametrize("bad, name", [
    ({"seeds": [1, 1]}, "seeds"), ({"matched_loss": 0}, "matched_loss"), ({"T": 2}, "T"),
    ({"lr_ov": 0}, "lr_ov"), ({"max_epochs": 0}, "max_epochs"), ({"workers": 0}, "workers"),
    ({"variant_ratios": [-1]}, "variant_ratios"), ({"variants": [[128, "zeros", 0.1]]}, "variants"),
    ({"variants": [[64, "default"]]}, "variants"), ({"variants": [[2, "default", 0.1]]}, "variants"),
    ({"variants": [[64, "default", -0.1]]}, "variants"), ({"variants": "[[64]]"}, "variants"),
])
def test_sweep_parameters_are_checked(bad, name):
    with pytest.raises(ParameterError, match=f"parameter '{name}'"):
        theory_ratio_sweep.Parameters(**{**SWEEP, **bad})


def test_ordering_text_says_whether_a_swap_is_beyond_the_seeds_noise():
    cafo = [0.3585, 0.3575, 0.3595, 0.3580, 0.3590]

    def rows(fafo_shift):
        return [{"parameterization": n, "predicted_rank": pr, "measured_rank": mr,
                 "measured_attention": float(np.mean(seeds)), "measured_attention_seeds": seeds}
                for n, pr, mr, seeds in [("FACO", 1, 1, [0.56] * 5),
                                         ("FAFO", 2, 3, [x + d for x, d in zip(cafo, fafo_shift)]),
                                         ("CAFO", 3, 2, cafo)]]
    tied = theory_rescaling.ordering_text(rows([-0.001, 0.001, -0.0005, 0.0005, 0])).splitlines()
    assert tied[2] == "orderings are different"
    assert tied[3].startswith("FAFO and CAFO swap: measured difference 0.00000 ± 0.00098")
    assert tied[3].endswith("a tie: the interval holds 0")
    apart = theory_rescaling.ordering_text(rows([-0.058, -0.057, -0.059, -0.058, -0.058]))
    assert apart.splitlines()[3].startswith("FAFO and CAFO swap: measured difference -0.058")
    assert apart.endswith("a real swap: the interval excludes 0")
    same = [{**r, "measured_rank": r["predicted_rank"]} for r in rows([0] * 5)]
    assert theory_rescaling.ordering_text(same).splitlines()[2:] == ["orderings are the same"]


def test_shortcut_notebook_cuts_the_shortcut(run_tool, tmp_path):
    out = tmp_path / "shortcut"
    run_notebook(run_tool, tmp_path, "theory-shortcut", "-y", "ratios: [1, 30]",
                 "-y", "lengths: [16]", "-y", "shortcut_lengths: [8]",
                 "-y", "shortcut_ratios: [1, 30]", "-y", "seeds: [3, 4]",
                 "-p", "max_epochs", "20", "-p", "batches_per_epoch", "10",
                 "-p", "eval_batches", "4", "-y", "sensitivity_ratios: [1]",
                 "-y", "sensitivity_lr_ov: [0.2]", "-y", "sensitivity_init_scales: [0.001]",
                 "-y", "sensitivity_batch_sizes: [16]", "-p", "progress", "False",
                 "-p", "artifacts_dir", out)
    with open(out / "runs.csv") as f:
        runs = list(csv.DictReader(f))
    # length 16 (three tasks) x 2 ratios, 8 (the paper's) x 2, three sensitivity lines x 1
    assert len(runs) == 2 * (3 * 2 + 2 + 3)
    for run in runs:
        if run["cut"] == "context":  # no query token anywhere: no attention on it
            assert float(run["query_token"]) == 0
            assert float(run["class_identifying"]) == pytest.approx(float(run["distinct"]),
                                                                    abs=1e-6)
        else:  # its copies in the context (and in the paper's task its own position)
            assert float(run["query_token"]) > 0
    with open(out / "lines.csv") as f:
        lines = list(csv.DictReader(f))
    assert {(r["T"], r["task"]) for r in lines} == {
        ("16", "paper"), ("16", "masked"), ("16", "removed"), ("8", "paper")}
    uniform = {r["task"]: float(r["uniform_share"]) for r in lines if r["T"] == "16"}
    assert uniform == pytest.approx({"paper": 5.5 / 15.5 * 14 / 15, "masked": 5.5 / 15.5,
                                     "removed": 5.5 / 14.5})
