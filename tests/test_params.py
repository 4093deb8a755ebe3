"""Parameter checks: unknown names, wrong types and out-of-range values fail with the name."""

import math

import pytest

from qkov import params as P
from qkov.figures import paper_fig4
from qkov.theory import reduced as T

FIG4_DEFAULTS = {
    "m": 5, "n": 50, "b": 50.0, "M": 20, "eta_ov": 1.0, "ratios": [0.01, 0.1, 1, 10, 100],
    "target_loss": 1e-4, "loss_max": 1.0, "per_decade": 10, "artifacts_dir": None,
}


def namespace(**overrides):
    ns = {"__name__": "__main__", "In": [], "get_ipython": object(), "math": math,
          "_private": 1}
    ns.update(FIG4_DEFAULTS)
    ns.update(overrides)
    return ns


def test_collect_returns_the_declared_parameters_only():
    got = P.collect(namespace(), paper_fig4.Parameters.names())
    assert got == FIG4_DEFAULTS


def test_collect_refuses_an_unknown_name_and_lists_the_allowed_ones():
    with pytest.raises(P.ParameterError) as err:
        P.collect(namespace(ratio=3), paper_fig4.Parameters.names())
    assert "'ratio'" in str(err.value) and "unknown parameter" in str(err.value)
    assert "ratios" in str(err.value) and "target_loss" in str(err.value)


def test_collect_survives_a_rerun_in_a_live_kernel():
    ns = namespace()
    P.collect(ns, paper_fig4.Parameters.names())
    ns["trajectories"] = []  # defined by a later cell
    ns["M"] = 30  # the reader edits a parameter and re-runs
    assert P.collect(ns, paper_fig4.Parameters.names())["M"] == 30


def test_collect_reports_a_missing_parameter():
    ns = namespace()
    del ns["per_decade"]
    with pytest.raises(P.ParameterError, match="'per_decade'.*missing"):
        P.collect(ns, paper_fig4.Parameters.names())


def test_defaults_validate():
    assert paper_fig4.Parameters.defaults() == FIG4_DEFAULTS
    p = paper_fig4.Parameters(**FIG4_DEFAULTS)
    assert p.setting == T.Setting(5, 50, 50, 20)
    assert p.thresholds[0] == 1.0 and p.thresholds[-1] == 1e-4


@pytest.mark.parametrize(
    "overrides, name, words",
    [
        ({"ratios": [1, 0]}, "ratios", "item 1: expected a number > 0"),
        ({"ratios": [-0.5]}, "ratios", "item 0: expected a number > 0"),
        ({"ratios": []}, "ratios", "non-empty list"),
        ({"ratios": "[1, 10]"}, "ratios", "-y"),
        ({"M": 1}, "M", ">= 2"),
        ({"M": 20.0}, "M", "integer"),
        ({"target_loss": 0}, "target_loss", "> 0"),
        ({"target_loss": 3.5}, "target_loss", "< 2.99573"),
        ({"loss_max": -1}, "loss_max", "> 0"),
        ({"loss_max": 1e-5}, "target_loss", "below loss_max"),
        ({"per_decade": 0}, "per_decade", ">= 1"),
        ({"eta_ov": 0}, "eta_ov", "> 0"),
        ({"artifacts_dir": 3}, "artifacts_dir", "path"),
        ({"m": True}, "m", "finite number"),
    ],
)
def test_bad_values_name_the_parameter_and_what_is_allowed(overrides, name, words):
    with pytest.raises(P.ParameterError) as err:
        paper_fig4.Parameters(**{**FIG4_DEFAULTS, **overrides})
    assert err.value.name == name
    assert f"parameter {name!r}" in str(err.value) and words in str(err.value)
