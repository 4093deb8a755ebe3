"""paper-fig3: paper Fig. 3 - attention frozen at mass alpha on the distinct tokens, the OV
circuit trained alone: the loss, and the pressure to sharpen attention, after every epoch.

:class:`Parameters` are the notebook's parameters; :func:`runs` the runs (two OV
parameterizations x five alphas, once per seed); :func:`curves` trains them and measures
every run after every epoch; :func:`rows` summarises each (OV, alpha) over the seeds (mean
and 95% interval), :func:`table` prints it, :func:`curve_rows` holds every run's curve;
:func:`comparison` sets the mean final losses beside those the authors' notebooks printed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import boolean, integer, number, number_list, seed_list
from ..cost import Work
from ..params import FigureParameters, parameter
from ..plotting import COLUMN_WIDTH_IN, HOUSE_STYLE, house_style, new_figure, sequential_colors
from ..spec import FigureSpec
from ..stats import interval_text, range_text, seed_band, seed_interval
from ..synthetic import authors, metrics
from ..synthetic.models import ModelConfig
from ..synthetic.train import RunConfig

SPEC = FigureSpec(id="paper-fig3", reproduces="paper Fig. 3", page="book/paper-fig3",
                  tables=("curves.csv",), threads=2, resources={"mem_mb": 4000, "runtime": 60},
                  alt=("Four line plots in two columns, collapsed and factorized OV circuit: on top the "
                       "held-out loss at a fixed attention mass alpha (log scale), below the sensitivity of "
                       "the loss to alpha, each against training epochs, one line per alpha from 0.2 to 1 "
                       "with a band of one standard deviation over seeds."),
    rates={"model-steps": 35_000})

ALPHAS = (0.2, 0.4, 0.6, 0.8, 1.0)
SEEDS = (1234, 1235, 1236, 1237, 1238)  # the authors' notebooks ran one, 1234
OV_CIRCUITS = {  # the OV circuit under fixed attention: collapsed with bias, factorized without
    "collapsed": dict(parameterization="CACO", ov_bias=True),
    "factorized": dict(parameterization="CAFO", ov_bias=False),
}


def runs(alphas=ALPHAS, epochs: int = 500, batches_per_epoch: int = 250, seeds=SEEDS,
         lr: float = 1e-2) -> list[RunConfig]:
    """Fixed attention, OV only: one run per OV parameterization x alpha x seed (batch 32
    per class); a seed fixes the initialisation, the training data and the held-out set."""
    return [
        RunConfig(f"{ov}/alpha{alpha:g}/seed{seed}", ModelConfig(**kw, fixed_alpha=alpha), seed,
                  epochs, batches_per_epoch, lr_qk=0.0, lr_ov=lr, batch_size=32, T=64,
                  per_class_batches=True)
        for ov, kw in OV_CIRCUITS.items() for alpha in alphas for seed in seeds
    ]


# Held-out batches (32 sequences per class): a seed's set is drawn and prepared at once, at
# 10,000 batches (1.28 million sequences) 256 MB of counts while it is prepared.
MAX_EVAL_BATCHES = 10_000
# Every run's held-out set is measured after every epoch (and before the first): a held-out
# batch measured costs ~0.7 of a training step (measured: 0.6 to 0.75), so at the defaults
# the measuring costs about as much as the training.
EVAL_BATCH_WEIGHT = 0.7


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: paper scale, five seeds)."""

    alphas: list = parameter(
        list(ALPHAS), number_list, above=0, at_most=1, distinct=True,
        doc="fixed attention mass on distinct tokens; distinct, each in (0, 1]")
    epochs: int = parameter(500, integer, minimum=1, doc="training epochs (paper: 500)")
    batches_per_epoch: int = parameter(
        250, integer, minimum=1,
        doc="batches per epoch, each 32 sequences per class (paper: 250)")
    seeds: list = parameter(
        list(SEEDS), seed_list,
        doc="one run per OV circuit, alpha and seed (authors: 1234)")
    lr: float = parameter(0.01, number, above=0, doc="SGD learning rate of the OV circuit")
    eval_batches: int = parameter(
        250, integer, minimum=1, maximum=MAX_EVAL_BATCHES,
        doc="held-out batches (32 per class) for the loss after every epoch; 1 to 10,000")
    d: float = parameter(
        0.005, number, above=0, below=0.5,
        doc="attention step of the finite-difference sensitivity")
    workers: int = parameter(
        2, integer, minimum=1,
        doc="training processes (runs are independent; results do not depend on it)")
    progress: bool = parameter(True, boolean, doc="show a progress bar while training")

    def work(self) -> Work:
        """Per run (OV circuits x alphas x seeds): its optimizer steps (epochs x batches per
        epoch; no early stop) and its held-out batches measured after every epoch and
        before the first, at EVAL_BATCH_WEIGHT each."""
        per_run = (self.epochs * self.batches_per_epoch
                   + EVAL_BATCH_WEIGHT * (self.epochs + 1) * self.eval_batches)
        return Work(len(OV_CIRCUITS) * len(self.alphas) * len(self.seeds) * per_run,
                    "model-steps", f"a held-out batch measured counts as {EVAL_BATCH_WEIGHT:g}")


@dataclass
class FixedAttentionCurve:
    """One run: L_t(alpha) and the sensitivity (L_t(alpha) - L_t(alpha + d)) / d at epochs
    0..E."""

    ov: str
    alpha: float
    seed: int
    losses: np.ndarray
    sensitivity: np.ndarray

    @property
    def peak(self) -> tuple[float, int]:
        k = int(np.argmax(self.sensitivity))
        return float(self.sensitivity[k]), k

    @property
    def trough(self) -> tuple[float, int]:
        """The lowest sensitivity and its epoch: below zero, sharper attention would have
        raised the loss at that moment."""
        k = int(np.argmin(self.sensitivity))
        return float(self.sensitivity[k]), k


def sensitivity_probe(p: Parameters):
    """The measure after every epoch: per run, the held-out loss and its sensitivity to
    sharper attention (:class:`qkov.synthetic.metrics.SharpeningProbe`, alpha + d).

    Each seed's held-out sequences (``eval_batches`` x 32 per class) are drawn once and used
    at every epoch, for alpha and alpha + d alike, so a curve carries no sampling noise
    between epochs and the finite difference none between its two terms.
    """
    probes = {seed: metrics.SharpeningProbe(
        metrics.held_out_batches(seed, 64, p.eval_batches, per_class=True)) for seed in p.seeds}

    def measure(configs, circuits, epoch):  # per seed, its runs at once: one batched evaluation
        values = np.zeros((len(configs), 2))
        for seed in {c.seed for c in configs}:
            index = [i for i, c in enumerate(configs) if c.seed == seed]
            values[index] = probes[seed]({k: v[index] for k, v in circuits.items()},
                                         np.array([configs[i].model.fixed_alpha
                                                   for i in index]), p.d)
        return list(values)

    return measure


def curves(results) -> list[FixedAttentionCurve]:
    """Each trained run's loss and sensitivity per epoch (what :func:`sensitivity_probe`
    measured)."""
    found = []
    for r in results:
        values = np.array(r.epoch_callback_values)
        found.append(FixedAttentionCurve(r.config.name.split("/")[0],
                                         r.config.model.fixed_alpha, r.config.seed,
                                         values[:, 0], values[:, 1]))
    return found


def _by_run(curves: list[FixedAttentionCurve]) -> dict[tuple[str, float], list]:
    """The curves of each (OV circuit, alpha), in the order of the runs."""
    grouped = {}
    for c in curves:
        grouped.setdefault((c.ov, c.alpha), []).append(c)
    return grouped


def rows(curves: list[FixedAttentionCurve]) -> list[dict]:
    """Per OV circuit and alpha, over the seeds: the final loss, the peak of the sensitivity
    and its epoch, the lowest sensitivity and its epoch (each seed's own, then the mean and
    the half-width of the 95% t interval, qkov.stats.seed_interval)."""
    out = []
    for (ov, alpha), mine in _by_run(curves).items():
        stats = {"final_loss": [c.losses[-1] for c in mine],
                 "peak_sensitivity": [c.peak[0] for c in mine],
                 "epoch_of_peak": [c.peak[1] for c in mine],
                 "min_sensitivity": [c.trough[0] for c in mine],
                 "epoch_of_min": [c.trough[1] for c in mine]}
        row = {"ov": ov, "alpha": alpha, "seeds": len(mine)}
        for name, values in stats.items():
            mean, half = seed_interval(values)
            row[name], row[f"{name}_ci95"] = float(mean), float(half)
            if name.startswith("epoch"):
                row[f"{name}_median"] = float(np.median(values))
                row[f"{name}_min"], row[f"{name}_max"] = float(min(values)), float(max(values))
        out.append(row)
    return out


COLUMNS = ("ov", "alpha", "final_loss", "peak_sensitivity", "epoch_of_peak",
           "min_sensitivity", "epoch_of_min")


def table(rows: list[dict]) -> list[dict]:
    """The rows for printing: each value as mean ± 95% half-width over the seeds; an epoch
    (where a peak or a dip falls, a position rather than a measurement, which can split
    between seeds) as the median and, where the seeds differ, their range."""
    def epoch(row, name):
        return range_text([row[f"{name}_{k}"] for k in ("min", "median", "max")])

    return [{"ov": row["ov"], "alpha": row["alpha"],
             **{name: epoch(row, name) if name.startswith("epoch")
                else interval_text(row[name], row[f"{name}_ci95"], 4)
                for name in COLUMNS[2:]}} for row in rows]


def curve_rows(curves: list[FixedAttentionCurve]) -> list[dict]:
    """curves.csv: every run's held-out loss and sensitivity after every epoch."""
    return [{"ov": c.ov, "alpha": c.alpha, "seed": c.seed, "epoch": e,
             "loss": float(c.losses[e]), "sensitivity": float(c.sensitivity[e])}
            for c in curves for e in range(len(c.losses))]


AUTHORS_FINAL_LOSS = authors.FIG3_FINAL_LOSS  # quoted, not computed (qkov.synthetic.authors)
COMPARISON_COLUMNS = ("ov", "alpha", "companion", "companion_ci95", "authors")


def comparison(rows: list[dict], epochs: int) -> list[dict]:
    """The mean final loss over the seeds (± 95% half-width) next to the authors' (NaN for
    an alpha they did not run); no rows unless the runs trained the authors' 500 epochs."""
    if epochs != 500:
        return []
    return [{"ov": row["ov"], "alpha": row["alpha"], "companion": row["final_loss"],
             "companion_ci95": row["final_loss_ci95"],
             "authors": AUTHORS_FINAL_LOSS[row["ov"]].get(row["alpha"], float("nan"))}
            for row in rows]


# --- the figure ---------------------------------------------------------------------------


def plot(curves):
    """Paper Fig. 3: loss L_t(alpha) and sensitivity per OV parameterization over epochs,
    mean over the seeds with a band of its 95% t interval (epoch axis linear up to 10
    and logarithmic after, so that the early dip of the sensitivity below zero shows next
    to the late course)."""
    grouped = _by_run(curves)
    ovs = list(dict.fromkeys(ov for ov, _ in grouped))
    alphas = sorted({alpha for _, alpha in grouped})
    colors = dict(zip(alphas, sequential_colors(alphas)))
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 6.6))
        axes = fig.subplots(2, len(ovs), squeeze=False)
        for col, ov in enumerate(ovs):
            for (_, alpha), mine in ((k, v) for k, v in grouped.items() if k[0] == ov):
                epochs = np.arange(len(mine[0].losses))
                for ax, name in zip(axes[:, col], ("losses", "sensitivity")):
                    values = np.stack([getattr(c, name) for c in mine])
                    mean, half = seed_band(values)  # the band: 95% t interval over seeds
                    ax.plot(epochs, mean, color=colors[alpha],
                            label=rf"$\alpha = {alpha:g}$" if name == "losses" else None)
                    ax.fill_between(epochs, mean - half, mean + half, color=colors[alpha],
                                    alpha=0.25, lw=0)
            axes[0, col].set_yscale("log")
            axes[0, col].set_title(f"({'ab'[col]}) {ov} OV: loss")
            axes[1, col].set_title(f"({'cd'[col]}) {ov} OV: sensitivity")
            axes[1, col].axhline(0.0, color="k", lw=0.8)  # below it, sharper would be worse
            last = len(epochs) - 1
            for ax in axes[:, col]:  # the first epochs, where the sensitivity can dip, visible
                ax.set_xscale("symlog", linthresh=10, linscale=0.6)
                ax.set_xlim(0, last)
                ticks = [t for t in (0, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
                         if t <= last]
                ax.set_xticks(ticks, [str(t) for t in ticks])
                ax.minorticks_off()
        axes[0, 0].set_ylabel(r"loss $L_t(\alpha)$")
        axes[1, 0].set_ylabel(r"$(L_t(\alpha) - L_t(\alpha + \delta)) / \delta$")
        fig.supxlabel("epoch (linear up to 10, logarithmic after)",
                      fontsize=HOUSE_STYLE["axes.labelsize"])
        axes[0, 0].legend(title="fixed attention", loc="lower left")
    return fig
