"""Parameter checks: unknown names, wrong types and out-of-range values fail with the name."""

import math

import pytest

from qkov.checks import ParameterError
from qkov.figures import paper_fig4
from qkov.params import FigureParameters, collect
from qkov.theory import reduced

# The figure's own defaults (tests/test_figures.py checks the notebook's cell
# declares the same): a copy here would only test itself.
FIG4_DEFAULTS = paper_fig4.Parameters.defaults()


def namespace(**overrides):
    ns = {"__name__": "__main__", "In": [], "get_ipython": object(), "math": math,
          "_private": 1}
    ns.update(FIG4_DEFAULTS)
    ns.update(overrides)
    return ns


def test_collect_returns_the_declared_parameters_only():
    got = collect(namespace(), paper_fig4.Parameters.names())
    assert got == FIG4_DEFAULTS


def test_collect_refuses_an_unknown_name_and_lists_the_allowed_ones():
    with pytest.raises(ParameterError) as err:
        collect(namespace(ratio=3), paper_fig4.Parameters.names())
    assert "'ratio'" in str(err.value) and "unknown parameter" in str(err.value)
    assert "ratios" in str(err.value) and "target_loss" in str(err.value)


def test_collect_survives_a_rerun_in_a_live_kernel():
    ns = namespace()
    collect(ns, paper_fig4.Parameters.names())
    ns["trajectories"] = []  # defined by a later cell
    ns["M"] = 30  # the reader edits a parameter and re-runs
    assert collect(ns, paper_fig4.Parameters.names())["M"] == 30


def test_collect_reports_a_missing_parameter():
    ns = namespace()
    del ns["per_decade"]
    with pytest.raises(ParameterError, match="'per_decade'.*missing"):
        collect(ns, paper_fig4.Parameters.names())


def test_defaults_validate_and_derive_the_setting_and_thresholds():
    d = FIG4_DEFAULTS
    p = paper_fig4.Parameters(**d)
    assert p.setting == reduced.Setting(d["m"], d["n"], d["b"], d["M"])
    assert p.thresholds[0] == d["loss_max"] and p.thresholds[-1] == d["target_loss"]


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
    with pytest.raises(ParameterError) as err:
        paper_fig4.Parameters(**{**FIG4_DEFAULTS, **overrides})
    assert err.value.name == name
    assert f"parameter {name!r}" in str(err.value) and words in str(err.value)


def test_the_cost_line_is_printed_first_the_same_in_and_out_of_the_pipeline(capsys,
                                                                           monkeypatch):
    """The estimate comes from the work and the rates the spec states, never from a record
    of this machine: a reader's run and the pipeline's print the same line, and each costed
    notebook stores exactly that line (so one notebook validates alone as in the suite)."""
    import nbformat

    from conftest import REPO
    from qkov import artifacts
    from qkov.figures import module, specs

    costed = [s for s in specs().values()
              if module(s.id).Parameters.work is not FigureParameters.work]
    assert len(costed) == 9
    for spec in costed:
        Parameters = module(spec.id).Parameters
        monkeypatch.delenv(artifacts.PIPELINE_ENV, raising=False)
        Parameters.from_notebook(Parameters.defaults())
        reader = capsys.readouterr().out
        monkeypatch.setenv(artifacts.PIPELINE_ENV, "1")
        Parameters.from_notebook(Parameters.defaults())
        assert capsys.readouterr().out == reader
        assert reader.startswith("work: ") and " min on 2 cores at the rate" in reader
        nb = nbformat.read(REPO / spec.notebook, as_version=4)
        stored = ["".join(o["text"]) for c in nb.cells if c.cell_type == "code"
                  for o in c.get("outputs", []) if o.get("name") == "stdout"]
        assert reader in stored, spec.id
