"""theory-ratio-sweep: attention at a matched loss against the learning-rate ratio r, three
ways - the closed form, the stylized model's full-matrix descent, and CACO trained on the
synthetic task (five seeds) - plus the task sweep over sequence length, initialisation and
OV rate at a few ratios.

:class:`Parameters` are the notebook's; :func:`configs` and :func:`variant_configs` the
training runs; :func:`stylized_descents` the descents; :func:`rows` and
:func:`variant_rows` turn finished runs into the tables (they train nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import (
    ParameterError,
    boolean,
    integer,
    number,
    number_list,
    seed_list,
)
from ..cost import Work
from ..params import derived, parameter
from ..plotting import COLUMN_WIDTH_IN, house_style, new_figure
from ..spec import FigureSpec
from ..stats import seed_interval
from ..synthetic import metrics, models, tasks, train
from ..theory import reduced as theory
from ..theory.stylized import (
    Descent,
    StylizedModel,
    check_descent_loss,
    check_descent_steps,
    descents,
)
from ._setting import SettingParameters

SPEC = FigureSpec(id="theory-ratio-sweep", reproduces=None, page="book/theory",
                  tables=("conditions.csv",), threads=2, resources={"mem_mb": 4000, "runtime": 60},
                  alt=("Attention mass at a matched loss against the learning-rate ratio r (log scale): "
                       "the closed form of the stylized setting as a line, the stylized model's descents as "
                       "circles and the trained task's attention on two measures with error bars; below, "
                       "the task's attention per training condition on each measure."),
    rates={"model-steps": 600_000, "descent steps": 3_000})

INITS = ("identity", "default")  # CACO from 1e-6 I (the theory's symmetric point) or nn.Linear's


@dataclass(frozen=True)
class SweepCondition:
    """One setting of the task sweep: sequence length, initialisation and OV rate."""

    T: int
    init: str
    lr_ov: float

    @property
    def label(self) -> str:
        init = "1e-6 I" if self.init == "identity" else "default init"
        return f"T = {self.T}, {init}, lr_ov = {self.lr_ov:g}"


# The main sweep's sequence length, and the unit of the work's weighting by length: a
# training step's data (CHUNK x 32 sequences of T - 2 tokens, drawn per stream) cost in
# proportion to T and, past T ~ 128, more than the step itself (measured: 35 us per
# model-step at T = 64 and 128, 85 at 512, 890 at 4096, three runs per data stream); a
# model-step at T counts as max(1, T / 64) of them, an upper bound for the sweeps here.
TASK_T = 64
# The longest sequence: a stream draws 50 batches of 32 sequences at once, as int64 token
# ids, ~25 kB per unit of T in flight (measured: 210 MB at 8192, per training process and
# held-out set; at T = 100,000 it would be 2.5 GB each).
MAX_T = 8192


def _length(name, value):
    return tasks.check_length(integer(name, value, 3, maximum=MAX_T))


def _ratios(name, value) -> list[float]:
    return number_list(name, value, above=0, at_most=theory.MAX_RATIO, distinct=True)


def _variants(name: str, value) -> list[SweepCondition]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ParameterError(name, f'expected a non-empty list of [T, init, lr_ov] triples '
                               f'(the conditions table needs one), got {value!r}; with '
                               f'papermill: -y "{name}: [[128, identity, 0.1]]"')
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise ParameterError(name, f"item {i}: expected [T, init, lr_ov], got {item!r}")
        T, init, lr_ov = item
        if init not in INITS:
            raise ParameterError(name, f"item {i}: init must be one of {INITS}, got {init!r}")
        try:
            T = _length("T", T)
            lr_ov = number("lr_ov", lr_ov, above=0)
        except ParameterError as err:  # name the list and the item, not just the field
            raise ParameterError(name, f"item {i}: {err}") from None
        condition = SweepCondition(T, init, lr_ov)
        if condition in out:
            raise ParameterError(name, f"item {i}: {list(item)!r} is listed twice")
        out.append(condition)
    return out


@dataclass(frozen=True)
class Parameters(SettingParameters):
    """The notebook's parameters."""

    ratios: list = parameter(
        [0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100], _ratios,
        doc="ratios r of eta_QK to eta_OV; distinct, in (0, 1e6]")
    matched_loss: float = parameter(
        0.05, number, above=0,
        doc="attention is compared where the loss first reaches this; in [1e-10, log M)")
    step_fraction: float = parameter(
        0.001, number, above=0, below=0.1,
        doc=("stylized descent: step size over flow time; in (0, 0.1), each descent at most "
             "200,000 steps"))
    seeds: list = parameter(
        [1234, 1235, 1236, 1237, 1238], seed_list,
        doc="task: one CACO run per ratio and seed")
    lr_ov: float = parameter(
        0.1, number, above=0,
        doc="task: OV learning rate (QK: r * lr_ov), positive")
    T: int = parameter(TASK_T, _length, doc="task: sequence length, 3 to 8192")
    batches_per_epoch: int = parameter(
        50, integer, minimum=1,
        doc="task: batches of 32 per epoch (early stop looks at epoch means)")
    max_epochs: int = parameter(
        3000, integer, minimum=1,
        doc="task: give up after this many epochs, at least 1")
    eval_batches: int = parameter(
        100, integer, minimum=1,
        doc="task: held-out batches of 32 per run for the attention mass")
    variant_ratios: list = parameter(
        [1, 10, 100], _ratios,
        doc="task: ratios of the sweep over conditions below; distinct, in (0, 1e6]")
    variants: list = parameter(
        [[128, "identity", 0.1], [64, "default", 0.1],
                                [128, "default", 0.1], [64, "identity", 0.01]],
        _variants,
        doc=("task: [T, init, lr_ov] per extra condition, at least one; init \"identity\" (1e-6 I)"
             " or \"default\""))
    workers: int = parameter(
        2, integer, minimum=1,
        doc="training processes (results do not depend on it)")
    progress: bool = parameter(True, boolean, doc="show a progress bar while training")
    model: StylizedModel = derived()
    descent_steps: list = derived()  # per ratio: the steps of its stylized descent

    def check(self):
        model = StylizedModel(self.setting)
        check_descent_loss("matched_loss", self.matched_loss, model.setting)
        object.__setattr__(self, "model", model)
        # Each descent's steps, counted from the flow before any is taken: one that could
        # not reach matched_loss in the descent's step limit fails here.
        object.__setattr__(self, "descent_steps", check_descent_steps(
            "step_fraction", model.setting, 1.0, self.ratios, self.matched_loss,
            self.step_fraction))

    def work(self) -> tuple[Work, Work]:
        """The task's optimizer steps, all runs to max_epochs (an upper bound: they stop at
        the matched loss), each weighted by max(1, T / TASK_T), and the stylized descents'
        steps, each weighted by the model's size past the default's
        (StylizedModel.step_weight)."""
        task = sum(c.steps * max(1.0, c.T / TASK_T)
                   for c in configs(self) + variant_configs(self))
        descent = self.model.step_weight * sum(self.descent_steps)
        return (Work(task, "model-steps", f"x T/{TASK_T} past T = {TASK_T}"),
                Work(descent, "descent steps", "x M^2 (m + n) / 22,000 above the default size"))


COLUMNS = ("r", "alpha_closed_form", "alpha_stylized", "task_informative_mean",
                 "task_informative_ci95", "task_distinct_mean", "task_distinct_ci95",
                 "task_loss_mean", "task_runs_reaching_loss")


def main_condition(p: Parameters) -> SweepCondition:
    return SweepCondition(p.T, "identity", p.lr_ov)


def configs(p: Parameters, condition: SweepCondition | None = None,
                  ratios=None) -> list[train.RunConfig]:
    """CACO with QK rate r * lr_ov, stopped at the matched loss; by default the main sweep
    (from a small, 1e-6 I, start). A condition with a smaller OV rate gets proportionally
    more epochs, so that it can reach the same loss."""
    condition = condition or main_condition(p)
    model = models.ModelConfig("CACO", qk_init=condition.init, ov_init=condition.init)
    epochs = round(p.max_epochs * max(1.0, p.lr_ov / condition.lr_ov))
    return [train.RunConfig(f"{condition.label}/r{r:g}/seed{seed}", model, seed, epochs,
                            p.batches_per_epoch, lr_qk=r * condition.lr_ov,
                            lr_ov=condition.lr_ov, T=condition.T,
                            early_stop_loss=p.matched_loss)
            for r in (p.ratios if ratios is None else ratios) for seed in p.seeds]


def variant_configs(p: Parameters) -> list[train.RunConfig]:
    """The robustness sweep: every variant condition at every variant ratio."""
    return [c for v in p.variants for c in configs(p, v, p.variant_ratios)]


def closed_form_curve(setting: theory.Setting, loss: float, r_min: float, r_max: float,
                      points: int = 200) -> dict[str, np.ndarray]:
    """alpha at ``loss`` from the closed form, on a log grid of r."""
    r = np.geomspace(r_min, r_max, points)
    return {"r": r, "alpha": np.array([theory.state_at_loss(loss, setting, x)[2] for x in r])}


def _task_measures(runs: list[train.RunResult], eval_batches: int):
    """Per run: held-out attention on distinct and on class-identifying tokens, the held-out
    loss and the epochs trained (:func:`qkov.synthetic.metrics.measure_run`)."""
    measured = [metrics.measure_run(x, eval_batches) for x in runs]
    return ([m.distinct for m in measured], [m.class_identifying for m in measured],
            [m.loss for m in measured], [m.epochs for m in measured])


VARIANT_COLUMNS = ("condition", "r", "distinct", "distinct_ci95", "informative",
                   "informative_ci95", "loss", "runs_reaching_loss", "epochs_mean")


def variant_rows(p: Parameters, main: list[train.RunResult],
                 variants: list[train.RunResult]) -> list[dict]:
    """Per condition (the main sweep first, at the variant ratios it ran) and ratio: mean
    attention on distinct and on class-identifying tokens +- the 95% interval over seeds."""
    rows = []
    for condition in [main_condition(p), *p.variants]:
        pool = main if condition == main_condition(p) else variants
        for r in p.variant_ratios:
            mine = [x for x in pool if x.config.name.startswith(f"{condition.label}/r{r:g}/")]
            if not mine:
                continue  # a variant ratio that the main sweep did not run
            distinct, informative, losses, epochs = _task_measures(mine, p.eval_batches)
            d, d_ci = seed_interval(distinct)
            i, i_ci = seed_interval(informative)
            rows.append({"condition": condition.label, "T": condition.T, "init": condition.init,
                         "lr_ov": condition.lr_ov, "r": r, "distinct": d, "distinct_ci95": d_ci,
                         "informative": i, "informative_ci95": i_ci,
                         "loss": float(np.mean(losses)),
                         "runs_reaching_loss": sum(x.early_stopped for x in mine),
                         "epochs_mean": float(np.mean(epochs))})
    return rows


def variant_seed_values(p: Parameters, main: list[train.RunResult],
                        variants: list[train.RunResult]) -> dict[tuple[str, float], dict]:
    """Per (condition label, ratio) of :func:`variant_rows`: each seed's attention on
    distinct and on class-identifying tokens, which the figure draws as points where the
    seeds disagree."""
    values = {}
    for condition in [main_condition(p), *p.variants]:
        pool = main if condition == main_condition(p) else variants
        for r in p.variant_ratios:
            mine = [x for x in pool if x.config.name.startswith(f"{condition.label}/r{r:g}/")]
            if mine:
                distinct, informative, _, _ = _task_measures(mine, p.eval_batches)
                values[condition.label, r] = {"distinct": distinct, "informative": informative}
    return values


def stylized_descents(p: Parameters) -> list[Descent]:
    """The stylized model's full-matrix descent (CACO) at every ratio, to the matched loss."""
    return descents([dict(model=p.model, parameterization="CACO", eta_ov=1.0, eta_qk=r,
                          target_loss=p.matched_loss, step_fraction=p.step_fraction)
                     for r in p.ratios], p.workers)


def rows(p: Parameters, results: list[train.RunResult], stylized_runs: list[Descent]
         ) -> list[dict]:
    """Per ratio: the closed form, the stylized model and training (mean over seeds, std and
    the half-width of the 95% t interval)."""
    model, rows = p.model, []
    for r, run in zip(p.ratios, stylized_runs):
        _, _, alpha_closed = theory.state_at_loss(p.matched_loss, model.setting, r)
        stylized = run.at_loss(p.matched_loss)
        mine = [x for x in results if x.config.lr_qk == r * p.lr_ov]
        distinct, informative, losses, epochs = _task_measures(mine, p.eval_batches)
        rows.append({
            "r": r, "matched_loss": p.matched_loss, "alpha_closed_form": float(alpha_closed),
            "alpha_stylized": stylized["alpha"],
            "alpha_stylized_rel_error": stylized["alpha"] / float(alpha_closed) - 1,
            "task_distinct_mean": float(np.mean(distinct)),
            "task_distinct_std": float(np.std(distinct)),
            "task_distinct_ci95": seed_interval(distinct)[1],
            "task_informative_mean": float(np.mean(informative)),
            "task_informative_std": float(np.std(informative)),
            "task_informative_ci95": seed_interval(informative)[1],
            "task_loss_mean": float(np.mean(losses)),
            "task_runs_reaching_loss": sum(x.early_stopped for x in mine),
            "task_runs": len(mine),
            "task_epochs_mean": float(np.mean(epochs)),
        })
    return rows


def distinct_turning_points(rows: list[dict], T: int) -> tuple[float, float | None]:
    """From the main sweep's rows (at sequence length ``T``): the ratio at which attention on
    distinct tokens peaks, and the smallest ratio above it at which that attention is below
    what uniform attention would put on them (None if it never falls that low)."""
    peak = max(rows, key=lambda row: row["task_distinct_mean"])["r"]
    below = [row["r"] for row in rows if row["r"] > peak
             and row["task_distinct_mean"] < tasks.uniform_distinct_share("none", T)]
    return peak, (min(below) if below else None)


# --- the figure ---------------------------------------------------------------------------


def plot(rows, closed_form_curve, T: int, variant_rows=(), seed_values=None):
    """theory-ratio-sweep: attention at a matched loss against r = eta_QK / eta_OV (error
    bars: 95% t intervals over seeds; dotted: uniform attention's share of the distinct
    tokens at sequence length ``T``); below, when given, the task's attention per condition
    (T, initialisation, OV rate) on both measures, with each seed's value as a dot
    (``seed_values``: :func:`variant_seed_values`)."""
    r = np.array([row["r"] for row in rows])
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 9.4 if variant_rows else 4.6))
        grid = fig.add_gridspec(2 if variant_rows else 1, 2, height_ratios=(
            (1.15, 1) if variant_rows else None))
        ax = fig.add_subplot(grid[0, :])
        ax.plot(closed_form_curve["r"], closed_form_curve["alpha"], color="k",
                label="reduced dynamics, closed form")
        ax.plot(r, [row["alpha_stylized"] for row in rows], "o", mfc="none", color="k", ms=7,
                label="stylized model, gradient descent")
        task = [("informative", "^-", "#1b9e77", "trained on the task: distinct + query tokens"),
                ("distinct", "s--", "#d95f02", "trained on the task: distinct tokens")]
        for key, fmt, color, label in task:
            ax.errorbar(r, [row[f"task_{key}_mean"] for row in rows],
                        yerr=[row[f"task_{key}_ci95"] for row in rows], fmt=fmt, capsize=3,
                        color=color, label=label)
        _uniform_line(ax, [T], "uniform attention on the distinct tokens")
        ax.set_xscale("log")
        ax.set_ylim(0, _top(rows, [f"task_{key}" for key, *_ in task], "_mean"))
        ax.set_xlabel(r"$r = \eta_{QK} / \eta_{OV}$")
        ax.set_ylabel("attention mass at the matched loss")
        ax.set_title(f"(a) attention at loss {rows[0]['matched_loss']:g} against the "
                     "learning-rate ratio")
        ax.legend(loc="upper left")
        if variant_rows:
            _condition_panels(fig, grid, variant_rows, seed_values or {})
    return fig


def _uniform_line(ax, lengths, label):
    """Dotted: uniform attention's share of the distinct tokens at each sequence length
    (lengths that differ by a few percent of it draw as one line)."""
    for k, T in enumerate(sorted(set(lengths))):
        ax.axhline(tasks.uniform_distinct_share("none", T), color="k", lw=0.8, ls=":",
                   label=label if k == 0 else None)


def _top(rows, keys, mean_suffix=""):
    """The y axis' top: 1.02, or above the highest error bar (an interval may pass 1)."""
    return max(1.02, *(1.02 * (row[key + mean_suffix] + row[f"{key}_ci95"])
                       for row in rows for key in keys))


def condition_words(row, main) -> str:
    """A condition of the task sweep (``row``'s T, init, lr_ov) in words, as it differs from
    the main sweep's (``main``)."""
    if (row["T"], row["init"], row["lr_ov"]) == (main["T"], main["init"], main["lr_ov"]):
        start = "small start" if main["init"] == "identity" else "default start"
        return f"main sweep (T = {main['T']}, {start})"
    words = []
    if row["T"] != main["T"]:
        words.append(f"{'longer' if row['T'] > main['T'] else 'shorter'} sequences "
                     f"(T = {row['T']})")
    if row["init"] != main["init"]:
        words.append("small start" if row["init"] == "identity" else "default start")
    if row["lr_ov"] != main["lr_ov"]:
        factor = max(row["lr_ov"], main["lr_ov"]) / min(row["lr_ov"], main["lr_ov"])
        words.append(f"OV rate {factor:g}x {'lower' if row['lr_ov'] < main['lr_ov'] else 'higher'}")
    return ", ".join(words)


def _condition_panels(fig, grid, rows, seed_values):
    conditions = list(dict.fromkeys(row["condition"] for row in rows))
    colors = dict(zip(conditions, ("#444444", "#1b9e77", "#d95f02", "#7570b3", "#e7298a",
                                   "#66a61e", "#a6761d")))
    words = {row["condition"]: condition_words(row, rows[0]) for row in rows}
    for col, (key, title) in enumerate((("distinct", "(b) on distinct tokens"),
                                        ("informative", "(c) on distinct + query tokens"))):
        ax = fig.add_subplot(grid[1, col])
        for k, condition in enumerate(conditions):
            picked = [row for row in rows if row["condition"] == condition]
            shift = 1.07 ** (k - (len(conditions) - 1) / 2)
            for row in picked:  # each seed, so that a split between seeds shows
                seeds = seed_values.get((condition, row["r"]), {}).get(key, [])
                ax.plot([row["r"] * shift] * len(seeds), seeds, ".", ms=3, alpha=0.6,
                        color=colors[condition])
            ax.errorbar([row["r"] * shift for row in picked],
                        [row[key] for row in picked],
                        yerr=[row[f"{key}_ci95"] for row in picked], fmt="o-", ms=4,
                        capsize=2, color=colors[condition], label=words[condition])
        if key == "distinct":  # uniform attention's share is known for the distinct tokens
            _uniform_line(ax, [row["T"] for row in rows],
                          "uniform attention on the distinct tokens")
        ax.set_xscale("log")
        ax.set_ylim(0, _top(rows, ["distinct", "informative"]))  # one scale for both
        ax.set_xlabel(r"$r = \eta_{QK} / \eta_{OV}$")
        ax.set_title(title)
        if col == 0:
            ax.set_ylabel("task attention (mean, 95% CI)")
            # below the panels: seven conditions would cover the points inside one; in two
            # columns unless a condition's words are too long to sit beside another's
            handles, labels = ax.get_legend_handles_labels()
            fig.legend(handles, labels, loc="outside lower center",
                       ncols=2 if max(map(len, labels)) <= 45 else 1)
