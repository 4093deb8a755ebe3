"""One house style for every figure, the panel functions, and saving in every format."""

from __future__ import annotations

import io
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure

from .artifacts import figure_dir, write_atomic, write_summary, write_table

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


class NotebookFigure(Figure):
    """A figure outside pyplot's registry that a notebook shows as one PNG.

    Ending a cell with ``fig`` displays it exactly once through ``_repr_png_``, whatever the
    kernel's matplotlib backend: no inline auto-display to duplicate it (a duplicated
    figure breaks the book's figure label) and no open pyplot figures to leak.
    """

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        with house_style():
            self.savefig(buffer, format="png", bbox_inches="tight", dpi=HOUSE_STYLE["figure.dpi"],
                         metadata=_METADATA["png"])
        return buffer.getvalue()


def new_figure(**kwargs) -> NotebookFigure:
    return NotebookFigure(layout="constrained", **kwargs)


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


def publish(figure_id: str, parameters: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
            started: float, drawings: Mapping[str, Figure], tables: Mapping[str, Any] | None = None,
            artifacts_dir: str | None = None) -> None:
    """The save cell of every figure notebook, into ``artifacts/<figure_id>/`` (or
    ``artifacts_dir``): each drawing as ``<stem>.png``, ``.pdf`` and ``.svg``, each table
    as CSV (``tables[name]`` its rows, or (rows, columns) where it may have none), then the
    rows as ``data.csv`` and ``summary.json`` with the parameters and the provenance (the
    wall time counted from ``started``, a ``time.perf_counter()``). Prints what it wrote."""
    folder = figure_dir(figure_id, artifacts_dir)
    written = [path for stem, fig in drawings.items() for path in save_figure(fig, folder, stem)]
    for name, table in (tables or {}).items():
        table_rows, columns = table if isinstance(table, tuple) else (table, None)
        write_table(folder / name, table_rows, columns)
        written.append(folder / name)
    summary = write_summary(folder, figure_id, parameters, rows,
                            wall_time_s=time.perf_counter() - started)
    written += [folder / "data.csv", summary]
    print("wrote", ", ".join(path.name for path in written))


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
        fig = new_figure(figsize=(13, 6.4))
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


def heatmap_panels(summaries, statistic: str = "mean"):
    """Paper Fig. 2: one 5x5 heatmap per panel (two rows of four).

    x: attention mass on distinct tokens (from the query position), y: probability of the
    correct next token, bins of 0.2; each cell the % of held-out sequences, mean (or std)
    over seeds, printed in the cell.
    """
    with house_style():
        fig = new_figure(figsize=(13, 6.6))
        axes = fig.subplots(2, 4, sharex=True, sharey=True)
        image = None
        vmax = 100.0 if statistic == "mean" else max(
            float(np.max(s.heatmap_std)) for s in summaries) or 1.0
        for ax, s in zip(axes.flat, summaries):
            values = s.heatmap_mean if statistic == "mean" else s.heatmap_std
            image = ax.imshow(values, origin="lower", extent=(0, 1, 0, 1), cmap="Blues",
                              vmin=0, vmax=vmax, aspect="equal")
            edges = np.linspace(0.0, 1.0, len(values) + 1)  # as metrics.HEATMAP_BINS
            centres = (edges[:-1] + edges[1:]) / 2
            for i, y in enumerate(centres):
                for j, x in enumerate(centres):
                    v = values[i, j]
                    ax.text(x, y, f"{v:.1f}", ha="center", va="center", fontsize=8,
                            color="white" if v > 0.6 * vmax else "black")
            ax.set_title(f"{s.panel.title}\nloss {np.mean(s.final_losses):.2g}", fontsize=9)
            ax.set_xticks(edges)
            ax.set_yticks(edges)
            ax.grid(False)
        for ax in axes[1]:
            ax.set_xlabel("attention on distinct tokens")
        for ax in axes[:, 0]:
            ax.set_ylabel("P(correct token)")
        label = "% of sequences (mean over seeds)" if statistic == "mean" else \
            "std over seeds (percentage points)"
        fig.colorbar(image, ax=axes, shrink=0.8, label=label)
    return fig


PANEL_COLORS = ("#d95f02", "#1b9e77", "#7570b3", "#444444")  # four panels of a Fig. 2 row


def matched_loss_panels(rows, panel_keys, uniform_share: float | None = None):
    """paper-fig2 trajectories: attention against held-out loss during training, per panel.

    ``rows``: :func:`qkov.figures.paper_fig2.matched_loss_curves`; ``panel_keys``: the panels in Fig. 2's
    order (two rows of four). Columns: Fig. 2's rows; rows: attention on distinct tokens, on
    class-identifying tokens. Lines: mean over seeds; bands: +- one std over seeds. The loss
    axis runs from high to low, the direction of training. ``uniform_share``: a dotted line
    at the distinct tokens' share of uniform attention (top row).
    """
    measures = (("attention_distinct", "attention on distinct tokens"),
                ("attention_class", "attention on class-identifying tokens"))
    with house_style():
        fig = new_figure(figsize=(12, 7.2))
        axes = fig.subplots(2, 2, sharex=True, sharey=True)
        for col in range(2):
            for k, key in enumerate(panel_keys[4 * col:4 * col + 4]):
                mine = [row for row in rows if row["panel"] == key]
                loss = np.array([row["loss"] for row in mine])
                for ax, (name, _) in zip(axes[:, col], measures):
                    mean = np.array([row[f"{name}_mean"] for row in mine])
                    std = np.array([row[f"{name}_std"] for row in mine])
                    ax.plot(loss, mean, color=PANEL_COLORS[k], label=key)
                    ax.fill_between(loss, mean - std, mean + std, color=PANEL_COLORS[k],
                                    alpha=0.2, lw=0)
            axes[0, col].set_title(f"({'ab'[col]}) Fig. 2 row {col + 1}: "
                                   "attention on distinct tokens")
            axes[1, col].set_title(f"({'cd'[col]}) row {col + 1}: attention on "
                                   "class-identifying tokens")
            axes[1, col].set_xlabel("held-out loss (training runs left to right)")
            axes[0, col].legend(fontsize=9, loc="upper left")
        for ax in axes[0] if uniform_share is not None else ():
            ax.axhline(uniform_share, color="k", lw=0.8, ls=":")
        for ax in axes.flat:
            ax.set_xscale("log")
            ax.set_ylim(0, 1.02)
        axes[0, 0].invert_xaxis()  # shared: all four panels
        for ax, (_, label) in zip(axes[:, 0], measures):
            ax.set_ylabel(label.replace("attention on ", "attention: "))
    return fig


def fixed_attention_curves(curves):
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


# --- the theory chapter ------------------------------------------------------------------------

PARAMETERIZATION_COLORS = {"FAFO": "#d95f02", "FACO": "#1b9e77", "CAFO": "#7570b3",
                           "CACO": "#444444"}
_QUANTITIES = (("mu_ov", r"$\mu_{OV}$"), ("mu_qk", r"$\mu_{QK}$"), ("loss", "loss $L$"),
               ("alpha", r"attention mass $\alpha$"))


def _curve(rows, key, **match):
    picked = [row for row in rows if all(row[k] == v for k, v in match.items())]
    return np.array([row["tau"] for row in picked]), np.array([row[key] for row in picked])


def reduction_overlay(curves):
    """theory-reduction: full-matrix gradient descent of the stylized model on the ODE.

    ``curves``: the rows of :func:`qkov.figures.theory_reduction.curves`. Per ratio r (colour):
    the ODE solution (line), full-batch descent (circles) and minibatch descent (dashed),
    against normalised time.
    """
    from matplotlib.lines import Line2D

    ratios = list(dict.fromkeys(row["r"] for row in curves))
    colors = ratio_colors(ratios)
    styles = {"ODE": dict(ls="-"), "full batch": dict(marker="o", mfc="none", ls="none", ms=5),
              "minibatch": dict(ls="--", lw=1.0)}
    with house_style():
        fig = new_figure(figsize=(13, 3.6))
        axes = fig.subplots(1, 4)
        for r, color in zip(ratios, colors):
            for source, style in styles.items():
                for ax, (key, _) in zip(axes, _QUANTITIES):
                    ax.plot(*_curve(curves, key, r=r, source=source), color=color, **style)
        for ax, (key, label), letter in zip(axes, _QUANTITIES, "abcd"):
            ax.set_xscale("log")
            ax.set_xlabel(r"normalised time $\min(\eta_{OV}, \eta_{QK})\, t$")
            ax.set_title(f"({letter}) {label}")
        axes[2].set_yscale("log")
        axes[3].set_ylim(0, 1.02)
        handles = [Line2D([], [], color=c, label=ratio_label(r)) for r, c in zip(ratios, colors)]
        handles += [Line2D([], [], color="k", label=name if name != "ODE" else "reduced ODE",
                           **{k: v for k, v in style.items() if k != "ls" or v != "-"})
                    for name, style in styles.items()]
        axes[0].legend(handles=handles, loc="upper left", fontsize=8)
    return fig


def rescaling_panels(trajectories, rows, curves):
    """theory-rescaling: (a) r_eff(t) per parameterization (``curves``: the rows of
    :func:`qkov.figures.theory_rescaling.curves`), (b) alpha at each loss threshold, (c) the
    predicted alpha at the matched loss next to the measured Fig. 2 attention mass."""
    with house_style():
        fig = new_figure(figsize=(13, 3.9))
        axes = fig.subplots(1, 3)
        for name, tr in trajectories.items():
            color = PARAMETERIZATION_COLORS[name]
            axes[0].plot(*_curve(curves, "r_eff", parameterization=name), color=color,
                         label=name)
            levels = np.array(sorted(tr.crossings, reverse=True))
            axes[1].plot(levels, [tr.crossings[x]["alpha"] for x in levels], color=color,
                         label=name)
        axes[0].set_xscale("log")
        axes[0].set_yscale("log")
        axes[0].set_xlabel(r"normalised time $\min(\eta_{OV}, \eta_{QK})\, t$")
        axes[0].set_title(r"(a) effective ratio $r_{\mathrm{eff}}(t)$")
        axes[0].legend(fontsize=8)
        axes[1].set_xscale("log")
        axes[1].invert_xaxis()
        axes[1].set_ylim(0, 1.02)
        axes[1].set_xlabel("loss threshold")
        axes[1].set_title(r"(b) reduced model: $\alpha$ when the loss first reaches it")

        names = [row["parameterization"] for row in rows]
        x = np.arange(len(names))
        axes[2].bar(x - 0.2, [row["alpha_at_loss"] for row in rows], 0.4,
                    color=[PARAMETERIZATION_COLORS[n] for n in names],
                    label=rf"predicted $\alpha$ at $L = {rows[0]['matched_loss']:g}$")
        axes[2].bar(x + 0.2, [row["measured_attention"] for row in rows], 0.4,
                    yerr=[row["measured_attention_std"] for row in rows], capsize=3,
                    color="white", edgecolor=[PARAMETERIZATION_COLORS[n] for n in names],
                    hatch="//", label="paper-fig2 at the same held-out loss (mean, std)")
        axes[2].set_xticks(x, names)
        axes[2].set_ylim(0, 1.32)  # room for the legend above the bars
        axes[2].set_yticks(np.linspace(0, 1, 6))
        axes[2].set_title("(c) sharpness at equal loss: prediction, Fig. 2 training")
        axes[2].set_ylabel("attention on relevant tokens")
        axes[2].legend(fontsize=8, loc="upper left")
    return fig


def ratio_sweep(rows, closed_form_curve, variant_rows=()):
    """theory-ratio-sweep: attention at a matched loss against r = eta_QK / eta_OV; below,
    when given, the task's attention per condition (T, initialisation, OV rate) on both
    measures."""
    r = np.array([row["r"] for row in rows])
    with house_style():
        fig = new_figure(figsize=(7.5, 8.4 if variant_rows else 4.6))
        grid = fig.add_gridspec(2 if variant_rows else 1, 2, height_ratios=(
            (1.15, 1) if variant_rows else None))
        ax = fig.add_subplot(grid[0, :])
        ax.plot(closed_form_curve["r"], closed_form_curve["alpha"], color="k",
                label=r"closed form: $\alpha$ (stylized setting)")
        ax.plot(r, [row["alpha_stylized"] for row in rows], "o", mfc="none", color="k", ms=7,
                label="stylized model, full-matrix descent")
        ax.errorbar(r, [row["task_informative_mean"] for row in rows],
                    yerr=[row["task_informative_std"] for row in rows], fmt="^-", capsize=3,
                    color="#1b9e77", label="task: on distinct + query tokens")
        ax.errorbar(r, [row["task_distinct_mean"] for row in rows],
                    yerr=[row["task_distinct_std"] for row in rows], fmt="s--", capsize=3,
                    color="#d95f02", label="task: on distinct tokens only")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(r"$r = \eta_{QK} / \eta_{OV}$")
        ax.set_ylabel("attention mass at the matched loss")
        ax.set_title(f"(a) attention at loss {rows[0]['matched_loss']:g} against the "
                     "learning-rate ratio")
        ax.legend(fontsize=8, loc="upper left")
        if variant_rows:
            _condition_panels(fig, grid, variant_rows)
    return fig


def _condition_panels(fig, grid, rows):
    conditions = list(dict.fromkeys(row["condition"] for row in rows))
    colors = dict(zip(conditions, ("#444444", "#1b9e77", "#d95f02", "#7570b3", "#e7298a",
                                   "#66a61e", "#e6ab02")))
    for col, (key, title) in enumerate((("distinct", "(b) on distinct tokens"),
                                        ("informative", "(c) on distinct + query tokens"))):
        ax = fig.add_subplot(grid[1, col])
        for k, condition in enumerate(conditions):
            picked = [row for row in rows if row["condition"] == condition]
            ax.errorbar([row["r"] * 1.07 ** (k - (len(conditions) - 1) / 2) for row in picked],
                        [row[key] for row in picked],
                        yerr=[row[f"{key}_ci95"] for row in picked], fmt="o-", ms=4,
                        capsize=2, color=colors[condition], label=condition)
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(r"$r = \eta_{QK} / \eta_{OV}$")
        ax.set_title(title)
        if col == 0:
            ax.set_ylabel("task attention (mean, 95% CI)")
            ax.legend(fontsize=7, loc="upper left")
