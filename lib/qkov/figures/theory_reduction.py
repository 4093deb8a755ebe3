"""theory-reduction: full-matrix gradient descent of the stylized model (the companion's
reconstruction) laid over the paper's reduced ODE, full batch and minibatch.

:class:`Parameters` are the notebook's; :func:`runs` integrates the ODE and runs the descents;
:func:`rows`, :func:`table` and :func:`curves` are what the notebook prints, plots and stores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import integer, number, number_list
from ..cost import Work
from ..params import derived, parameter
from ..plotting import (
    COLUMN_WIDTH_IN,
    QUANTITIES,
    curve_points,
    house_style,
    new_figure,
    ratio_label,
    sequential_colors,
)
from ..spec import FigureSpec
from ..theory import reduced as theory
from ..theory.stylized import (
    Descent,
    StylizedModel,
    check_descent_loss,
    check_descent_steps,
    descents,
)
from ._setting import SettingParameters

SPEC = FigureSpec(id="theory-reduction", reproduces=None, page="book/theory",
                  tables=("curves.csv",), threads=2, dtype="float64",
                  resources={"mem_mb": 2000, "runtime": 15},
                  alt=("Four line plots, mu_OV, mu_QK, the loss and the attention mass alpha against "
                       "normalised time (log scale), one colour per learning-rate ratio r: the reduced ODE "
                       "as lines, full-batch gradient descent as circles on them and minibatch descent "
                       "dashed."),
    rates={"descent steps": 3_000})

@dataclass(frozen=True)
class Parameters(SettingParameters):
    """The notebook's parameters."""

    eta_ov: float = parameter(
        1.0, number, above=0,
        doc="OV learning rate (matrix and ODE alike), positive; QK: r * eta_ov")
    ratios: list = parameter(
        [0.1, 1, 10], number_list, above=0, at_most=theory.MAX_RATIO,
        doc="ratios r of eta_QK to eta_OV, one run each; in (0, 1e6]")
    target_loss: float = parameter(
        0.01, number, above=0,
        doc="descend until the population loss reaches this; in [1e-10, log M)")
    step_fraction: float = parameter(
        0.001, number, above=0, below=0.1,
        doc=("step size over flow time (relative step); in (0, 0.1), each descent at most "
             "200,000 steps"))
    batch_size: int = parameter(
        4, integer, minimum=1,
        doc="classes per minibatch of the stochastic run, at least 1")
    seed: int = parameter(0, integer, minimum=0, doc="seed of the minibatch draws")
    workers: int = parameter(
        2, integer, minimum=1,
        doc="processes the descents are spread over (results do not depend on it)")
    model: StylizedModel = derived()
    steps: list = derived()  # per ratio: the steps of each of its two descents

    def check(self):
        model = StylizedModel(self.setting)
        check_descent_loss("target_loss", self.target_loss, model.setting)
        object.__setattr__(self, "model", model)
        # Each descent's steps, counted from the flow before any is taken: one that could
        # not reach target_loss in descend's step limit fails here, not after its steps.
        object.__setattr__(self, "steps", check_descent_steps(
            "step_fraction", model.setting, self.eta_ov, self.ratios, self.target_loss,
            self.step_fraction))

    def work(self) -> Work:
        """Steps of gradient descent: per ratio a full-batch and a minibatch descent of as
        many steps (which grow like log(1 / target_loss) / step_fraction), each weighted
        by the model's size past the default's (StylizedModel.step_weight)."""
        return Work(2 * sum(self.steps) * self.model.step_weight,
                    "descent steps", "x M^2 (m + n) / 22,000 above the default size")


def relative_errors(run: Descent, ode: theory.Trajectory) -> dict[str, float]:
    """How far a descent is from the ODE at the same flow times.

    mu_ov and mu_qk start at 0, so their error is relative to their largest value (sup norm);
    alpha and the loss never vanish, so theirs is pointwise relative.
    """
    s = ode.sample(np.minimum(run.t * ode.time_scale, ode.tau[-1]))
    errors = {f"err_{k}": float(np.max(np.abs(getattr(run, k) - s[k])) / np.max(np.abs(s[k])))
              for k in ("mu_ov", "mu_qk")}
    errors.update({f"err_{k}": float(np.max(np.abs(getattr(run, k) / s[k] - 1)))
                   for k in ("alpha", "loss")})
    return errors


@dataclass
class ReductionRun:
    """One ratio r: the ODE, full-batch descent and minibatch descent of the full matrices."""

    r: float
    ode: theory.Trajectory
    full: Descent
    minibatch: Descent


def runs(p: Parameters) -> list[ReductionRun]:
    model = p.model
    calls = []
    for r in p.ratios:
        kw = dict(model=model, parameterization="CACO", eta_ov=p.eta_ov,
                  eta_qk=r * p.eta_ov, target_loss=p.target_loss,
                  step_fraction=p.step_fraction)
        calls += [kw, kw | dict(batch_size=p.batch_size, seed=p.seed)]
    done = descents(calls, p.workers)
    return [ReductionRun(r, theory.integrate_until(model.setting, p.eta_ov, r * p.eta_ov,
                                                   p.target_loss),
                         done[2 * k], done[2 * k + 1]) for k, r in enumerate(p.ratios)]


def rows(runs: list[ReductionRun]) -> list[dict]:
    """Per ratio and descent: steps, relative errors against the ODE, distance from the set."""
    rows = []
    for run in runs:
        for name, d in (("full batch", run.full), (f"batch {run.minibatch.batch_size}",
                                                    run.minibatch)):
            rows.append({"r": run.r, "descent": name, "steps": len(d.t) - 1,
                         **relative_errors(d, run.ode),
                         "max_distance_from_set": float(d.distance.max()),
                         "final_distance_from_set": float(d.distance[-1])})
    return rows


COLUMNS = ("r", "descent", "steps", "err_mu_ov", "err_mu_qk", "err_alpha", "err_loss",
                     "off_set")


def table(rows: list[dict]) -> list[dict]:
    """The rows for printing: distances from the set below 1e-12 are rounding, shown as such
    (their digits differ between machines)."""
    return [{**row, "off_set": ("< 1e-12" if row["max_distance_from_set"] < 1e-12
                                else f"{row['final_distance_from_set']:.2g} at end")}
            for row in rows]


def curves(runs: list[ReductionRun], points: int = 200, markers: int = 24):
    """The plotted points, per ratio: the ODE and minibatch descent at ``points`` log-spaced
    normalised times, full-batch descent at ``markers`` of them (the last four decades)."""
    rows = []
    quantities = ("mu_ov", "mu_qk", "alpha", "loss")
    for run in runs:
        end, scale = run.ode.tau[-1], run.ode.time_scale
        tau = np.geomspace(end * 1e-4, end, points)
        ode = run.ode.sample(tau)
        rows += [{"r": run.r, "source": "ODE", "tau": float(tau[k]),
                  **{q: float(ode[q][k]) for q in quantities}} for k in range(points)]
        for name, d, grid in (("full batch", run.full, np.geomspace(end * 1e-3, end, markers)),
                              ("minibatch", run.minibatch, tau)):
            picks = np.unique(np.searchsorted(d.t * scale, grid).clip(0, len(d.t) - 1))
            rows += [{"r": run.r, "source": name, "tau": float(d.t[k] * scale),
                      **{q: float(getattr(d, q)[k]) for q in quantities}} for k in picks]
    return rows


# --- the figure ---------------------------------------------------------------------------


def plot(curves):
    """theory-reduction: full-matrix gradient descent of the stylized model on the ODE.

    ``curves``: the rows of :func:`qkov.figures.theory_reduction.curves`. Per ratio r (colour):
    the ODE solution (line), full-batch descent (circles) and minibatch descent (dashed),
    against normalised time.
    """
    from matplotlib.lines import Line2D

    ratios = list(dict.fromkeys(row["r"] for row in curves))
    colors = sequential_colors(ratios)
    styles = {"ODE": dict(ls="-"), "full batch": dict(marker="o", mfc="none", ls="none", ms=5),
              "minibatch": dict(ls="--", lw=1.0)}
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 6.2))
        axes = fig.subplots(2, 2, sharex=True).ravel()
        for r, color in zip(ratios, colors):
            for source, style in styles.items():
                for ax, (key, _) in zip(axes, QUANTITIES):
                    ax.plot(*curve_points(curves, key, r=r, source=source), color=color, **style)
        for ax, (_, label), letter in zip(axes, QUANTITIES, "abcd"):
            ax.set_xscale("log")
            ax.set_title(f"({letter}) {label}")
        for ax in axes[2:]:
            ax.set_xlabel(r"time $\min(\eta_{OV}, \eta_{QK})\, t$")
        axes[2].set_yscale("log")
        axes[3].set_ylim(0, 1.02)
        handles = [Line2D([], [], color=c, label=ratio_label(r)) for r, c in zip(ratios, colors)]
        handles += [Line2D([], [], color="k", label=name if name != "ODE" else "reduced ODE",
                           **{k: v for k, v in style.items() if k != "ls" or v != "-"})
                    for name, style in styles.items()]
        fig.legend(handles=handles, loc="outside lower center", ncols=3)
    return fig
