"""paper-fig3: paper Fig. 3 - attention frozen at mass alpha on the distinct tokens, the OV
circuit trained alone: the loss, and the pressure to sharpen attention, after every epoch.

:class:`Parameters` are the notebook's parameters; :func:`runs` the ten runs (two OV
parameterizations x five alphas); :func:`curves` trains them and measures every epoch;
:func:`rows` and :func:`curve_rows` are what the notebook prints and the artifacts hold;
:func:`comparison` sets the final losses beside those the authors' notebooks printed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..params import FigureParameters, boolean, integer, number, number_list, optional_path, parameter
from ..synthetic import metrics
from ..synthetic.models import ModelSpec
from ..synthetic.train import RunConfig
from ..synthetic.train import train as train_runs
from ..plotting import house_style, new_figure, ratio_colors

ALPHAS = (0.2, 0.4, 0.6, 0.8, 1.0)
OV_CIRCUITS = {  # the OV circuit under fixed attention: collapsed with bias, factorized without
    "collapsed": dict(parameterization="CACO", ov_bias=True),
    "factorized": dict(parameterization="CAFO", ov_bias=False),
}


def runs(alphas=ALPHAS, epochs: int = 500, batches_per_epoch: int = 250,
              seed: int = 1234, lr: float = 1e-2) -> list[RunConfig]:
    """Fixed attention, OV only: one run per OV parameterization x alpha (batch 32/class)."""
    return [
        RunConfig(f"{ov}/alpha{alpha:g}", ModelSpec(**kw, fixed_alpha=alpha), seed, epochs,
                  batches_per_epoch, lr_qk=0.0, lr_ov=lr, batch_size=32, T=64,
                  per_class_batches=True)
        for ov, kw in OV_CIRCUITS.items() for alpha in alphas
    ]



@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters (defaults: paper scale)."""

    alphas: list = parameter(list(ALPHAS), number_list, above=0, below=1 + 1e-12)
    epochs: int = parameter(500, integer, minimum=1)  # paper: 500
    batches_per_epoch: int = parameter(250, integer, minimum=1)  # paper: 250
    seed: int = parameter(1234, integer, minimum=0)  # initialisation, training and held-out data
    lr: float = parameter(0.01, number, above=0)  # SGD rate of the OV circuit
    eval_batches: int = parameter(250, integer, minimum=1)  # held-out batches (32 per class)
    d: float = parameter(0.005, number, above=0, below=0.5)  # attention step of the sensitivity
    workers: int = parameter(2, integer, minimum=1)
    progress: bool = parameter(True, boolean)
    artifacts_dir: str | None = parameter(None, optional_path)



@dataclass
class FixedAttentionCurve:
    """L_t(alpha) and the sensitivity (L_t(alpha) - L_t(alpha + d)) / d at epochs 0..E."""

    ov: str
    alpha: float
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


def curves(p: Parameters) -> list[FixedAttentionCurve]:
    """Train the OV circuits under fixed attention; measure loss and sensitivity each epoch.

    Held-out sequences (``eval_batches`` x 32 per class) are drawn once and used at every
    epoch, for alpha and alpha + d alike, so the curves carry no sampling noise between
    epochs and the finite difference none between its two terms.
    """
    probe = metrics.SharpeningProbe(
        metrics.held_out_batches(p.seed, 64, p.eval_batches, per_class=True))

    def measure(configs, circuits, epoch):  # every run at once: one batched evaluation
        return list(probe(circuits, np.array([c.model.fixed_alpha for c in configs]), p.d))

    results = train_runs(runs(p.alphas, p.epochs, p.batches_per_epoch, p.seed, p.lr),
                         progress=p.progress, epoch_callback=measure, desc="paper-fig3",
                         workers=p.workers)
    found = []
    for r in results:
        values = np.array(r.epoch_callback_values)
        found.append(FixedAttentionCurve(r.config.name.split("/")[0],
                                          r.config.model.fixed_alpha, values[:, 0],
                                          values[:, 1]))
    return found


def rows(curves: list[FixedAttentionCurve]) -> list[dict]:
    return [{"ov": c.ov, "alpha": c.alpha, "final_loss": float(c.losses[-1]),
             "peak_sensitivity": c.peak[0], "epoch_of_peak": c.peak[1],
             "min_sensitivity": c.trough[0], "epoch_of_min": c.trough[1]} for c in curves]


def curve_rows(curves: list[FixedAttentionCurve]) -> list[dict]:
    """curves.csv: every run's held-out loss and sensitivity after every epoch."""
    return [{"ov": c.ov, "alpha": c.alpha, "epoch": e, "loss": float(c.losses[e]),
             "sensitivity": float(c.sensitivity[e])}
            for c in curves for e in range(len(c.losses))]


# Quoted from the authors' public Fig. 3 notebooks (final losses at epoch 500), not computed.
AUTHORS_FINAL_LOSS = {
    "collapsed": {0.2: 0.5980, 0.4: 0.1582, 0.6: 0.0645, 0.8: 0.0346, 1.0: 0.02155},
    "factorized": {0.2: 0.00379, 0.4: 0.00148, 0.6: 0.000892, 0.8: 0.000633, 1.0: 0.000486},
}
COMPARISON_COLUMNS = ("ov", "alpha", "companion", "authors")


def comparison(rows: list[dict], epochs: int) -> list[dict]:
    """Each run's final loss next to the authors' (NaN for an alpha they did not run); no
    rows unless the run trained the authors' 500 epochs."""
    if epochs != 500:
        return []
    return [{"ov": row["ov"], "alpha": row["alpha"], "companion": row["final_loss"],
             "authors": AUTHORS_FINAL_LOSS[row["ov"]].get(row["alpha"], float("nan"))}
            for row in rows]


COLUMNS = ("ov", "alpha", "final_loss", "peak_sensitivity", "epoch_of_peak",
                "min_sensitivity", "epoch_of_min")


# --- the figure ---------------------------------------------------------------------------


def plot(curves):
    """Paper Fig. 3: loss L_t(alpha) and sensitivity per OV parameterization over epochs
    (epoch axis linear up to 10 and logarithmic after, so that the early dip of the
    sensitivity below zero shows next to the late course)."""
    ovs = list(dict.fromkeys(c.ov for c in curves))
    alphas = sorted({c.alpha for c in curves})
    colors = dict(zip(alphas, ratio_colors(alphas)))
    with house_style():
        fig = new_figure(figsize=(6 * len(ovs), 6.4))
        axes = fig.subplots(2, len(ovs), squeeze=False)
        for col, ov in enumerate(ovs):
            for c in (c for c in curves if c.ov == ov):
                epochs = np.arange(len(c.losses))
                axes[0, col].plot(epochs, c.losses, color=colors[c.alpha],
                                  label=rf"$\alpha = {c.alpha:g}$")
                axes[1, col].plot(epochs, c.sensitivity, color=colors[c.alpha])
            axes[0, col].set_yscale("log")
            axes[0, col].set_title(f"({'ab'[col]}) {ov} OV: loss $L_t(\\alpha)$")
            axes[1, col].set_title(f"({'cd'[col]}) {ov} OV: "
                                   r"$(L_t(\alpha) - L_t(\alpha + \delta)) / \delta$")
            axes[1, col].set_xlabel("epoch (linear up to 10, logarithmic after)")
            axes[1, col].axhline(0.0, color="k", lw=0.8)  # below it, sharper would be worse
            for ax in axes[:, col]:  # the first epochs, where the sensitivity can dip, visible
                ax.set_xscale("symlog", linthresh=10, linscale=0.6)
                ax.set_xlim(0, len(c.losses) - 1)
                ticks = [t for t in (0, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
                         if t <= len(c.losses) - 1]
                ax.set_xticks(ticks, [str(t) for t in ticks])
                ax.minorticks_off()
        axes[0, 0].legend(title="fixed attention")
    return fig
