"""theory-shortcut: the causal test of the query-token shortcut, and how sensitive the
claim is to the training setting.

The ratio sweep (theory-ratio-sweep) finds attention on the distinct tokens *falling* at large
ratios r on the synthetic task, and explains it by a shortcut: the query attends to its own
position, whose token identifies the class, and a fast QK circuit learns to attend there.
Here that explanation is put to the test by cutting the shortcut (``qkov.synthetic.tasks``,
``cut``) and re-running the same sweep - same seeds, same setting - at the paper's two
lengths, T = 64 and T = 128, in two ways: "self", the query does not attend to its own
position (one change, on the very same batches), and "context", the query token is also kept
out of the context. The theory predicts that attention on the distinct tokens then rises
with r. The sweep is also run on the paper's task at more lengths, since the length decides
at which r the shortcut takes over. Last, the claim on the task with the query's own
position masked is repeated at other OV rates, initial scales and batch sizes.

:class:`Parameters` are the notebook's; :func:`configs` the training runs; :func:`run_rows`
one record per run; :func:`arm_rows`, :func:`verdict_rows`, :func:`sensitivity_rows` the
tables; :func:`plot` and :func:`plot_sensitivity` the drawings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.ticker import NullFormatter

from ..checks import (
    ParameterError,
    boolean,
    integer,
    number,
    number_list,
    seed_list,
)
from ..cost import Work
from ..params import FigureParameters, parameter
from ..plotting import COLUMN_WIDTH_IN, HOUSE_STYLE, house_style, new_figure, sequential_colors
from ..spec import Drawing, FigureSpec
from ..stats import HIGHER, LOWER, interval_text, paired_verdict, seed_interval
from ..synthetic import metrics, models, tasks, train

SPEC = FigureSpec(
    id="theory-shortcut", reproduces=None, page="book/theory",
    tables=("runs.csv", "lines.csv", "sensitivity.csv"), threads=2,
    resources={"mem_mb": 4000, "runtime": 60},
    alt=("Three plots of attention on the distinct tokens at a matched loss against the "
         "learning-rate ratio r (log scale). (a) and (b), at sequence lengths 64 and 128: the "
         "paper's task with the query-token shortcut (squares), the query's own position "
         "masked (circles) and the query token also kept out of the context (triangles), each "
         "seed a small dot, the mean with its 95% interval, and dotted lines at the share "
         "uniform attention would give. (c): the paper's task, one line per sequence length "
         "from 32 to 256."),
    extra_drawings=(
        Drawing("sensitivity", None,
                alt="Three plots of attention on the distinct tokens at a matched loss against "
                    "the learning-rate ratio r, with the query's own position masked, one line per "
                    "setting: (a) the OV learning rate, (b) the initial scale of the weights, "
                    "(c) the batch size; mean and 95% interval over seeds."),),
    rates={"model-steps": 900_000})

RATIOS = [0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100]  # theory-ratio-sweep's
# The tasks' names in tables: the paper's task, its query's own position masked, and the query
# token also kept out of the context (qkov.synthetic.tasks.CUTS).
CUT_NAMES = {"none": "paper", "self": "masked", "context": "removed"}
# The sensitivity runs mask the query's own position: the one change, on the same batches.
SENSITIVITY_CUT = "self"
# The work of a model-step at T counts as max(1, T / TASK_T) (theory-ratio-sweep: data cost
# grow with T past ~128) and, for batches larger than 32, as batch / 32.
TASK_T = 64
MAX_T = 8192  # as theory-ratio-sweep: a stream's data in flight grow with T


def _lengths(name, value) -> list[int]:
    values = number_list(name, value, above=2, at_most=MAX_T, distinct=True)
    if any(v != int(v) for v in values):
        raise ParameterError(name, f"expected whole sequence lengths, got {value!r}")
    return [int(v) for v in values]


def _ratios(name, value) -> list[float]:
    return number_list(name, value, above=0, at_most=1e6, distinct=True)


def _batch_sizes(name, value) -> list[int]:
    values = number_list(name, value, above=0, at_most=4096, distinct=True)
    if any(v != int(v) for v in values):
        raise ParameterError(name, f"expected whole batch sizes, got {value!r}")
    return [int(v) for v in values]


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: the setting of theory-ratio-sweep's main sweep)."""

    ratios: list = parameter(
        list(RATIOS), _ratios,
        doc="ratios r of the QK to the OV rate; distinct, positive")
    lengths: list = parameter(
        [64, 128], _lengths,
        doc=("sequence lengths T of the test, each in the paper's task and both cut ones; 3 to "
             "8192"))
    shortcut_lengths: list = parameter(
        [32, 256], _lengths,
        doc="more lengths, in the paper's task only; 3 to 8192")
    shortcut_ratios: list = parameter([1, 3, 10, 30, 100], _ratios, doc="the ratios of those runs")
    matched_loss: float = parameter(
        0.05, number, above=0, below=3.9,
        doc="each run stops when its epoch loss reaches this; in (0, 3.9)")
    seeds: list = parameter(
        [1234, 1235, 1236, 1237, 1238], seed_list,
        doc="one run per setting, ratio and seed")
    lr_ov: float = parameter(
        0.1, number, above=0, at_most=10,
        doc="OV learning rate (QK: r times it); in (0, 10]")
    init_scale: float = parameter(
        1e-6, number, above=0, at_most=1,
        doc="both circuits start at this times the identity; in (0, 1]")
    batch_size: int = parameter(
        32, integer, minimum=1, maximum=4096,
        doc="sequences per step; 1 to 4096")
    batches_per_epoch: int = parameter(
        50, integer, minimum=1,
        doc="batches per epoch (the stop looks at epoch means)")
    max_epochs: int = parameter(
        3000, integer, minimum=1,
        doc="give up after this many epochs (more for a smaller OV rate)")
    eval_batches: int = parameter(
        100, integer, minimum=1, maximum=10_000,
        doc="held-out batches of 32 per run; 1 to 10,000")
    sensitivity_ratios: list = parameter(
        [1, 10, 100], _ratios,
        doc="sensitivity: the ratios of its runs")
    sensitivity_lr_ov: list = parameter(
        [0.03, 0.3], number_list, above=0, at_most=10, distinct=True,
        doc="sensitivity: other OV learning rates; in (0, 10]")
    sensitivity_init_scales: list = parameter(
        [1e-2, 0.1], number_list, above=0, at_most=1, distinct=True,
        doc="sensitivity: other initial scales; in (0, 1]")
    sensitivity_batch_sizes: list = parameter(
        [8, 128], _batch_sizes,
        doc="sensitivity: other batch sizes; 1 to 4096")
    workers: int = parameter(
        2, integer, minimum=1,
        doc="training processes (results do not depend on it)")
    progress: bool = parameter(True, boolean, doc="show a progress bar while training")

    def work(self) -> Work:
        """Optimizer steps of every run to max_epochs (an upper bound: runs stop at the
        matched loss), each weighted by max(1, T / 64) and by the batch size over 32."""
        return Work(sum(c.steps * max(1.0, c.T / TASK_T) * max(1.0, c.batch_size / 32)
                        for c in configs(self)),
                    "model-steps", f"x T/{TASK_T} past T = {TASK_T}, x batch/32 above 32")


@dataclass(frozen=True)
class Setting:
    """One line of the figure: a task (length, cut of the shortcut) and a training setting,
    swept over ``ratios``; ``experiment`` is "causal" (the test), "lengths" (the paper's task
    at more T) or the factor a sensitivity line varies ("lr_ov", "init_scale",
    "batch_size")."""

    experiment: str
    T: int
    cut: str
    lr_ov: float
    init_scale: float
    batch_size: int
    ratios: tuple

    @property
    def key(self) -> str:
        return (f"{self.experiment}: T = {self.T}, cut {self.cut}, lr_ov = {self.lr_ov:g}, "
                f"init {self.init_scale:g} I, batch {self.batch_size}")


def settings(p: Parameters) -> list[Setting]:
    """Every line: the causal test (each length, each cut), more lengths on the paper's task,
    and the sensitivity lines (the query's own position masked at the first length, one
    factor changed at a time; each factor's default value is the causal test's run, not
    trained twice)."""
    base = dict(lr_ov=p.lr_ov, init_scale=p.init_scale, batch_size=p.batch_size)
    out = [Setting("causal", T, cut, **base, ratios=tuple(p.ratios))
           for T in p.lengths for cut in tasks.CUTS]
    out += [Setting("lengths", T, "none", **base, ratios=tuple(p.shortcut_ratios))
            for T in p.shortcut_lengths if T not in p.lengths]
    for factor, values in (("lr_ov", p.sensitivity_lr_ov),
                           ("init_scale", p.sensitivity_init_scales),
                           ("batch_size", p.sensitivity_batch_sizes)):
        for value in values:
            if value != base[factor]:
                out.append(Setting(factor, p.lengths[0], SENSITIVITY_CUT, **{**base, factor: value},
                                   ratios=tuple(p.sensitivity_ratios)))
    return out


def configs(p: Parameters, setting: Setting | None = None) -> list[train.RunConfig]:
    """CACO from ``init_scale`` x I (the theory's symmetric point), QK rate r * lr_ov, each
    run stopped when its mean epoch loss reaches the matched loss; a smaller OV rate gets
    proportionally more epochs, so that it can reach the same loss."""
    if setting is None:
        return [c for s in settings(p) for c in configs(p, s)]
    model = models.ModelConfig("CACO", qk_init="identity", ov_init="identity",
                               init_scale=setting.init_scale)
    epochs = round(p.max_epochs * max(1.0, p.lr_ov / setting.lr_ov))
    return [train.RunConfig(run_name(setting, r, seed), model, seed, epochs,
                            p.batches_per_epoch, lr_qk=r * setting.lr_ov, lr_ov=setting.lr_ov,
                            batch_size=setting.batch_size, T=setting.T,
                            early_stop_loss=p.matched_loss, cut=setting.cut)
            for r in setting.ratios for seed in p.seeds]


def run_name(setting: Setting, r: float, seed: int) -> str:
    return f"{setting.key}/r{r:g}/seed{seed}"


RUN_COLUMNS = ("experiment", "T", "cut", "lr_ov", "init_scale", "batch_size", "r", "seed",
               "distinct", "class_identifying", "query_token", "other_queries", "target", "loss",
               "epochs", "reached")


def run_rows(p: Parameters, results: list[train.RunResult]) -> list[dict]:
    """runs.csv: one record per run, measured on its held-out sequences (the per-seed values
    every table and drawing is made from)."""
    by_name = {r.config.name: r for r in results}
    rows = []
    for s in settings(p):
        for r in s.ratios:
            for seed in p.seeds:
                m = metrics.measure_run(by_name[run_name(s, r, seed)], p.eval_batches)
                rows.append({"experiment": s.experiment, "T": s.T, "cut": s.cut,
                             "lr_ov": s.lr_ov, "init_scale": s.init_scale,
                             "batch_size": s.batch_size, "r": r, "seed": seed,
                             "distinct": m.distinct, "class_identifying": m.class_identifying,
                             "query_token": m.query_token, "other_queries": m.other_queries,
                             "target": m.target, "loss": m.loss, "epochs": m.epochs,
                             "reached": m.reached})
    return rows


def _pick(runs, setting: Setting, r: float) -> list[dict]:
    """The runs of one line at one ratio, in seed order."""
    return sorted((x for x in runs if x["experiment"] == setting.experiment
                   and x["T"] == setting.T and x["cut"] == setting.cut
                   and x["lr_ov"] == setting.lr_ov and x["init_scale"] == setting.init_scale
                   and x["batch_size"] == setting.batch_size and x["r"] == r),
                  key=lambda x: x["seed"])


def line(runs, setting: Setting) -> list[dict]:
    """One line of the figure: per ratio, the per-seed values and their mean and 95% t
    interval (qkov.stats) of the attention on the distinct tokens."""
    out = []
    for r in setting.ratios:
        mine = _pick(runs, setting, r)
        values = [x["distinct"] for x in mine]
        mean, half = seed_interval(values)
        out.append({"r": r, "seeds": [x["seed"] for x in mine], "values": values, "mean": mean,
                    "ci95": half, "loss": float(np.mean([x["loss"] for x in mine])),
                    "target": float(np.mean([x["target"] for x in mine])),
                    "query_token": float(np.mean([x["query_token"] for x in mine])),
                    "other_queries": float(np.mean([x["other_queries"] for x in mine])),
                    "epochs": float(np.mean([x["epochs"] for x in mine])),
                    "reached": sum(x["reached"] for x in mine), "runs": len(mine)})
    return out


def _setting(p: Parameters, experiment: str, T: int, cut: str, **changed) -> Setting:
    return next(s for s in settings(p) if s.experiment == experiment and s.T == T
                and s.cut == cut
                and all(getattr(s, k) == v for k, v in changed.items()))


def arm_rows(p: Parameters, runs) -> list[dict]:
    """data.csv: per length, task (its cut of the shortcut) and ratio: the attention on the
    distinct tokens at the matched loss (mean, 95% interval), on the query token and on the
    other classes' query tokens (means), the share uniform attention would give the distinct
    tokens, the mean held-out loss and how many runs reached the matched loss."""
    rows = []
    for s in settings(p):
        if s.experiment not in ("causal", "lengths"):
            continue
        for point in line(runs, s):
            rows.append({"T": s.T, "cut": s.cut, "r": point["r"],
                         "distinct_mean": point["mean"], "distinct_ci95": point["ci95"],
                         "query_token": point["query_token"],
                         "other_queries": point["other_queries"],
                         "uniform_share": tasks.uniform_distinct_share(s.cut, s.T),
                         "loss_mean": point["loss"], "runs_reaching_loss": point["reached"],
                         "runs": point["runs"]})
    return rows


def causal_table(p: Parameters, runs) -> list[dict]:
    """The printed table of the causal test: per ratio, attention on the distinct tokens at
    the matched loss (mean ± 95% interval over seeds), per length and task (CUT_NAMES)."""
    columns = {}
    for T in p.lengths:
        for cut in tasks.CUTS:
            columns[f"T={T}_{CUT_NAMES[cut]}"] = line(runs, _setting(p, "causal", T, cut))
    return [{"r": f"{r:g}", **{name: interval_text(points[k]["mean"], points[k]["ci95"], 3)
                               for name, points in columns.items()}}
            for k, r in enumerate(p.ratios)]


def rises(points: list[dict]) -> dict:
    """Does the attention rise with r along one line? Per consecutive pair of ratios, the
    difference paired by seed (the same seed starts from the same weights and sees the same
    batches at every r; qkov.stats.paired_verdict, no margin: the theory predicts a strict
    rise, small at small r): "rises at every step" where every step's interval lies above
    0, "falls at r = x" for the first step whose interval lies below 0, "not resolved at
    r = x" otherwise, "not testable" for fewer than two ratios."""
    if len(points) < 2:
        return {"verdict": "not testable", "rises": False, "first_failure": None}
    for a, b in zip(points, points[1:]):
        common = sorted(set(a["seeds"]) & set(b["seeds"]))
        diff = [b["values"][b["seeds"].index(s)] - a["values"][a["seeds"].index(s)]
                for s in common]
        verdict, _, _ = paired_verdict(diff)
        if verdict != HIGHER:
            word = "falls" if verdict == LOWER else "not resolved"
            return {"verdict": f"{word} at r = {b['r']:g}", "rises": False,
                    "first_failure": b["r"]}
    return {"verdict": "rises at every step", "rises": True, "first_failure": None}


VERDICT_COLUMNS = ("T", "task", "uniform_share", "lowest_r", "highest_r", "rises_with_r",
                   "below_uniform_from_r", "runs_at_loss", "query_token_at_max_r",
                   "other_queries_at_max_r")


def below_uniform_from(points: list[dict], uniform: float) -> float | None:
    """The smallest ratio from which on the whole 95% interval of every point lies below
    ``uniform`` (None: no such ratio)."""
    below = None
    for x in reversed(points):
        if not x["mean"] + x["ci95"] < uniform:
            break
        below = x["r"]
    return below


def verdict_rows(p: Parameters, runs) -> list[dict]:
    """lines.csv: per line of the causal test and the lengths: does attention on the distinct tokens
    rise with r (:func:`rises`), the attention at the smallest and the largest ratio, and
    the ratio from which on it lies below the share uniform attention would give the
    distinct tokens (:func:`below_uniform_from`; "-": it never does)."""
    rows = []
    for s in settings(p):
        if s.experiment not in ("causal", "lengths"):
            continue
        points = line(runs, s)
        uniform = tasks.uniform_distinct_share(s.cut, s.T)
        below = below_uniform_from(points, uniform)
        verdict = rises(points)
        rows.append({"T": s.T, "task": CUT_NAMES[s.cut], "cut": s.cut, "uniform_share": uniform,
                     "lowest_r": interval_text(points[0]["mean"], points[0]["ci95"], 3),
                     "highest_r": interval_text(points[-1]["mean"], points[-1]["ci95"], 3),
                     "rises_with_r": verdict["verdict"],
                     "below_uniform_from_r": "-" if below is None else f"{below:g}",
                     "below_uniform_r": below, "rises": verdict["rises"],
                     "highest_mean": points[-1]["mean"],
                     "runs_reaching_loss": sum(x["reached"] for x in points),
                     "runs": sum(x["runs"] for x in points),
                     "runs_at_loss": f"{sum(x['reached'] for x in points)}/"
                                     f"{sum(x['runs'] for x in points)}",
                     "query_token_at_max_r": points[-1]["query_token"],
                     "other_queries_at_max_r": points[-1]["other_queries"]})
    return sorted(rows, key=lambda row: (tasks.CUTS.index(row["cut"]), row["T"]))


def sensitivity_lines(p: Parameters) -> list[tuple[str, float, Setting]]:
    """(factor, value, setting) of every sensitivity line in order of value; each factor's
    default value is the causal test's own line."""
    out = []
    default = _setting(p, "causal", p.lengths[0], SENSITIVITY_CUT)
    for factor, values in (("lr_ov", p.sensitivity_lr_ov),
                           ("init_scale", p.sensitivity_init_scales),
                           ("batch_size", p.sensitivity_batch_sizes)):
        base = getattr(default, factor)
        lines = [(factor, base, default)]
        lines += [(factor, v, _setting(p, factor, p.lengths[0], SENSITIVITY_CUT, **{factor: v}))
                  for v in values if v != base]
        out += sorted(lines, key=lambda x: x[1])
    return out


def _sensitivity_points(p: Parameters, runs, setting: Setting) -> list[dict]:
    return [x for x in line(runs, setting) if x["r"] in p.sensitivity_ratios]


SENSITIVITY_COLUMNS = ("factor", "value", "r", "distinct_mean", "distinct_ci95", "target",
                       "loss", "runs_reaching_loss", "epochs_mean", "rises")


def sensitivity_rows(p: Parameters, runs) -> list[dict]:
    """sensitivity.csv: per factor, value and sensitivity ratio, the attention on the
    distinct tokens at the matched loss (mean, 95% interval) and on the target token, the
    mean held-out loss, runs reaching the loss and their mean epochs, and whether the line
    rises with r (:func:`rises`)."""
    rows = []
    for factor, value, s in sensitivity_lines(p):
        points = _sensitivity_points(p, runs, s)
        verdict = rises(points)
        rows += [{"factor": factor, "value": value, "r": x["r"], "distinct_mean": x["mean"],
                  "distinct_ci95": x["ci95"], "target": x["target"], "loss": x["loss"],
                  "runs_reaching_loss": x["reached"], "epochs_mean": x["epochs"],
                  "rises": verdict["rises"]} for x in points]
    return rows


def sensitivity_table(p: Parameters, runs) -> list[dict]:
    """The printed sensitivity table: per factor and value, the attention on the distinct
    tokens at each sensitivity ratio (mean ± 95% interval), whether it rises with r, the
    attention on the target token at the largest ratio, and how many runs reached the
    matched loss."""
    rows = []
    for factor, value, s in sensitivity_lines(p):
        points = _sensitivity_points(p, runs, s)
        rows.append({"factor": factor, "value": f"{value:g}",
                     **{f"r={x['r']:g}": interval_text(x["mean"], x["ci95"], 3)
                        for x in points},
                     "rises_with_r": rises(points)["verdict"],
                     "on_target_at_max_r": f"{points[-1]['target']:.3f}",
                     "runs_reaching": f"{sum(x['reached'] for x in points)}/"
                                      f"{sum(x['runs'] for x in points)}"})
    return rows


# --- the figure ---------------------------------------------------------------------------

TASK_STYLE = {"none": ("s", "#d95f02", "the paper's task"),
              "self": ("o", "#1b9e77", "own position masked"),
              "context": ("^", "#7570b3", "query token also out of context")}


def _points(ax, points, offset, marker, color, label):
    """Per-seed dots and the mean with its 95% interval along one line."""
    r = np.array([x["r"] for x in points]) * offset
    for x, values in zip(r, (pt["values"] for pt in points)):
        ax.plot([x] * len(values), values, ".", color=color, ms=3, alpha=0.5)
    ax.errorbar(r, [x["mean"] for x in points], yerr=[x["ci95"] for x in points],
                fmt=f"{marker}-", ms=5, capsize=2, color=color, label=label)


def plot(p: Parameters, runs):
    """(a), (b): per causal-test length, the attention on the distinct tokens at the
    matched loss against r in the paper's task and with each cut of the shortcut (dots:
    seeds; markers: mean and 95% interval; dotted: uniform attention's share); (c) the
    paper's task at every length."""
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 7.4))
        grid = fig.add_gridspec(2, 2)
        top = [fig.add_subplot(grid[0, k]) for k in range(len(p.lengths[:2]))]
        for k, (ax, T) in enumerate(zip(top, p.lengths)):
            for j, cut in enumerate(tasks.CUTS):
                marker, color, label = TASK_STYLE[cut]
                points = line(runs, _setting(p, "causal", T, cut))
                _points(ax, points, 1.07 ** (j - 1), marker, color, label)
                if cut != "self":  # "self": the same share as "none" up to (T - 2) / (T - 1)
                    ax.axhline(tasks.uniform_distinct_share(cut, T), color=color, lw=0.8,
                               ls=":")
            ax.set_title(f"({'ab'[k]}) T = {T}")
            if k == 0:
                ax.set_ylabel("attention on distinct tokens")
                ax.legend(loc="upper left")
        bottom = fig.add_subplot(grid[1, :])
        lines = sorted((s for s in settings(p) if s.cut == "none"
                        and s.experiment in ("causal", "lengths")), key=lambda s: s.T)
        for s, color in zip(lines, sequential_colors([s.T for s in lines])):
            points = [x for x in line(runs, s) if x["r"] in p.shortcut_ratios]
            bottom.errorbar([x["r"] for x in points], [x["mean"] for x in points],
                            yerr=[x["ci95"] for x in points], fmt="o-", ms=4, capsize=2,
                            color=color, label=f"T = {s.T}")
        bottom.axhline(tasks.uniform_distinct_share("none", p.lengths[0]), color="k", lw=0.8,
                       ls=":", label=f"uniform attention (T = {p.lengths[0]})")
        bottom.set_title("(c) the paper's task, at more sequence lengths")
        bottom.set_ylabel("attention on distinct tokens")
        bottom.legend(loc="lower left", ncols=3)
        for ax in [*top, bottom]:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # few ratios: labels would collide
            ax.set_ylim(0, 1.02)
        fig.supxlabel(rf"$r = \eta_{{QK}} / \eta_{{OV}}$ (attention at loss {p.matched_loss:g})",
                      fontsize=HOUSE_STYLE["axes.labelsize"])
    return fig


SENSITIVITY_COLORS = ("#1b9e77", "#7570b3", "#e7298a", "#66a61e")
FACTOR_TITLES = {"lr_ov": "(a) OV learning rate", "init_scale": "(b) initial scale (x I)",
                 "batch_size": "(c) batch size"}


def plot_sensitivity(p: Parameters, runs):
    """Per factor, one line per value: attention on the distinct tokens at the matched loss
    against the sensitivity ratios, on the task with the query's own position masked (mean,
    95% interval)."""
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 3.6))
        axes = fig.subplots(1, 3, sharey=True)
        for ax, factor in zip(axes, FACTOR_TITLES):
            mine = [(value, s) for f, value, s in sensitivity_lines(p) if f == factor]
            for k, (value, s) in enumerate(mine):
                points = _sensitivity_points(p, runs, s)
                ax.errorbar([x["r"] * 1.08 ** (k - (len(mine) - 1) / 2) for x in points],
                            [x["mean"] for x in points], yerr=[x["ci95"] for x in points],
                            fmt="o-", ms=4, capsize=2, color=SENSITIVITY_COLORS[k],
                            label=f"{value:g}")
            ax.set_xscale("log")
            ax.set_xticks(p.sensitivity_ratios, [f"{r:g}" for r in p.sensitivity_ratios])
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_ylim(0, 1.02)
            ax.set_title(FACTOR_TITLES[factor])
            ax.legend(loc="lower right")
        axes[0].set_ylabel("attention on distinct tokens")
        fig.supxlabel(r"$r = \eta_{QK} / \eta_{OV}$ (the query's own position masked)",
                      fontsize=HOUSE_STYLE["axes.labelsize"])
    return fig
