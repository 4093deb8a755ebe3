"""Every figure's parameters are checked for emptiness, reachability and size before any work,
and a run's cost is counted and bounded first (qkov.params: Work, the cost line, the ceiling).

Nothing here trains or descends at scale: each test makes Parameters, or integrates the
reduced ODE (milliseconds), or runs a descent of a few hundred steps.
"""

import os
import time

import pytest

from conftest import REPO
from qkov import figures
from qkov.checks import ParameterError
from qkov.figures import (
    paper_fig2,
    paper_fig3,
    paper_fig4,
    theory_ratio_sweep,
    theory_reduction,
    theory_rescaling,
)
from qkov.params import FigureParameters
from qkov.theory import reduced, stylized
from qkov_tools import sweeps

COSTED = (paper_fig2, paper_fig3, theory_ratio_sweep, theory_reduction)


def refused(make, name, within=5.0):
    """The ParameterError ``make()`` raises, checked to name ``name`` and to come within
    ``within`` seconds (before any work)."""
    started = time.perf_counter()
    with pytest.raises(ParameterError) as err:
        make()
    assert time.perf_counter() - started < within
    assert err.value.name == name, str(err.value)
    return str(err.value)


# --- emptiness ------------------------------------------------------------------------------


def test_ratio_sweep_without_conditions_fails_before_training():
    message = refused(lambda: theory_ratio_sweep.Parameters(variants=[]), "variants")
    assert "non-empty" in message


def test_runs_named_twice_fail_before_training():
    refused(lambda: theory_ratio_sweep.Parameters(ratios=[1, 1.0]), "ratios")
    refused(lambda: theory_ratio_sweep.Parameters(variant_ratios=[10, 10]), "variant_ratios")
    refused(lambda: theory_ratio_sweep.Parameters(
        variants=[[64, "default", 0.1], [64, "default", 0.1]]), "variants")
    refused(lambda: paper_fig3.Parameters(alphas=[0.5, 0.5]), "alphas")


# --- reachability ---------------------------------------------------------------------------


def test_a_target_loss_the_flow_cannot_reach_is_refused_saying_what_it_can():
    message = refused(lambda: paper_fig4.Parameters(target_loss=1e-50), "target_loss")
    assert "1e-20" in message
    refused(lambda: paper_fig4.Parameters(target_loss=1e-21), "target_loss")
    assert paper_fig4.Parameters(target_loss=1e-20).thresholds[-1] == pytest.approx(1e-20)


def test_the_descent_and_the_rescaling_loss_floors():
    assert "1e-10" in refused(lambda: theory_reduction.Parameters(target_loss=1e-12),
                              "target_loss")
    assert "1e-10" in refused(lambda: theory_ratio_sweep.Parameters(matched_loss=1e-12),
                              "matched_loss")
    # checked before paper-fig2's files are read (there are none at this path)
    assert "1e-20" in refused(lambda: theory_rescaling.Parameters(
        matched_loss=1e-50, fig2_summary="/nonexistent/summary.json"), "matched_loss")


@pytest.mark.parametrize("r", [1e-3, 1.0, 1e6])
def test_the_loss_floor_is_reached(r):
    """The floor with margin: reached at the default setting and an extreme one."""
    for setting in (reduced.Setting(), reduced.Setting(m=1, n=1e4, b=1e4, M=1000)):
        tr = reduced.integrate_until(setting, 1.0, r, reduced.LOSS_FLOOR)
        assert float(tr.loss[-1]) == pytest.approx(reduced.LOSS_FLOOR, rel=1e-6)


def test_descent_steps_are_counted_before_the_descent():
    model = stylized.StylizedModel(reduced.Setting())
    counted = stylized.descent_steps(model.setting, 1.0, 10.0, 0.5, 0.05)
    run = stylized.descend(model, "CACO", 1.0, 10.0, 0.5, step_fraction=0.05)
    assert abs((len(run.t) - 1) - counted) <= 1
    # the default theory-reduction run: 8239, 6817, 5919 steps (its stored table)
    assert theory_reduction.Parameters().steps == pytest.approx([8239, 6817, 5919], abs=1)


def test_a_descent_that_would_give_up_is_refused_before_its_steps():
    message = refused(lambda: theory_reduction.Parameters(step_fraction=1e-5), "step_fraction")
    assert "200,000" in message and "r = 0.1" in message
    refused(lambda: theory_ratio_sweep.Parameters(step_fraction=1e-5), "step_fraction")
    with pytest.raises(ParameterError, match="1e-10"):
        stylized.descend(stylized.StylizedModel(reduced.Setting()), "CACO", 1.0, 1.0, 1e-12)


def test_rescaling_starts_and_rates_the_flow_reaches():
    args = dict(fig2_summary="/nonexistent/summary.json")
    refused(lambda: theory_rescaling.Parameters(init_scale=1e-100, **args), "init_scale")
    refused(lambda: theory_rescaling.Parameters(r=1e4, **args), "r")
    refused(lambda: theory_rescaling.Parameters(default_init_rate=1e10, **args),
            "default_init_rate")


# --- size -----------------------------------------------------------------------------------


def test_thresholds_per_decade_are_bounded_at_once():
    assert "<= 100" in refused(lambda: paper_fig4.Parameters(per_decade=100_000_000),
                               "per_decade", within=0.5)
    message = refused(lambda: paper_fig4.Parameters(per_decade=100, target_loss=1e-19),
                      "per_decade")
    assert "1,901" in message and "1,000" in message
    assert len(paper_fig4.Parameters(per_decade=100).thresholds) == 401


def test_ratios_are_bounded_in_size_and_number():
    refused(lambda: paper_fig4.Parameters(ratios=[1e7]), "ratios")
    refused(lambda: paper_fig4.Parameters(ratios=[float(k) for k in range(1, 52)]), "ratios")
    refused(lambda: theory_reduction.Parameters(ratios=[1e7]), "ratios")
    refused(lambda: theory_ratio_sweep.Parameters(ratios=[1e7]), "ratios")


def test_a_stylized_model_too_large_for_memory_is_refused():
    assert "M^2 (m + n)" in refused(lambda: theory_reduction.Parameters(M=1000), "M")
    refused(lambda: theory_ratio_sweep.Parameters(n=30_000), "M")


def test_held_out_sets_are_bounded():
    refused(lambda: paper_fig2.Parameters(eval_batches=10_001), "eval_batches")
    refused(lambda: paper_fig2.Parameters(trajectory_batches=1_001), "trajectory_batches")
    refused(lambda: paper_fig3.Parameters(eval_batches=10_001), "eval_batches")


def test_a_sequence_length_that_would_exhaust_memory_is_refused():
    assert "<= 8192" in refused(lambda: theory_ratio_sweep.Parameters(T=100_000), "T",
                                within=0.5)
    refused(lambda: theory_ratio_sweep.Parameters(variants=[[100_000, "default", 0.1]]),
            "variants")


def test_the_ratio_sweeps_work_counts_sequence_length():
    default = theory_ratio_sweep.Parameters().work().parts
    longer = theory_ratio_sweep.Parameters(T=4096).work().parts
    main_steps = sum(c.steps for c in theory_ratio_sweep.configs(theory_ratio_sweep.Parameters()))
    assert longer[0].amount - default[0].amount == pytest.approx(main_steps * (4096 / 64 - 1))
    assert default[0].unit == "model-steps" and "x T/64" in default[0].counted
    assert longer[1] == default[1]  # the stylized descents do not depend on T


# --- the bounds say what is allowed -----------------------------------------------------------


def test_an_upper_bound_that_is_allowed_reads_at_most():
    assert "<= 1" in refused(lambda: paper_fig2.Parameters(epochs_scale=2), "epochs_scale")
    assert paper_fig2.Parameters(epochs_scale=1).epochs_scale == 1.0
    assert "<= 1" in refused(lambda: paper_fig3.Parameters(alphas=[0.5, 1.5]), "alphas")
    assert paper_fig3.Parameters(alphas=[1]).alphas == [1.0]


def test_a_number_yaml_11_reads_as_text_is_the_number():
    assert paper_fig4.Parameters(target_loss="1e-3").target_loss == 0.001
    assert theory_reduction.Parameters(target_loss="1e-2").target_loss == 0.01
    assert theory_ratio_sweep.Parameters(
        variants=[[64, "default", "1e-1"]]).variants[0].lr_ov == 0.1


# --- the cost estimate ----------------------------------------------------------------------


@pytest.mark.parametrize("module", COSTED, ids=lambda m: m.SPEC.id)
def test_the_default_run_is_costed_from_its_work_and_the_rates_its_spec_states(module):
    p = module.Parameters()
    work = p.work()
    minutes = sum(part.amount / module.SPEC.rates[part.unit] for part in work.parts) / 60
    line = p.cost()
    assert line.startswith("work: ") and f"about {minutes:.2g} min on 2 cores" in line
    assert minutes < 10  # paper scale: minutes, far below the ceiling


def test_figures_that_compute_little_print_no_cost():
    assert paper_fig4.Parameters().cost() is None


def test_every_unit_of_work_has_a_rate_in_its_spec():
    for spec in figures.specs().values():
        Parameters = figures.module(spec.id).Parameters
        work = Parameters().work() if Parameters.work is not FigureParameters.work else None
        units = {part.unit for part in work.parts} if work is not None else set()
        assert units == set(spec.rates), spec.id


def test_a_run_far_above_the_ceiling_is_refused_unless_allow_long():
    seeds = list(range(100))  # 20 x the default's five: ~80 min at the spec's rate
    message = refused(lambda: paper_fig2.Parameters(seeds=seeds), "allow_long")
    assert "above the ceiling of 60 min" in message and "-p allow_long True" in message
    assert paper_fig2.Parameters(seeds=seeds, allow_long=True).cost().startswith("work: ")
    paper_fig2.Parameters(seeds=list(range(50)))  # 10 x: ~41 min, below the ceiling
    big = dict(T=8192, max_epochs=30_000)  # ~150 x the default's counted work
    refused(lambda: theory_ratio_sweep.Parameters(**big), "allow_long")
    theory_ratio_sweep.Parameters(**big, allow_long=True)
    refused(lambda: theory_reduction.Parameters(step_fraction=1e-4, ratios=[0.1] * 80),
            "allow_long")


def test_fewer_workers_than_the_default_run_cost_more_minutes():
    one, two = paper_fig2.Parameters(workers=1), paper_fig2.Parameters()
    if (os.cpu_count() or 1) >= 2:
        assert one._cost.minutes == pytest.approx(2 * two._cost.minutes)


def test_the_project_sweeps_are_accepted_and_cost_at_most_a_default_run():
    for sweep in sweeps.load_all(REPO / "sweeps"):
        Parameters = figures.module(sweep.figure_id).Parameters
        for set_id in sweep.sets:
            p = Parameters(**sweep.values(set_id))
            if p.cost() is not None:
                assert p._cost.minutes <= Parameters()._cost.minutes, (sweep.name, set_id)
