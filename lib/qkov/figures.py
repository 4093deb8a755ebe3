"""One house style for every figure, the panel functions, and saving in every format."""

from __future__ import annotations

import io
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from .artifacts import write_atomic

HOUSE_STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 200,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "lines.linewidth": 1.8,
    "legend.frameon": False,
    "legend.fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    # Reproducible files: the same figure gives the same bytes.
    "svg.hashsalt": "qkov",
    "svg.fonttype": "path",
    "pdf.fonttype": 42,
}

FORMATS = ("png", "pdf", "svg")
# No creation dates in the files, so a re-run with equal results writes equal bytes.
_METADATA = {"png": {"Software": None}, "pdf": {"CreationDate": None, "ModDate": None},
             "svg": {"Date": None}}


@contextmanager
def house_style():
    """Apply the house style while a figure is built (and saved)."""
    with mpl.rc_context(HOUSE_STYLE):
        yield


def save_figure(fig, folder: Path, stem: str = "figure") -> list[Path]:
    """Save ``fig`` as ``stem.png``, ``.pdf`` and ``.svg`` in ``folder``, each atomically."""
    paths = []
    with house_style():
        for fmt in FORMATS:
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, bbox_inches="tight", metadata=_METADATA[fmt])
            path = Path(folder) / f"{stem}.{fmt}"
            write_atomic(path, buffer.getvalue())
            paths.append(path)
    return paths


def ratio_colors(ratios: Sequence[float]) -> list:
    """One colour per learning-rate ratio, ordered from slow QK (dark) to fast QK (light)."""
    cmap = mpl.colormaps["viridis"]
    order = np.argsort(np.argsort(ratios))
    span = max(len(ratios) - 1, 1)
    return [cmap(0.9 * k / span) for k in order]


def ratio_label(r: float) -> str:
    return rf"$r = {r:g}$"


def reduced_dynamics(trajectories, thresholds, samples: int = 400):
    """Paper Fig. 4: the reduced dynamics for several ratios r = eta_QK / eta_OV.

    Top row: mu_OV, mu_QK, loss and alpha against normalised time tau = min(eta) t (log
    scale). Bottom row: mu_OV, mu_QK and alpha at the moment the loss first falls below each
    threshold (x axis inverted: training goes on to the right).
    """
    ratios = [tr.r for tr in trajectories]
    colors = ratio_colors(ratios)
    with house_style():
        fig = plt.figure(figsize=(13, 6.4), layout="constrained")
        grid = fig.add_gridspec(2, 4)
        top = [fig.add_subplot(grid[0, k]) for k in range(4)]
        bottom = [fig.add_subplot(grid[1, k]) for k in range(3)]
        legend_ax = fig.add_subplot(grid[1, 3])
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
            ax.set_xlabel(r"normalised time $\min(\eta_{OV}, \eta_{QK})\, t$")
            ax.set_title(title)
        top[2].set_yscale("log")
        top[3].set_ylim(0, 1.02)

        titles = [r"(e) $\mu_{OV}$ at stop", r"(f) $\mu_{QK}$ at stop", r"(g) $\alpha$ at stop"]
        for ax, title in zip(bottom, titles):
            ax.set_xscale("log")
            ax.set_xlim(max(thresholds), min(thresholds))
            ax.set_xlabel("stopping loss threshold")
            ax.set_title(title)
        bottom[2].set_ylim(0, 1.02)

        handles, labels = top[0].get_legend_handles_labels()
        legend_ax.legend(handles, labels, loc="center left",
                         title=r"$r = \eta_{QK} / \eta_{OV}$", fontsize=10, title_fontsize=10)
    return fig
