"""paper-fig4: paper Fig. 4 - the reduced QK/OV gradient-flow dynamics for several
learning-rate ratios r, and the state at which the loss first reaches each threshold.

:class:`Parameters` are the notebook's; :func:`trajectories` integrates the ODE once per
ratio; :func:`threshold_rows` are the stored rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import ParameterError, integer, number, number_list
from ..params import FigureParameters, derived, parameter
from ..plotting import COLUMN_WIDTH_IN, house_style, new_figure, ratio_label, sequential_colors
from ..spec import FigureSpec
from ..theory.reduced import (
    MAX_RATIO,
    Setting,
    check_loss_threshold,
    integrate_until,
    loss_thresholds,
    threshold_count,
)

SPEC = FigureSpec(id="paper-fig4", reproduces="paper Fig. 4", page="book/paper-fig4",
                  dtype="float64", resources={"mem_mb": 1000, "runtime": 10},
                  alt=("Seven line plots of the reduced dynamics, one line per learning-rate ratio r: on "
                       "the left mu_OV, mu_QK, the loss and the attention mass alpha against normalised "
                       "time (log scale); on the right mu_OV, mu_QK and alpha at the moment the loss first "
                       "falls below each stopping threshold."))

# Every stopping threshold is an event the solver evaluates at each of its steps: 1,000 of
# them (e.g. 50 a decade over 20 decades) take ~1 s per ratio, against 0.04 s for the default
# 41; finer than 100 a decade, the panels' curves show nothing new. (Unbounded, -p
# per_decade 100000000 never left the check: it made 400 million thresholds.)
MAX_PER_DECADE = 100
MAX_THRESHOLDS = 1_000
# One curve, and one integration of up to ~1 s, per ratio.
MAX_RATIOS = 50


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: the paper's Fig. 4)."""

    m: float = parameter(
        Setting.m, number, above=0,
        doc="relevant tokens in the context; positive")
    n: float = parameter(
        Setting.n, number, above=0,
        doc="irrelevant tokens in the context; positive")
    b: float = parameter(
        Setting.b, number, above=0,
        doc="constant of the paper's ODE (its simulation: embedding size 50); positive")
    M: int = parameter(
        Setting.M, integer, minimum=2,
        doc="possible next tokens, at least 2; the loss starts at log M")
    eta_ov: float = parameter(
        1.0, number, above=0,
        doc="OV learning rate, positive; the QK rate is r * eta_ov")
    ratios: list = parameter(
        [0.01, 0.1, 1, 10, 100], number_list, above=0, at_most=MAX_RATIO, max_items=MAX_RATIOS,
        doc="ratios eta_QK / eta_OV, one curve each; in (0, 1e6], at most 50")
    target_loss: float = parameter(
        1e-4, number, above=0,
        doc="integrate until the loss first reaches this; in [1e-20, log M)")
    loss_max: float = parameter(
        1.0, number, above=0,
        doc="largest stopping threshold of panels (e)-(g); in (target_loss, log M)")
    per_decade: int = parameter(
        10, integer, minimum=1, maximum=MAX_PER_DECADE,
        doc="stopping thresholds per decade of loss; 1 to 100, at most 1,000 thresholds in all")
    setting: Setting = derived()
    thresholds: np.ndarray = derived()

    def check(self):
        setting = Setting(m=self.m, n=self.n, b=self.b, M=self.M)
        loss_max = check_loss_threshold("loss_max", self.loss_max, setting)
        target = check_loss_threshold("target_loss", self.target_loss, setting)
        if target >= loss_max:
            raise ParameterError(
                "target_loss", f"expected a loss below loss_max={loss_max:g}, got {target:g}"
            )
        count = threshold_count(loss_max, target, self.per_decade)
        if count > MAX_THRESHOLDS:
            raise ParameterError(
                "per_decade", f"{self.per_decade} a decade from loss_max={loss_max:g} to "
                f"target_loss={target:g} makes {count:,} stopping thresholds; expected at most "
                f"{MAX_THRESHOLDS:,} (each is a solver event): choose fewer a decade")
        object.__setattr__(self, "setting", setting)
        object.__setattr__(self, "thresholds", loss_thresholds(loss_max, target, self.per_decade))


def trajectories(p: Parameters):
    """One trajectory per ratio r = eta_qk / eta_ov, all stopped at ``target_loss``."""
    return [integrate_until(p.setting, p.eta_ov, r * p.eta_ov, p.target_loss, p.thresholds)
            for r in p.ratios]


def threshold_rows(trajectories) -> list[dict]:
    """Flat records for summary.json and data.csv: the state at each loss threshold."""
    return [
        {"r": tr.r, "loss": level, "tau": c["tau"], "mu_ov": c["mu_ov"],
         "mu_qk": c["mu_qk"], "alpha": c["alpha"]}
        for tr in trajectories
        for level, c in tr.crossings.items()
    ]


def time_to_loss(trajectories, loss: float, eta_ov: float) -> list[dict]:
    """Per ratio, when the loss first reaches ``loss``: the normalised time tau =
    min(eta_OV, eta_QK) t of the paper's axis, and the time t itself at the fixed OV rate
    ``eta_ov`` (eta_QK = r eta_ov)."""
    rows = []
    for tr in trajectories:
        level = min(tr.crossings, key=lambda x: abs(np.log(x / loss)))  # the threshold at loss
        tau = tr.crossings[level]["tau"]
        rows.append({"r": tr.r, "tau": tau, "t": tau / (eta_ov * min(1.0, tr.r))})
    return rows


# --- the figure ---------------------------------------------------------------------------


def plot(trajectories, thresholds, samples: int = 400):
    """Paper Fig. 4: the reduced dynamics for several ratios r = eta_QK / eta_OV.

    Left column, (a)-(d): mu_OV, mu_QK, loss and alpha against normalised time tau =
    min(eta) t (log scale). Right column, (e)-(g): mu_OV, mu_QK and alpha at the moment the
    loss first falls below each threshold (x axis inverted: training goes on to the right),
    each next to its quantity over time; the legend in the slot beside the loss.
    """
    ratios = [tr.r for tr in trajectories]
    colors = sequential_colors(ratios)
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 9.0))
        grid = fig.add_gridspec(4, 2)
        left = [fig.add_subplot(grid[0, 0])]
        left += [fig.add_subplot(grid[k, 0], sharex=left[0]) for k in range(1, 4)]
        top = left
        bottom = [fig.add_subplot(grid[k, 1]) for k in (0, 1, 3)]
        legend_ax = fig.add_subplot(grid[2, 1])
        legend_ax.axis("off")

        for tr, color in zip(trajectories, colors):
            tau = np.geomspace(1.0, tr.tau[-1], samples)
            s = tr.sample(tau)
            for ax, key in zip(top, ("mu_ov", "mu_qk", "loss", "alpha")):
                ax.plot(tau, s[key], color=color, label=ratio_label(tr.r))
            levels = np.array(sorted(tr.crossings, reverse=True))
            for ax, key in zip(bottom, ("mu_ov", "mu_qk", "alpha")):
                ax.plot(levels, [tr.crossings[x][key] for x in levels], color=color)

        titles = [r"(a) $\mu_{OV}(t)$", r"(b) $\mu_{QK}(t)$", r"(c) loss $L(t)$",
                  r"(d) attention mass $\alpha(t)$"]
        for ax, title in zip(top, titles):
            ax.set_xscale("log")
            ax.set_title(title)
            ax.tick_params(labelbottom=ax is top[-1])
        top[-1].set_xlabel(r"time $\min(\eta_{OV}, \eta_{QK})\, t$")
        top[2].set_yscale("log")
        top[3].set_ylim(0, 1.02)

        titles = [r"(e) $\mu_{OV}$ at stop", r"(f) $\mu_{QK}$ at stop", r"(g) $\alpha$ at stop"]
        for ax, title in zip(bottom, titles):
            ax.set_xscale("log")
            ax.set_xlim(max(thresholds), min(thresholds))
            ax.set_title(title)
        bottom[-1].set_xlabel("stopping loss threshold")
        bottom[2].set_ylim(0, 1.02)

        handles, labels = top[0].get_legend_handles_labels()
        legend_ax.legend(handles, labels, loc="center", ncols=2,
                         title=r"$r = \eta_{QK} / \eta_{OV}$")
    return fig
