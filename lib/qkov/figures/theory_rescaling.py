"""theory-rescaling: the reduced dynamics of FAFO, FACO, CAFO and CACO at the same nominal
rates, their effective ratio r_eff(t), and the ordering of attention sharpness this predicts,
set against paper-fig2's trained models at a matched held-out loss (read from its artifacts).

:class:`Parameters` are the notebook's (checking them reads paper-fig2's trajectories);
:func:`trajectories`, :func:`rows`, :func:`ordering_text` and :func:`curves` are its steps.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import artifacts
from ..checks import ParameterError, number, optional_path
from ..circuits import PARAMETERIZATIONS
from ..params import derived, parameter
from ..plotting import COLUMN_WIDTH_IN, PARAMETERIZATION_COLORS, curve_points, house_style, new_figure
from ..spec import FigureSpec
from ..stats import NOT_RESOLVED, interval_text, order_against, paired_verdict, seed_interval
from ..synthetic import metrics
from ..synthetic import trajectories as fig2_runs
from ..theory import reduced as theory
from ._setting import SettingParameters

# Compares the reduced model with the trained Fig. 2 models at equal held-out loss.
SPEC = FigureSpec(id="theory-rescaling", reproduces=None, page="book/theory",
                  tables=("curves.csv",), dtype="float64",
                  reads=("paper-fig2/summary.json", f"paper-fig2/{fig2_runs.FILE}"),
                  resources={"mem_mb": 1000, "runtime": 10},
                  alt=("Three plots, one colour per parameterization (FAFO, FACO, CAFO, CACO): the "
                       "effective learning-rate ratio against normalised time (log-log), the attention "
                       "mass alpha at each loss threshold, and bars of the predicted alpha at the matched "
                       "loss beside the attention measured in paper Fig. 2 at the same held-out loss."))

ROW1_PANELS = ("FAFO", "FACO", "CAFO", "CACO")  # Fig. 2 row 1: equal learning rates
# Fig. 2 row 1 starts every factor at 1e-6 I except FAFO's W_Q, W_K (PyTorch's default init).
DEFAULT_INIT_FACTORS = {"FAFO": "qk"}


# Bounds within which every parameterization's flow is reached quickly. A factorized
# circuit's rate grows with its factors (factor_rate), so a large nominal r or offset makes
# the flow stiff for the explicit solver: at r = 1e6 FACO takes 26 s to loss 1e-20, at
# 1e3 0.5 s; an offset (default_init_rate) of 1e10 took 12 s, 1e100 31 s, 1e3 0.4 s. Factors
# start at w = init_scale^2 and factor_rate squares w: below init_scale ~1e-77 that
# underflows to 0 and the factors never move (1e-100 failed; 1e-70 was reached by FAFO, FACO
# and CAFO at r in {1e-3, 1, 1e3}, to losses 0.02 and 1e-20). Fig. 2 row 1: r = 1,
# init_scale = 1e-6, default_init_rate = 0.667.
MAX_R = 1e3
MAX_DEFAULT_INIT_RATE = 1e3
MIN_INIT_SCALE = 1e-50


@dataclass(frozen=True)
class Parameters(SettingParameters):
    """The notebook's parameters. Checking them reads paper-fig2's trajectories
    (``measured``), so a missing or stale paper-fig2 run fails before any work."""

    eta_ov: float = parameter(1.0, number, above=0, doc="nominal OV learning rate, positive")
    r: float = parameter(
        1.0, number, above=0, at_most=MAX_R,
        doc="nominal ratio eta_QK / eta_OV (Fig. 2 row 1: equal rates); in (0, 1e3]")
    init_scale: float = parameter(
        1e-6, number, at_least=MIN_INIT_SCALE,
        doc="singular value of balanced factors at the start (Fig. 2: 1e-6 I); at least 1e-50")
    default_init_rate: float = parameter(
        0.667, number, above=0, at_most=MAX_DEFAULT_INIT_RATE,
        doc="phi^2 + psi^2 of default-initialised 50x50 factors (2 x 50/150); in (0, 1e3]")
    matched_loss: float = parameter(
        0.02, number, above=0,
        doc="compare attention when the loss first reaches this; in [1e-20, log M)")
    fig2_summary: str | None = parameter(
        None, optional_path,
        doc=("paper-fig2's summary.json (trajectories.csv beside it); None: its default "
             "artifacts folder"))
    measured: dict = derived()

    def check(self):
        theory.check_loss_threshold("matched_loss", self.matched_loss, self.setting)
        summary = (Path(self.fig2_summary) if self.fig2_summary is not None
                   else artifacts.default_dir("paper-fig2") / "summary.json")
        object.__setattr__(self, "measured", measured_fig2_sharpness(summary, self.matched_loss))


def measured_fig2_sharpness(path: Path, matched_loss: float) -> dict[str, dict[str, float]]:
    """Per Fig. 2 row-1 panel, when each seed's held-out loss first reached ``matched_loss``:
    the attention on distinct and on class-identifying tokens (mean and 95% t interval over
    seeds, and per seed), and the effective ratio r_eff from the factors
    (qkov.synthetic.models.factor_measures; log10, mean and 95% interval).

    Read from the ``trajectories.csv`` that paper-fig2 writes next to its ``summary.json``
    (``path``): the panels stop at different losses, so their end-of-training attention is
    not compared at equal loss.
    """
    runs_file = path.parent / fig2_runs.FILE
    for needed in (path, runs_file):
        if not needed.is_file():
            raise ParameterError("fig2_summary", f"no file {needed}: run "
                                   "notebooks/paper-fig2.ipynb first (`make figures` does)")
    try:
        try:
            summary = json.loads(path.read_text())
        except ValueError as err:
            raise ValueError(f"{path}: not JSON ({err})") from None
        if not isinstance(summary, dict) or summary.get("figure") != "paper-fig2":
            raise ValueError(f"{path}: not written by paper-fig2")
        runs = [t for t in fig2_runs.read(runs_file) if t.panel in ROW1_PANELS]
        if {t.panel for t in runs} != set(ROW1_PANELS):
            raise ValueError(f"{runs_file}: expected rows for {', '.join(ROW1_PANELS)}")
    except ValueError as err:
        raise ParameterError("fig2_summary", f"{err}; re-run notebooks/paper-fig2.ipynb") \
            from None
    measured = {}
    rates = [1 + fig2_runs.MEASURES.index(name) for name in ("rate_qk", "rate_ov")]
    for panel in ROW1_PANELS:
        mine = [t.points for t in sorted(runs, key=lambda t: t.seed) if t.panel == panel]
        values = [metrics.at_loss(t, matched_loss, (2, 3, *rates)) for t in mine]
        if any(v is None for v in values):
            lowest = max(float(t[:, 1].min()) for t in mine)
            raise ParameterError(
                "matched_loss", f"{matched_loss:g}: not every {panel} run of paper-fig2 "
                f"reached this held-out loss (all of them reached {lowest:.3g}); choose a "
                "larger matched_loss")
        values = np.array(values)
        attention, attention_ci = seed_interval(values[:, 0])
        # r = 1 in row 1: the effective ratio is the ratio of the circuits' rate factors
        log_ratio, log_ratio_ci = seed_interval(np.log10(values[:, 2] / values[:, 3]))
        measured[panel] = {"attention": attention, "attention_ci95": attention_ci,
                           "attention_seeds": [float(x) for x in values[:, 0]],
                           "attention_std": float(values[:, 0].std()),
                           "class_attention": float(values[:, 1].mean()),
                           "log10_r_eff": log_ratio, "log10_r_eff_ci95": log_ratio_ci,
                           "seeds": len(values)}
    return measured


def trajectories(p: Parameters, balanced: bool = False) -> dict[str, theory.Trajectory]:
    """The reduced dynamics of each parameterization at the same nominal rates, until the
    matched loss, with thresholds every tenth of a decade on the way.

    Factorized circuits start at ``w = init_scale^2``. With ``balanced=False`` the starts
    follow Fig. 2 row 1: FAFO's default-initialised W_Q, W_K are modelled by the offset
    ``default_init_rate`` (their ``a^2 + c^2`` along any direction at the start; random
    factors hold no product along V, so ``w`` starts at ``init_scale^2`` all the same).
    """
    thresholds = theory.loss_thresholds(1.0, p.matched_loss, 10) if p.matched_loss < 1 \
        else [p.matched_loss]
    trajectories = {}
    for name in PARAMETERIZATIONS:
        circuit = None if balanced else DEFAULT_INIT_FACTORS.get(name)
        offsets = (p.default_init_rate if circuit == "ov" else 0.0,
                   p.default_init_rate if circuit == "qk" else 0.0)
        trajectories[name] = theory.integrate_until(
            p.setting, p.eta_ov, p.r * p.eta_ov, p.matched_loss, thresholds,
            parameterization=name, init_scale=p.init_scale, offsets=offsets)
    return trajectories


def _ranks(values: dict[str, float]) -> dict[str, int]:
    order = sorted(values, key=values.get, reverse=True)
    return {name: order.index(name) + 1 for name in values}


BRIDGE_COLUMNS = ("parameterization", "predicted_r_eff", "measured_r_eff",
                  "measured_log10_ci95", "predicted_r_eff_rank", "measured_r_eff_rank",
                  "measured_over_predicted")


def bridge_rows(rows: list[dict]) -> list[dict]:
    """The effective ratio r_eff at the matched loss, predicted by the reduced model and
    measured in the trained Fig. 2 row-1 models from their factors' Gram matrices
    (``qkov.synthetic.models.factor_measures``: rate factor of the QK circuit over that of
    the OV circuit, at r = 1), with ranks (1: the largest) and the measured value over the
    predicted one. The measured value is the geometric mean over seeds; its interval is the
    95% t interval of log10 r_eff."""
    predicted = {row["parameterization"]: row["r_eff_at_loss"] for row in rows}
    measured = {row["parameterization"]: 10 ** row["measured_log10_r_eff"] for row in rows}
    pred_rank, meas_rank = _ranks(predicted), _ranks(measured)
    return [{"parameterization": name, "predicted_r_eff": f"{predicted[name]:.3g}",
             "measured_r_eff": f"{measured[name]:.3g}",
             "measured_log10_ci95": interval_text(row["measured_log10_r_eff"],
                                                  row["measured_log10_r_eff_ci95"], 3),
             "predicted_r_eff_rank": pred_rank[name], "measured_r_eff_rank": meas_rank[name],
             "measured_over_predicted": f"{measured[name] / predicted[name]:.3g}"}
            for name, row in zip(predicted, rows)]


def bridge_order(rows: list[dict]) -> str:
    """Whether the measured r_eff orders the parameterizations as the predicted one, pair by
    pair beyond the 95% intervals of log10 r_eff (qkov.stats.order_against)."""
    predicted = {row["parameterization"]: row["r_eff_at_loss"] for row in rows}
    measured = {row["parameterization"]: (row["measured_log10_r_eff"],
                                          row["measured_log10_r_eff_ci95"]) for row in rows}
    against, unresolved = order_against(predicted, measured)
    if against:
        return "different (" + ", ".join(against) + " reversed)"
    return "the same" + (f" (not resolved: {', '.join(unresolved)})" if unresolved else "")


def rows(trajectories: dict[str, theory.Trajectory],
                   balanced: dict[str, theory.Trajectory], measured: dict) -> list[dict]:
    """Per parameterization: the prediction at the matched loss (starts as in Fig. 2, and all
    factors balanced) and the measured sharpness, with ranks (1 = sharpest)."""
    predicted = {name: float(tr.alpha[-1]) for name, tr in trajectories.items()}
    observed = {name: measured[name]["attention"] for name in trajectories}
    pred_rank, obs_rank = _ranks(predicted), _ranks(observed)
    rows = []
    for name, tr in trajectories.items():
        r_eff = tr.r_eff
        rows.append({
            "parameterization": name, "matched_loss": tr.target_loss,
            "tau_at_loss": float(tr.tau[-1]), "alpha_at_loss": predicted[name],
            "alpha_balanced_start": float(balanced[name].alpha[-1]),
            "r_eff_at_loss": float(r_eff[-1]), "r_eff_min": float(r_eff.min()),
            "r_eff_max": float(r_eff.max()), "predicted_rank": pred_rank[name],
            "measured_attention": observed[name],
            "measured_attention_ci95": measured[name]["attention_ci95"],
            "measured_attention_seeds": measured[name]["attention_seeds"],
            "measured_attention_std": measured[name]["attention_std"],
            "measured_log10_r_eff": measured[name]["log10_r_eff"],
            "measured_log10_r_eff_ci95": measured[name]["log10_r_eff_ci95"],
            "measured_class_attention": measured[name]["class_attention"],
            "measured_seeds": measured[name]["seeds"],
            "measured_rank": obs_rank[name],
        })
    return rows


COLUMNS = ("parameterization", "alpha_at_loss", "alpha_balanced_start",
                     "tau_at_loss", "r_eff_at_loss", "predicted_rank", "measured_attention",
                     "measured_attention_ci95", "measured_class_attention", "measured_rank")


def ordering_text(rows: list[dict]) -> str:
    """The predicted and the measured ordering of sharpness, and whether they agree."""
    def order(key):
        return " > ".join(row["parameterization"] for row in sorted(rows, key=lambda x: x[key]))

    predicted, measured = order("predicted_rank"), order("measured_rank")
    verdict = "the same" if predicted == measured else "different"
    lines = [f"predicted (reduced model):  {predicted}", f"measured (paper-fig2):      {measured}",
             f"orderings are {verdict}"]
    for a, b in itertools.combinations(rows, 2):  # is each swap beyond the seeds' noise?
        if (a["predicted_rank"] < b["predicted_rank"]) != (a["measured_rank"] < b["measured_rank"]):
            # paired by seed: the runs of one seed see the same batches
            resolved, gap, half = paired_verdict(np.subtract(a["measured_attention_seeds"],
                                                             b["measured_attention_seeds"]))
            verdict = "a tie: the interval holds 0" if resolved == NOT_RESOLVED else \
                "a real swap: the interval excludes 0"
            lines.append(f"{a['parameterization']} and {b['parameterization']} swap: measured "
                         f"difference {interval_text(gap, half, 3)} (paired by seed, 95% "
                         f"interval), {verdict}")
    return "\n".join(lines)


def curves(trajectories: dict[str, theory.Trajectory], points: int = 200):
    """The plotted points: r_eff and alpha against normalised time, per parameterization."""
    rows = []
    for name, tr in trajectories.items():
        tau = np.geomspace(max(tr.tau[1], tr.tau[-1] * 1e-6), tr.tau[-1], points)
        s = tr.sample(tau)
        r_eff = tr.r_eff_at(s["mu_ov"], s["mu_qk"])
        rows += [{"parameterization": name, "tau": float(tau[k]), "r_eff": float(r_eff[k]),
                  "mu_ov": float(s["mu_ov"][k]), "mu_qk": float(s["mu_qk"][k]),
                  "alpha": float(s["alpha"][k]), "loss": float(s["loss"][k])}
                 for k in range(points)]
    return rows


# --- the figure ---------------------------------------------------------------------------


def plot(trajectories, rows, curves):
    """theory-rescaling: (a) r_eff(t) per parameterization (``curves``: the rows of
    :func:`qkov.figures.theory_rescaling.curves`), (b) alpha at each loss threshold, (c) the
    predicted alpha at the matched loss next to the measured Fig. 2 attention mass."""
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 6.4))
        grid = fig.add_gridspec(2, 2)
        axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]),
                fig.add_subplot(grid[1, :])]
        for name, tr in trajectories.items():
            color = PARAMETERIZATION_COLORS[name]
            axes[0].plot(*curve_points(curves, "r_eff", parameterization=name), color=color,
                         label=name)
            levels = np.array(sorted(tr.crossings, reverse=True))
            axes[1].plot(levels, [tr.crossings[x]["alpha"] for x in levels], color=color,
                         label=name)
        axes[0].set_xscale("log")
        axes[0].set_yscale("log")
        axes[0].set_xlabel(r"time $\min(\eta_{OV}, \eta_{QK})\, t$")
        axes[0].set_title(r"(a) effective ratio $r_{\mathrm{eff}}(t)$")
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=4)
        axes[1].set_xscale("log")
        axes[1].invert_xaxis()
        axes[1].set_ylim(0, 1.02)
        axes[1].set_xlabel("loss threshold")
        axes[1].set_title(r"(b) $\alpha$ at each loss threshold")

        names = [row["parameterization"] for row in rows]
        x = np.arange(len(names))
        axes[2].bar(x - 0.2, [row["alpha_at_loss"] for row in rows], 0.4,
                    color=[PARAMETERIZATION_COLORS[n] for n in names],
                    label=rf"predicted $\alpha$ at $L = {rows[0]['matched_loss']:g}$")
        axes[2].bar(x + 0.2, [row["measured_attention"] for row in rows], 0.4,
                    yerr=[row["measured_attention_ci95"] for row in rows], capsize=3,
                    color="white", edgecolor=[PARAMETERIZATION_COLORS[n] for n in names],
                    hatch="//", label="paper-fig2 at the same held-out loss")
        axes[2].set_xticks(x, names)
        axes[2].set_ylim(0, 1.32)  # room for the legend above the bars
        axes[2].set_yticks(np.linspace(0, 1, 6))
        axes[2].set_title(r"(c) $\alpha$ at equal loss")
        axes[2].set_ylabel("attention on relevant tokens")
        axes[2].legend(loc="upper left", ncols=2)
    return fig
