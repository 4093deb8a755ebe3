"""paper-fig2: paper Fig. 2 - attention against probability of the correct token for the four
parameterizations at equal learning rates (row 1) and with faster QK learning (row 2).

:class:`Parameters` are the notebook's parameters; :func:`runs` are every panel and seed (the
notebook trains them together, recording held-out loss and attention along the way);
:func:`summaries` evaluates the trained runs on held-out sequences; the table and row
functions turn those into what the notebook prints and the artifacts hold. The panels' runs
(:data:`PANELS`) follow the paper's table of runs (section 3 of the paper), which a test
checks against the book's run table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from matplotlib.ticker import NullFormatter

from ..checks import ParameterError, boolean, integer, number, seed_list
from ..cost import Work
from ..params import FigureParameters, parameter
from ..plotting import (
    COLUMN_WIDTH_IN,
    HEATMAP_CMAP,
    HOUSE_STYLE,
    PARAMETERIZATION_COLORS,
    heatmap_text_color,
    house_style,
    new_figure,
)
from ..seeding import init_generator
from ..spec import Drawing, FigureSpec
from ..stats import interval_text, seed_interval, seed_interval_text
from ..synthetic import authors, metrics, models, trajectories
from ..synthetic.models import ModelConfig
from ..synthetic.train import EARLY_STOP_RULES, RunConfig

SPEC = FigureSpec(
    id="paper-fig2", reproduces="paper Fig. 2", page="book/paper-fig2",
    alt=("Eight heatmaps, one per panel of paper Fig. 2 (four parameterizations at equal "
         "learning rates, then four runs with faster QK learning), of held-out sequences "
         "binned by attention on distinct tokens (x) and probability of the correct token "
         "(y), each cell the percentage of sequences averaged over seeds."),
    extra_drawings=(
        Drawing("std", "paper Fig. 2 (its spread over seeds)",
                alt="The eight heatmaps of paper Fig. 2 with each cell the standard deviation "
                    "over seeds of the percentage of held-out sequences, in percentage points."),
        Drawing("trajectories", None,  # the companion's comparison of its runs
                alt="Four line plots of attention against held-out loss during training (loss "
                    "decreasing to the right, log scale), one line per Fig. 2 panel with a band "
                    "of one standard deviation over seeds: on top attention on distinct tokens, "
                    "below on class-identifying tokens, for Fig. 2's first row (left) and "
                    "second row (right).")),
    tables=("heatmaps.csv", trajectories.FILE, "matched-loss.csv"),
    threads=2, resources={"mem_mb": 4000, "runtime": 60},
    rates={"model-steps": 70_000})

SEEDS = (1234, 1235, 1236, 1237, 1238)
EARLY_STOP_LOSS = 1e-3


@dataclass(frozen=True)
class Panel:
    """One panel of paper Fig. 2: a title and the run it trains (once per seed)."""

    title: str
    template: RunConfig  # named by the panel's key; seed and name are set per seed

    @property
    def key(self) -> str:
        return self.template.name

    def runs(self, seeds=SEEDS, epochs_scale: float = 1.0, early_stop_rule: str = "epoch"
             ) -> list[RunConfig]:
        epochs = max(1, round(self.template.epochs * epochs_scale))
        return [replace(self.template, name=f"{self.key}/seed{seed}", seed=seed, epochs=epochs,
                        early_stop_rule=early_stop_rule)
                for seed in seeds]


def _panel(key, title, model, epochs, batches_per_epoch, early_stop=False, **kw) -> Panel:
    early = EARLY_STOP_LOSS if early_stop else None
    return Panel(title, RunConfig(key, model, SEEDS[0], epochs, batches_per_epoch,
                                  early_stop_loss=early, **kw))


def _identity(p):
    return ModelConfig(p, qk_init="identity", ov_init="identity")


# Early stopping at a mean epoch loss of 1e-3 where the authors' notebooks stop: row 1 and
# FAFO with QK 20x; the other row-2 panels train for their full length, as there.
PANELS = (
    _panel("FAFO", "FAFO", ModelConfig("FAFO", qk_init="default", ov_init="identity"), 2500,
           250, early_stop=True),
    _panel("FACO", "FACO", _identity("FACO"), 2500, 250, early_stop=True),
    _panel("CAFO", "CAFO", _identity("CAFO"), 5000, 200, early_stop=True),
    _panel("CACO", "CACO", ModelConfig("CACO"), 2500, 200, early_stop=True),
    _panel("FAFO-qk20x", "FAFO, QK rate 20x", _identity("FAFO"), 1000, 100, lr_qk=0.2,
           early_stop=True),
    _panel("FAFO-ramp40x", "FAFO, QK rate 1x to 40x", _identity("FAFO"), 2000, 100,
           qk_ramp=(1.0, 40.0)),
    _panel("CACO-qk5x", "CACO, QK rate 5x, T = 128", ModelConfig("CACO"), 2000, 100,
           lr_qk=0.05, T=128),
    _panel("CACO-ramp10x", "CACO, QK rate 1x to 10x, T = 128", ModelConfig("CACO"), 2000, 100,
           qk_ramp=(1.0, 10.0), T=128),
)


def runs(seeds=SEEDS, epochs_scale: float = 1.0, early_stop_rule: str = "epoch"
         ) -> list[RunConfig]:
    """All eight panels x seeds (40 runs at paper scale)."""
    return [run for panel in PANELS for run in panel.runs(seeds, epochs_scale, early_stop_rule)]


def _early_stop_rule(name, value) -> str:
    if value not in EARLY_STOP_RULES:
        raise ParameterError(name, f"expected one of {list(EARLY_STOP_RULES)}, got {value!r}")
    return value



# Held-out batches of 32 sequences. A run's heatmap set is drawn and evaluated at once:
# at 10,000 batches (320,000 sequences) its counts take 64 MB and the evaluation a few times
# that. The trajectory set is measured after up to ~300 epochs of every run: at 1,000 batches
# that measuring costs about as much as the training it follows (the default, 16, ~2%).
MAX_EVAL_BATCHES = 10_000
MAX_TRAJECTORY_BATCHES = 1_000


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: paper scale)."""

    seeds: list = parameter(list(SEEDS), seed_list, doc="one run per panel and seed")
    epochs_scale: float = parameter(
        1.0, number, above=0, at_most=1,
        doc="fraction of each panel's paper-scale epochs, in (0, 1]; 1.0 is paper scale")
    eval_batches: int = parameter(
        200, integer, minimum=1, maximum=MAX_EVAL_BATCHES,
        doc="held-out batches of 32 sequences per run for the heatmaps; 1 to 10,000")
    trajectory_batches: int = parameter(
        16, integer, minimum=1, maximum=MAX_TRAJECTORY_BATCHES,
        doc="held-out batches of 32 per run for the loss-attention trajectories; 1 to 1,000")
    early_stop_rule: str = parameter(
        "epoch", _early_stop_rule,
        doc=("\"epoch\" (stop after an epoch whose mean loss is at most 1e-3) or \"authors\" (their "
             "running sum, reset every 100 epochs)"))
    workers: int = parameter(
        2, integer, minimum=1,
        doc="training processes (runs are independent; results do not depend on it)")
    progress: bool = parameter(True, boolean, doc="show a progress bar while training")

    def work(self) -> Work:
        """Optimizer steps of all runs (eight panels x seeds, each its epochs x batches per
        epoch): an upper bound, as row 1 and FAFO-qk20x stop early at loss 1e-3."""
        return Work(sum(run.steps for run in runs(self.seeds, self.epochs_scale)),
                    "model-steps")


TRAJECTORY_DENSE_EPOCHS, TRAJECTORY_EVERY = 100, 10


@dataclass
class PanelSummary:
    """One panel of Fig. 2 over its seeds: held-out heatmaps, losses, accuracies."""

    panel: Panel
    heatmaps: list[np.ndarray]  # per seed, (5, 5) percent; rows: probability, columns: attention
    final_losses: list[float]  # training loss of the last epoch, per seed
    eval_losses: list[float]  # held-out loss, per seed
    accuracies: list[float]  # held-out accuracy, per seed
    epochs_run: list[int]
    mean_attentions: list[float]  # mean held-out attention mass on distinct tokens, per seed
    separabilities: list[np.ndarray]  # per seed, per held-out sequence (metrics.separability)
    trajectories: list[np.ndarray]  # per seed: measured epochs x (epoch, *trajectories.MEASURES)
    drifts: list[dict[str, float]]  # per seed: relative drift of each factorized circuit's
    #                                 conserved quantity (see conservation_drift)
    seeds: list[int]

    @property
    def heatmap_mean(self) -> np.ndarray:
        return metrics.heatmap_mean_std(self.heatmaps)[0]

    @property
    def heatmap_std(self) -> np.ndarray:
        return metrics.heatmap_mean_std(self.heatmaps)[1]

    def attention_marginal(self) -> tuple[np.ndarray, np.ndarray]:
        """% of sequences per attention bin (summed over probability): mean and std over seeds."""
        return metrics.heatmap_mean_std([h.sum(0) for h in self.heatmaps])


def conservation_drift(result) -> dict[str, float]:
    """How far training moved each factorized circuit's conserved quantity.

    Gradient flow on ``W = A B`` keeps ``A^T A - B B^T`` fixed (the theory chapter); SGD
    with a finite step moves it by O(lr^2) per step. Per factorized circuit (QK: A = W_Q^T,
    B = W_K; OV: A = W_O, B = W_V): ||C_end - C_start||_F / (||A^T A||_F + ||B B^T||_F) at
    the end of training - 0 for exact flow, small where the flow picture holds.
    """
    model = result.config.model
    start = models.init_parameters(model, init_generator(result.config.seed))
    drifts = {}
    for circuit, a_name, b_name, transpose in (("qk", "W_Q", "W_K", True),
                                               ("ov", "W_O", "W_V", False)):
        if a_name not in result.params:
            continue

        def gram(p):  # called at once, in this iteration (hence noqa: B023)
            a = p[a_name].double().T if transpose else p[a_name].double()  # noqa: B023
            b = p[b_name].double()  # noqa: B023
            return a.T @ a, b @ b.T

        (aa0, bb0), (aa, bb) = gram(start), gram(result.params)
        change = torch.linalg.norm((aa - bb) - (aa0 - bb0))
        drifts[circuit] = float(change / (torch.linalg.norm(aa) + torch.linalg.norm(bb)))
    return drifts


def summaries(results, eval_batches: int) -> list[PanelSummary]:
    """Evaluate every trained run on held-out sequences and summarise each panel over seeds."""
    summaries = []
    for panel in PANELS:
        mine = [r for r in results if r.config.name.split("/")[0] == panel.key]
        evaluations = [
            metrics.evaluate(r.params, r.config.model,
                             metrics.held_out_batches(r.config.seed, r.config.T, eval_batches))
            for r in mine
        ]
        summaries.append(PanelSummary(
            panel, [e.heatmap() for e in evaluations], [r.final_loss for r in mine],
            [e.loss for e in evaluations], [e.accuracy for e in evaluations],
            [r.epochs_run for r in mine], [float(e.attention.mean()) for e in evaluations],
            [e.separability for e in evaluations],
            [np.array([v for v in r.epoch_callback_values if v is not None]) for r in mine],
            [conservation_drift(r) for r in mine], [r.config.seed for r in mine]))
    return summaries


TABLE_COLUMNS = ("panel", "epochs", "train_loss", "test_loss", "accuracy", "mean_attn",
                      "pct_attn>=0.8", "pct_both>=0.8")


def table(summaries: list[PanelSummary]) -> list[dict]:
    """The notebook's table: per panel, mean over seeds ± the half-width of its 95% t
    interval (qkov.stats.seed_interval) of each column."""
    return [
        {"panel": s.panel.key, "epochs": seed_interval_text(s.epochs_run),
         "train_loss": seed_interval_text(s.final_losses),
         "test_loss": seed_interval_text(s.eval_losses),
         "accuracy": seed_interval_text(s.accuracies),
         "mean_attn": seed_interval_text(s.mean_attentions),
         "pct_attn>=0.8": seed_interval_text([h[:, 4].sum() for h in s.heatmaps]),
         "pct_both>=0.8": seed_interval_text([h[4, 4] for h in s.heatmaps])}
        for s in summaries
    ]


DIAGNOSTIC_COLUMNS = ("panel", "pct_separable", "separability", "drift_qk", "drift_ov")


# Below this, a drift is float32 rounding accumulated over the run, not the step size: its
# digits differ between machines (FAFO-ramp40x's QK drift: 3.9e-06 on one, 3.1e-06 on
# another), so it is printed to one significant digit, which nbval's tolerance compares.
DRIFT_FLOOR = 1e-5
# Attention weights near 1/T differ in float32 by ~1e-9 from rounding alone: a separability
# (a difference of two weights) below this in size is not resolved. Runs still near their
# initial uniform attention (FACO from 1e-6 I, early in training) sit there, and their sign
# flips with the CPU (tests/test_perturbation.py).
SEPARABILITY_FLOOR = 1e-6


def diagnostics(summaries: list[PanelSummary]) -> list[dict]:
    """Per panel: the % of held-out sequences whose separability exceeds SEPARABILITY_FLOOR
    and the separability's mean (mean over seeds ± 95% interval; "< 1e-06" where every
    seed's mean is smaller in size), and the largest relative drift over seeds of each
    factorized circuit's conserved quantity ("-" for a collapsed circuit)."""
    def drift(s, circuit):
        values = [d[circuit] for d in s.drifts if circuit in d]
        if not values:
            return "-"
        return f"{max(values):.1g}" if max(values) < DRIFT_FLOOR else f"{max(values):.2g}"

    def separability(s):
        means = [np.nanmean(x) for x in s.separabilities]
        if all(abs(m) < SEPARABILITY_FLOOR for m in means):
            return f"< {SEPARABILITY_FLOOR:g}"
        return seed_interval_text(means)

    return [
        {"panel": s.panel.key,
         "pct_separable": seed_interval_text([100 * np.mean(x > SEPARABILITY_FLOOR)
                                               for x in s.separabilities]),
         "separability": separability(s),
         "drift_qk": drift(s, "qk"), "drift_ov": drift(s, "ov")}
        for s in summaries
    ]


TRAJECTORY_MEASURES = ("attention_distinct", "attention_class")


def trajectory_rows(summaries: list[PanelSummary]):
    """trajectories.csv (qkov.synthetic.trajectories): every run's held-out loss and
    attention after every epoch."""
    return trajectories.table(trajectories.Trajectory(s.panel.key, seed, points)
                              for s in summaries for seed, points in zip(s.seeds, s.trajectories))


MATCHED_LOSS_LEVELS = np.geomspace(3.0, 3e-5, 51)  # ten per decade, from near log 50 down
MATCHED_LOSS_TABLE_LEVELS = (1.0, 0.1, 0.02, 0.01, 0.001)


def matched_loss_rows(summaries: list[PanelSummary], levels) -> list[dict]:
    """Attention on distinct tokens per panel at the loss ``levels``, mean over seeds ± the
    half-width of its 95% t interval; "-" where some seed never reached that loss."""
    rows = []
    for s in summaries:
        row = {"panel": s.panel.key}
        for level in levels:
            values = metrics.attention_at_loss_per_seed(s.trajectories, level)
            row[f"L={level:g}"] = "-" if values is None else interval_text(
                *seed_interval(values), 3)
        rows.append(row)
    return rows


AUTHORS_COLUMNS = ("panel", "source", "seeds", "epochs",
                   *(f"attn_{lo:.1f}-{lo + 0.2:.1f}" for lo in metrics.HEATMAP_BINS[:-1]))


def authors_table(summaries: list[PanelSummary]) -> list[dict]:
    """The authors' saved Fig. 2 heatmaps beside the companion's (qkov.synthetic.authors): per
    panel they saved, the top row of cells (probability of the correct token 0.8-1.0, % of
    held-out sequences per attention bin), theirs, the companion's mean over seeds ± 95%
    interval, and the companion's seed 1234 alone where the authors ran only that seed."""
    by_key = {s.panel.key: s for s in summaries}
    rows = []
    for theirs in authors.HEATMAPS:
        s = by_key.get(theirs.panel)
        if s is None:
            continue
        cells = AUTHORS_COLUMNS[4:]
        rows.append({"panel": theirs.panel, "source": "authors", "seeds": len(theirs.seeds),
                     "epochs": str(theirs.epochs),
                     **{c: f"{v:.1f}" for c, v in zip(cells, theirs.top_row)}})
        rows.append({"panel": theirs.panel, "source": "companion", "seeds": len(s.seeds),
                     "epochs": seed_interval_text(s.epochs_run),
                     **{c: interval_text(*seed_interval([h[-1, j] for h in s.heatmaps]), 3)
                        for j, c in enumerate(cells)}})
        if len(theirs.seeds) == 1 and theirs.seeds[0] in s.seeds:
            k = s.seeds.index(theirs.seeds[0])
            rows.append({"panel": theirs.panel, "source": f"companion, seed {s.seeds[k]}",
                         "seeds": 1, "epochs": str(s.epochs_run[k]),
                         **{c: f"{s.heatmaps[k][-1, j]:.1f}" for j, c in enumerate(cells)}})
    return rows


def authors_gaps(summaries: list[PanelSummary]) -> dict[str, float]:
    """Per panel the authors saved: the largest difference, in percentage points, between a
    top-row cell of their heatmap and the companion's mean over seeds."""
    by_key = {s.panel.key: s for s in summaries}
    return {theirs.panel: max(abs(np.mean([h[-1, j] for h in by_key[theirs.panel].heatmaps]) - v)
                              for j, v in enumerate(theirs.top_row))
            for theirs in authors.HEATMAPS if theirs.panel in by_key}


def authors_separability(summaries: list[PanelSummary]) -> list[dict]:
    """The authors' separability (one seed, 1234; qkov.synthetic.authors) beside the
    companion's mean over seeds ± 95% interval and its seed 1234."""
    by_key = {s.panel.key: s for s in summaries}
    rows = []
    for panel, theirs in authors.SEPARABILITY.items():
        s = by_key[panel]
        means = [float(np.nanmean(x)) for x in s.separabilities]
        mine = s.seeds.index(1234) if 1234 in s.seeds else None
        unresolved = f"< {SEPARABILITY_FLOOR:g}"  # rounding's sign, as in diagnostics()
        rows.append({"panel": panel, "authors_seed_1234": f"{theirs:.4f}",
                     "companion_mean": unresolved if all(abs(m) < SEPARABILITY_FLOOR
                                                         for m in means)
                     else interval_text(*seed_interval(means), 3),
                     "companion_seed_1234": "-" if mine is None else unresolved
                     if abs(means[mine]) < SEPARABILITY_FLOOR else f"{means[mine]:.4f}"})
    return rows


CONSERVED_EPOCHS = (0, 10, 100, 1000)
CONSERVED_COLUMNS = ("panel", "circuit", *(f"epoch_{e}" for e in CONSERVED_EPOCHS), "last")
SEPARABILITY_COLUMNS = ("panel", "authors_seed_1234", "companion_mean", "companion_seed_1234")


CONSERVED_FLOOR = 1e-9  # a balanced pair of 1e-6 I factors: float32 rounding of 1e-12 terms


def _conserved_text(value: float) -> str:
    """Below CONSERVED_FLOOR rounding, shown as such (the stored values sit far from it:
    1e-20 to 1e-10, or 2e-6 and above); below DRIFT_FLOOR float32 rounding accumulated over
    the run (one digit, as the drift); above it two digits, as the drift: the third is
    float32 rounding's too (FAFO's OV at the last epoch: 0.00162 on an AMD EPYC, 0.00161 on
    an Intel Xeon), and the book shows what the machine that built it printed."""
    if abs(value) < CONSERVED_FLOOR:
        return f"< {CONSERVED_FLOOR:g}" if value else "0"
    # "#": two digits even where the second is 0 (0.998 as 1.0, not as 1, which reads as exact)
    return f"{value:.1g}" if abs(value) < DRIFT_FLOOR else f"{value:#.2g}"


def conserved_table(summaries: list[PanelSummary]) -> list[dict]:
    """The authors' measure of the conserved quantity per epoch (qkov.synthetic.models
    .factor_measures: ||A^T A - B B^T||_F over the larger norm of its terms) for every
    factorized circuit: mean over seeds at a few epochs and at each run's last measured one.
    Gradient flow keeps the quantity A^T A - B B^T; this ratio shows how large it is next to
    the factors."""
    column = {"qk": 1 + trajectories.MEASURES.index("conserved_qk"),
              "ov": 1 + trajectories.MEASURES.index("conserved_ov")}
    rows = []
    for s in summaries:
        for circuit in ("qk", "ov"):
            points = s.trajectories
            if np.isnan(points[0][0, column[circuit]]):
                continue  # a collapsed circuit
            row = {"panel": s.panel.key, "circuit": circuit.upper()}  # columns: CONSERVED_COLUMNS
            for epoch in CONSERVED_EPOCHS:
                at = [t[t[:, 0] == epoch, column[circuit]] for t in points]
                row[f"epoch_{epoch}"] = ("-" if any(len(a) == 0 for a in at)
                                         else _conserved_text(np.mean([a[0] for a in at])))
            row["last"] = _conserved_text(np.mean([t[-1, column[circuit]] for t in points]))
            rows.append(row)
    return rows


MATCHED_LOSS_COLUMNS = ("panel", "loss", *(f"{name}_{stat}" for stat in ("mean", "std", "ci95")
                                            for name in TRAJECTORY_MEASURES))


def matched_loss_curves(summaries: list[PanelSummary], levels) -> list[dict]:
    """Per panel and loss level: mean, std and 95% t half-width over seeds of the attention
    when the held-out
    loss first reached that level (only levels every seed reached)."""
    rows = []
    for s in summaries:
        for level in levels:
            values = [metrics.attention_at_loss(t, level) for t in s.trajectories]
            if any(v is None for v in values):
                continue
            values = np.array(values)
            rows.append({"panel": s.panel.key, "loss": float(level),
                         **{f"{name}_mean": float(values[:, j].mean())
                            for j, name in enumerate(TRAJECTORY_MEASURES)},
                         **{f"{name}_std": float(values[:, j].std())
                            for j, name in enumerate(TRAJECTORY_MEASURES)},
                         **{f"{name}_ci95": seed_interval(values[:, j])[1]
                            for j, name in enumerate(TRAJECTORY_MEASURES)}})
    return rows


def rows(summaries: list[PanelSummary]) -> list[dict]:
    """summary.json rows: per panel x attention bin, the % of held-out sequences (mean and
    std over seeds), with the panel's mean final training loss, held-out accuracy, mean
    attention mass on distinct tokens (mean, std and 95% half-width over seeds), the % of
    sequences in the top row (probability of the correct token at least 0.8) and the
    separability (mean and 95% half-width over seeds of each seed's mean)."""
    rows = []
    for s in summaries:
        mean, std = s.attention_marginal()
        separabilities = [float(np.nanmean(x)) for x in s.separabilities]
        for j in range(len(mean)):
            rows.append({
                "panel": s.panel.key,
                "bin_lo": round(float(metrics.HEATMAP_BINS[j]), 6),
                "bin_hi": round(float(metrics.HEATMAP_BINS[j + 1]), 6),
                "pct_mean": float(mean[j]), "pct_std": float(std[j]),
                "final_loss": float(np.mean(s.final_losses)),
                "accuracy": float(np.mean(s.accuracies)),
                "attention_mean": float(np.mean(s.mean_attentions)),
                "attention_mean_std": float(np.std(s.mean_attentions)),
                "attention_mean_ci95": seed_interval(s.mean_attentions)[1],
                "top_row_pct": float(np.mean([h[-1].sum() for h in s.heatmaps])),
                "epochs_mean": float(np.mean(s.epochs_run)),
                "epochs_ci95": seed_interval(s.epochs_run)[1],
                "separability_mean": float(np.mean(separabilities)),
                "separability_ci95": seed_interval(separabilities)[1],
            })
    return rows


def heatmap_cells(summaries: list[PanelSummary]) -> list[dict]:
    """data.csv: every plotted heatmap cell (mean and std over seeds)."""
    edges = metrics.HEATMAP_BINS
    return [
        {"panel": s.panel.key, "attention_lo": round(float(edges[j]), 6),
         "attention_hi": round(float(edges[j + 1]), 6), "probability_lo": round(float(edges[i]), 6),
         "probability_hi": round(float(edges[i + 1]), 6), "pct_mean": float(s.heatmap_mean[i, j]),
         "pct_std": float(s.heatmap_std[i, j])}
        for s in summaries for i in range(5) for j in range(5)
    ]


# --- the figure ---------------------------------------------------------------------------


# The k-th panel of a Fig. 2 row in the colour of row 1's k-th parameterization (FAFO, FACO,
# CAFO, CACO), as the theory chapter draws them.
PANEL_COLORS = tuple(PARAMETERIZATION_COLORS[name] for name in ("FAFO", "FACO", "CAFO", "CACO"))


def plot_heatmaps(summaries, statistic: str = "mean"):
    """Paper Fig. 2: one 5x5 heatmap per panel, four rows of two in the paper's reading
    order (its row 1 the first two rows here, row 2 the last two), so that the cells' numbers
    read at the book's width.

    x: attention mass on distinct tokens (from the query position), y: probability of the
    correct next token, bins of 0.2; each cell the % of held-out sequences, mean (or std)
    over seeds, printed in the cell.
    """
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 12.4))
        axes = fig.subplots(4, 2, sharex=True, sharey=True)
        image = None
        vmax = 100.0 if statistic == "mean" else max(
            float(np.max(s.heatmap_std)) for s in summaries) or 1.0
        for k, (ax, s) in enumerate(zip(axes.flat, summaries)):
            values = s.heatmap_mean if statistic == "mean" else s.heatmap_std
            image = ax.imshow(values, origin="lower", extent=(0, 1, 0, 1), cmap=HEATMAP_CMAP,
                              vmin=0, vmax=vmax, aspect="equal")
            edges = np.linspace(0.0, 1.0, len(values) + 1)  # as metrics.HEATMAP_BINS
            centres = (edges[:-1] + edges[1:]) / 2
            for i, y in enumerate(centres):
                for j, x in enumerate(centres):
                    v = values[i, j]
                    ax.text(x, y, f"{v:.1f}", ha="center", va="center", fontsize=9,
                            color=heatmap_text_color(v, vmax))
            ax.set_title(f"({'abcdefgh'[k]}) {s.panel.title}\n"
                         f"loss {np.mean(s.final_losses):.2g}")
            ax.set_xticks(edges)
            ax.set_yticks(edges)
            ax.grid(False)
        # One label per axis for the whole grid: per-panel labels collide at the book's width.
        fig.supxlabel("attention on distinct tokens", fontsize=HOUSE_STYLE["axes.labelsize"])
        fig.supylabel("P(correct token)", fontsize=HOUSE_STYLE["axes.labelsize"])
        label = "% of sequences (mean over seeds)" if statistic == "mean" else \
            "std over seeds (percentage points)"
        fig.colorbar(image, ax=axes, shrink=0.5, aspect=30, label=label)
    return fig


def plot_trajectories(rows, panel_keys, uniform_share: float | None = None):
    """paper-fig2 trajectories: attention against held-out loss during training, per panel.

    ``rows``: :func:`qkov.figures.paper_fig2.matched_loss_curves`; ``panel_keys``: the panels in Fig. 2's
    order (two rows of four). Columns: Fig. 2's rows; rows: attention on distinct tokens, on
    class-identifying tokens. Lines: mean over seeds; bands: 95% t interval over seeds. The loss
    axis runs from high to low, the direction of training. ``uniform_share``: a dotted line
    at the distinct tokens' share of uniform attention (top row).
    """
    measures = (("attention_distinct", "attention on distinct tokens"),
                ("attention_class", "attention on class-identifying tokens"))
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 6.8))
        axes = fig.subplots(2, 2, sharex=True, sharey=True)
        for col in range(2):
            for k, key in enumerate(panel_keys[4 * col:4 * col + 4]):
                mine = [row for row in rows if row["panel"] == key]
                loss = np.array([row["loss"] for row in mine])
                for ax, (name, _) in zip(axes[:, col], measures):
                    mean = np.array([row[f"{name}_mean"] for row in mine])
                    half = np.array([row[f"{name}_ci95"] for row in mine])
                    ax.plot(loss, mean, color=PANEL_COLORS[k], label=key)
                    ax.fill_between(loss, mean - half, mean + half, color=PANEL_COLORS[k],
                                    alpha=0.2, lw=0)
            axes[0, col].set_title(f"({'ab'[col]}) Fig. 2 row {col + 1}")
            axes[1, col].set_title(f"({'cd'[col]}) Fig. 2 row {col + 1}")
            axes[0, col].legend(loc="upper left")
        fig.supxlabel("held-out loss (training runs left to right)",
                      fontsize=HOUSE_STYLE["axes.labelsize"])
        for ax in axes[0] if uniform_share is not None else ():
            ax.axhline(uniform_share, color="k", lw=0.8, ls=":")
        for ax in axes.flat:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # short runs: labels would collide
            ax.set_ylim(0, 1.02)
        axes[0, 0].invert_xaxis()  # shared: all four panels
        for ax, (_, label) in zip(axes[:, 0], measures):
            ax.set_ylabel(label.replace("attention on ", "attention: "))
    return fig
