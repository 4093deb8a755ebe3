"""Bad parameters are refused before any work (unknown, wrong type, out of range, empty,
repeated, too large, unreachable), naming the parameter and what is allowed; a run's cost is
printed first, and above the ceiling needs allow_long."""

import os
import time

import nbformat
import pytest

from conftest import REPO
from qkov import artifacts, figures
from qkov.checks import ParameterError
from qkov.cost import parts
from qkov.figures import (
    paper_fig2,
    paper_fig3,
    paper_fig4,
    theory_ratio_sweep,
    theory_reduction,
    theory_rescaling,
)
from qkov.params import FigureParameters, collect
from qkov.theory import reduced, stylized

NO_FIG2 = {"fig2_summary": "/nonexistent/summary.json"}  # refused before it is read
SWEEP = theory_ratio_sweep

BAD = [  # (figure module, values, the parameter named, words of the message)
    (paper_fig4, {"ratios": [1, 0]}, "ratios", "item 1: expected a number > 0"),
    (paper_fig4, {"ratios": []}, "ratios", "non-empty list"),
    (paper_fig4, {"ratios": "[1, 10]"}, "ratios", "-y"),
    (paper_fig4, {"M": 1}, "M", ">= 2"),
    (paper_fig4, {"M": 20.0}, "M", "integer"),
    (paper_fig4, {"m": True}, "m", "finite number"),
    (paper_fig4, {"target_loss": 3.5}, "target_loss", "< 2.99573"),
    (paper_fig4, {"loss_max": 1e-5}, "target_loss", "below loss_max"),
    (paper_fig4, {"artifacts_dir": 3}, "artifacts_dir", "path"),
    # reachable: the flow reaches 1e-20 (test_the_loss_floor_is_reached), float64 descents 1e-10
    (paper_fig4, {"target_loss": 1e-50}, "target_loss", "1e-20"),
    (theory_reduction, {"target_loss": 1e-12}, "target_loss", "1e-10"),
    (SWEEP, {"matched_loss": 1e-12}, "matched_loss", "1e-10"),
    (paper_fig4, {"target_loss": 1e-21}, "target_loss", "1e-20"),
    (theory_rescaling, {"matched_loss": 1e-50, **NO_FIG2}, "matched_loss", "1e-20"),
    (theory_rescaling, {"init_scale": 1e-100, **NO_FIG2}, "init_scale", ""),
    (theory_rescaling, {"r": 1e4, **NO_FIG2}, "r", ""),
    (theory_rescaling, {"default_init_rate": 1e10, **NO_FIG2}, "default_init_rate", ""),
    (theory_reduction, {"step_fraction": 1e-5}, "step_fraction", "200,000"),
    # empty or repeated (runs named twice fail mid-training)
    (SWEEP, {"variants": []}, "variants", "non-empty"),
    (SWEEP, {"ratios": [1, 1.0]}, "ratios", "distinct"),
    (SWEEP, {"variants": [[64, "default", 0.1]] * 2}, "variants", ""),
    (paper_fig3, {"alphas": [0.5, 0.5]}, "alphas", ""),
    (SWEEP, {"variant_ratios": [10, 10]}, "variant_ratios", "distinct"),
    # size: time and memory
    (paper_fig4, {"per_decade": 100_000_000}, "per_decade", "<= 100"),
    (paper_fig4, {"per_decade": 100, "target_loss": 1e-19}, "per_decade", "1,901"),
    (paper_fig4, {"ratios": [1e7]}, "ratios", ""),
    (theory_reduction, {"ratios": [1e7]}, "ratios", ""),
    (SWEEP, {"step_fraction": 1e-5}, "step_fraction", ""),
    (paper_fig3, {"eval_batches": 10_001}, "eval_batches", ""),
    (paper_fig4, {"ratios": list(range(1, 52))}, "ratios", "at most 50"),
    (theory_reduction, {"M": 1000}, "M", "M^2 (m + n)"),
    (SWEEP, {"n": 30_000}, "M", ""),
    (paper_fig2, {"eval_batches": 10_001}, "eval_batches", ""),
    (paper_fig2, {"trajectory_batches": 1_001}, "trajectory_batches", ""),
    (SWEEP, {"T": 100_000}, "T", "<= 8192"),
    (SWEEP, {"variants": [[100_000, "default", 0.1]]}, "variants", ""),
    (paper_fig2, {"epochs_scale": 2}, "epochs_scale", "<= 1"),
    (paper_fig3, {"alphas": [0.5, 1.5]}, "alphas", "<= 1"),
    # the cost ceiling: 20 x paper-fig2's seeds (~80 min), ~150 x the sweep's work
    (paper_fig2, {"seeds": list(range(100))}, "allow_long",
     "above the ceiling of 60 min: check the parameters, or pass -p allow_long True"),
    (SWEEP, {"T": 8192, "max_epochs": 30_000}, "allow_long", ""),
]


@pytest.mark.parametrize("module, values, name, words", BAD,
                         ids=[f"{m.SPEC.id}-{'-'.join(v)}" for m, v, _, _ in BAD])
def test_a_bad_value_is_refused_at_once_naming_the_parameter(module, values, name, words):
    started = time.perf_counter()
    with pytest.raises(ParameterError) as err:
        module.Parameters(**values)
    assert time.perf_counter() - started < 5  # before any work (-p per_decade 1e8 hung)
    assert err.value.name == name and str(err.value).startswith(f"parameter {name!r}: ")
    assert words in str(err.value)


def test_values_within_the_bounds_are_taken_as_the_numbers_given():
    assert paper_fig4.Parameters(target_loss=1e-20).thresholds[-1] == pytest.approx(1e-20)
    assert len(paper_fig4.Parameters(per_decade=100).thresholds) == 401
    assert paper_fig2.Parameters(epochs_scale=1).epochs_scale == 1.0
    assert paper_fig3.Parameters(alphas=[1]).alphas == [1.0]
    # YAML 1.1 (papermill -y) reads 1e-3 as text: it is the number, and recorded as one
    assert paper_fig4.Parameters(target_loss="1e-3").given["target_loss"] == 0.001
    assert SWEEP.Parameters(variants=[[64, "default", "1e-1"]]).variants[0].lr_ov == 0.1
    paper_fig2.Parameters(seeds=list(range(50)))  # ~41 min: below the ceiling
    assert paper_fig2.Parameters(seeds=list(range(100)), allow_long=True).cost()


def test_collect_takes_the_notebooks_parameters_only():
    """Not the kernel's names, nor on a re-run in a live kernel later cells'."""
    ns = {"__name__": "__main__", "In": [], "get_ipython": object(), "os": os, "_x": 1,
          **paper_fig4.Parameters.defaults()}
    assert collect(ns, paper_fig4.Parameters.names()) == paper_fig4.Parameters.defaults()
    ns.update(trajectories=[], M=30)
    assert collect(ns, paper_fig4.Parameters.names())["M"] == 30


@pytest.mark.parametrize("r", [1e-3, 1.0, 1e6])
def test_the_loss_floor_is_reached(r):
    for setting in (reduced.Setting(), reduced.Setting(m=1, n=1e4, b=1e4, M=1000)):
        tr = reduced.integrate_until(setting, 1.0, r, reduced.LOSS_FLOOR)
        assert float(tr.loss[-1]) == pytest.approx(reduced.LOSS_FLOOR, rel=1e-6)


def test_descent_steps_are_counted_before_the_descent():
    model = stylized.StylizedModel(reduced.Setting())
    counted = stylized.descent_steps(model.setting, 1.0, 10.0, 0.5, 0.05)
    run = stylized.descend(model, "CACO", 1.0, 10.0, 0.5, step_fraction=0.05)
    assert abs((len(run.t) - 1) - counted) <= 1


def test_the_cost_line_is_printed_first_the_same_in_and_out_of_the_pipeline(capsys,
                                                                           monkeypatch):
    """The estimate is the work at the rates the spec states, never a record of this
    machine: a reader's run prints the line that the pipeline stored in each costed notebook
    (so one notebook validates alone as in the suite)."""
    monkeypatch.delenv(artifacts.PIPELINE_ENV, raising=False)
    costed = 0
    for spec in figures.specs().values():
        Parameters = figures.module(spec.id).Parameters
        work = Parameters().work() if Parameters.work is not FigureParameters.work else None
        assert ({part.unit for part in parts(work)} if work else set()) == set(spec.rates), spec.id
        if work is None:
            continue
        costed += 1
        Parameters.from_notebook(Parameters.defaults())
        reader = capsys.readouterr().out
        minutes = sum(part.amount / spec.rates[part.unit] for part in parts(work)) / 60
        assert reader.startswith("work: ") and f"about {minutes:.2g} min on 2 cores" in reader
        nb = nbformat.read(REPO / spec.notebook, as_version=4)
        assert reader in ["".join(o["text"]) for c in nb.cells if c.cell_type == "code"
                          for o in c.get("outputs", []) if o.get("name") == "stdout"], spec.id
    assert costed == 9


def test_the_cost_counts_sequence_length_and_workers():
    default, longer = SWEEP.Parameters().work(), SWEEP.Parameters(T=4096).work()
    steps = sum(c.steps for c in SWEEP.configs(SWEEP.Parameters()))
    assert longer[0].amount - default[0].amount == pytest.approx(steps * (4096 / 64 - 1))
    assert longer[1] == default[1]  # the stylized descents do not depend on T
    if (os.cpu_count() or 1) >= 2:
        assert paper_fig2.Parameters(workers=1)._cost.minutes == \
            pytest.approx(2 * paper_fig2.Parameters()._cost.minutes)
