"""``{qkov-explorer}``: paper Fig. 4's reduced dynamics, solved by the library at build time
on a grid of ratios r and irrelevant tokens n, shipped inline as JSON (a copy opened from disk
works too) and only drawn by ``qkov_explorer.js``. Other builders (the PDF) name the online page
and show small multiples drawn from the same grid."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
from docutils import nodes
from qkov_book import citation
from qkov_figures import source_path
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from qkov.figures import paper_fig4
from qkov.plotting import COLUMN_WIDTH_IN, drawing_files, house_style, new_figure, sequential_colors
from qkov.theory.reduced import attention_mass

SCRIPT = Path(__file__).with_name("qkov_explorer.js")
SAMPLES = 1000  # per run, geometric in tau, before thinning
TOLERANCE = 2e-3  # of a plot's range: a dropped point lies under 0.3 px from the line drawn
STYLE = """.qkov-explorer { border: 1px solid #ccc; border-radius: 4px; padding: 0.8em;
  margin: 1em 0; }
.qkov-explorer .qkx-controls, .qkov-explorer .qkx-plots { display: grid; gap: 0.6em 1.5em;
  grid-template-columns: repeat(auto-fill, minmax(min(100%, 280px), 1fr)); }
.qkov-explorer label { font-weight: 600; font-size: 0.95em; }
.qkov-explorer input { width: 100%; margin: 0; }
.qkov-explorer .qkx-ends { display: flex; justify-content: space-between; }
.qkov-explorer output { display: block; font-variant-numeric: tabular-nums; }
.qkov-explorer svg { width: 100%; height: auto; overflow: visible; }"""


def one_two_five(lo: float, hi: float) -> list[float]:  # lo, hi and 1-2-5 x 10^k between
    tens = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    return sorted({float(lo), float(hi), *(v for k in tens for v in
                                           (float(f"{m}e{k}") for m in (1, 2, 5)) if lo <= v <= hi)})


def thin(points: np.ndarray) -> np.ndarray:
    """Ramer-Douglas-Peucker: the indices of the points (column 0 increasing, each scaled to its
    plot's range) to keep, each dropped one within TOLERANCE of the line between its kept neighbours."""
    keep, spans = {0, len(points) - 1}, [(0, len(points) - 1)]
    while spans:
        i, j = spans.pop()
        t = (points[i + 1:j, :1] - points[i, 0]) / (points[j, 0] - points[i, 0])
        gap = np.abs(points[i + 1:j] - points[i] - t * (points[j] - points[i])).max(axis=1)
        if len(gap) and gap.max() > TOLERANCE:
            k = i + 1 + int(np.argmax(gap))
            keep.add(k)
            spans += [(i, k), (k, j)]
    return np.array(sorted(keep))


def run_data(trajectory, loss_axis: tuple[float, float]) -> dict:
    """One run as drawn (rounded under 0.2 px), and tau and alpha where it reaches the target loss."""
    tau = np.geomspace(1.0, trajectory.tau[-1], SAMPLES)
    s = trajectory.sample(tau)
    columns = {"x": np.log10(tau), "mu_ov": s["mu_ov"], "mu_qk": s["mu_qk"],
               "loss": np.log10(s["loss"]), "alpha": s["alpha"]}
    scales = {key: np.ptp(value) or 1.0 for key, value in columns.items()}
    scales.update(loss=loss_axis[1] - loss_axis[0], alpha=1.0)
    kept = thin(np.column_stack([columns[k] / scales[k] for k in columns]))
    data = {key: np.round(value[kept], max(0, 3 - math.floor(math.log10(scales[key])))).tolist()
            for key, value in columns.items()}
    data["end"] = {"tau": float(f"{trajectory.tau[-1]:.4g}"),
                   "alpha": float(f"{trajectory.alpha[-1]:.4g}")}
    return data


@functools.cache
def grid() -> dict:
    """``runs[i_n][i_r]`` over ratios and n 1-2-5 per decade (n to 10 x the figure's; ~4 s)."""
    p = paper_fig4.Parameters()
    ratios = sorted({*one_two_five(min(p.ratios), max(p.ratios)), *p.ratios, 1.0})
    ns = sorted({*one_two_five(1, round(10 * p.n)), p.n})
    loss_axis = (math.floor(math.log10(p.target_loss)), math.log10(p.setting.initial_loss))
    runs, alpha0 = [], []
    for n in ns:
        q = paper_fig4.Parameters(n=n, ratios=ratios)
        runs.append([run_data(tr, loss_axis) for tr in paper_fig4.trajectories(q)])
        alpha0.append(float(f"{float(attention_mass(0.0, q.setting)):.4g}"))
    return {"target_loss": p.target_loss, "loss_axis": loss_axis, "ratios": ratios, "n": ns,
            "alpha0": alpha0, "runs": runs,
            "start": {"r": ratios.index(min(r for r in p.ratios if r > 1)),
                      "reference_r": ratios.index(1.0), "n": ns.index(p.n)}}


def slider(name: str, label: str, values: list, start: int) -> str:
    return (f'<div><label>{label}: <span class="qkx-{name}-value">{values[start]:g}</span>'
            f'<input class="qkx-{name}" type="range" min="0" max="{len(values) - 1}" '
            f'value="{start}"></label><div class="qkx-ends" aria-hidden="true">'
            f'<span>{values[0]:g}</span><span>{values[-1]:g}</span></div></div>')


def panel_html(data: dict) -> str:
    plots = "".join(f'<svg data-plot="{key}" viewBox="0 0 280 200"></svg>'
                    for key in ("mu_ov", "mu_qk", "loss", "alpha"))
    payload = json.dumps(data, separators=(",", ":"))
    return (f'<style>{STYLE}</style><div class="qkov-explorer" data-qkov-explorer="">'
            '<div class="qkx-controls">'
            + slider("r", "Learning-rate ratio r = η<sub>QK</sub> / η<sub>OV</sub>",
                     data["ratios"], data["start"]["r"])
            + slider("n", "Irrelevant tokens n", data["n"], data["start"]["n"])
            + '</div><p>Solid: the sliders\' setting; dashed: r = 1 at the same n; faint: '
            'earlier settings; dots: where each run reaches the target loss.</p>'
            f'<output class="qkx-values" aria-live="polite"></output><div class="qkx-plots">'
            f'{plots}</div><script type="application/json" class="qkx-data">{payload}</script>'
            f'<script>{SCRIPT.read_text()}</script></div>')


def small_multiples(data: dict) -> tuple[bytes, list[float], list[float]]:
    """The widget's grid as a static figure: alpha over time at the paper figure's ratios, one
    panel per n (a tenth of the figure's, its own, ten times), a dot at the target loss."""
    p = paper_fig4.Parameters()
    ns = [n for n in data["n"] if n in (p.n / 10, p.n, 10 * p.n)]
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 2.6))
        axes = fig.subplots(1, len(ns), sharey=True)
        for ax, n in zip(axes, ns):
            i = data["n"].index(n)
            for r, color in zip(p.ratios, sequential_colors(p.ratios)):
                run = data["runs"][i][data["ratios"].index(r)]
                ax.plot(np.power(10.0, run["x"]), run["alpha"], color=color, label=f"{r:g}")
                ax.plot(run["end"]["tau"], run["end"]["alpha"], "o", color=color, ms=5)
            ax.set_xscale("log")
            ax.set_title(rf"$n = {n:g}$, $\alpha(0) = {data['alpha0'][i]:.2g}$")
            ax.set_xlabel(r"time $\tau$")
        axes[0].set_ylabel(r"attention mass $\alpha$")
        axes[0].set_ylim(0, 1.02)
        fig.legend(*axes[0].get_legend_handles_labels(), title="$r$", loc="outside right center")
    return drawing_files(fig, "qkov-explorer")["png"], ns, p.ratios


class ExplorerDirective(SphinxDirective):
    def run(self):
        self.env.note_dependency(str(SCRIPT))  # a changed script rebuilds the page
        url = f"{citation(self.env.srcdir)['url'].rstrip('/')}/{self.env.docname}.html"
        elsewhere = addnodes.only(expr="not html")  # (the widget is HTML only)
        elsewhere += nodes.paragraph(
            "", "The online book has an interactive explorer of these dynamics, with sliders "
            "over the learning-rate ratio and the initial attention: ",
            nodes.reference("", url, refuri=url), nodes.Text("."))
        # Beside the doctrees: an image has to exist while its page is read.
        png, ns, ratios = small_multiples(data := grid())
        path = Path(self.env.doctreedir).parent / "qkov-explorer" / "small-multiples.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != png:
            path.write_bytes(png)
        elsewhere += self.parse_text_to_nodes(
            f"```{{figure}} {source_path(path, self.env.srcdir)}\n:alt: Three line plots of "
            "the attention mass alpha over time, one per number n of irrelevant tokens, one "
            "line per learning-rate ratio r.\n\nThe explorer's dynamics at a glance: the "
            f"attention mass $\\alpha$ over time at the ratios $r =$ {', '.join(f'{r:g}' for r in ratios)}"
            f" of {{qkov-fig}}`paper-fig4`, with $n =$ {', '.join(f'{n:g}' for n in ns)} irrelevant "
            f"tokens. A dot marks where each run reaches the target loss {data['target_loss']:g}: "
            "the larger $r$, the sharper the attention there.\n```")
        return [nodes.raw("", panel_html(data), format="html"), elsewhere]


def setup(app):
    app.add_directive("qkov-explorer", ExplorerDirective)
    return {"env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}
