"""The ``{qkov-explorer}`` directive: paper Fig. 4's reduced dynamics, one setting at a time.

At build time the library solves the flow (``qkov.figures.paper_fig4.trajectories``, the
figure's own call, with the defaults of its ``Parameters``) on a grid: the learning-rate
ratios r = eta_QK / eta_OV at 1, 2 and 5 per decade across the figure's ratios, and the
irrelevant tokens n at 1, 2, 5 per decade from 1 to ``n-max`` (n sets the initial attention
alpha(0) = m / (m + n)). Each run is sampled on a geometric time axis, as the figure does,
thinned to the points a plot needs (:func:`thin`) and rounded, and the grid goes into the page as inline JSON
(about 120 KB; inline, so that the book opened from disk works too). ``qkov_explorer.js``
only draws: its sliders step through the grid, so every curve on the page is one the
library computed, and the alpha marked at the target loss is the library's number, not an
interpolation between two runs.

HTML: two sliders with their values and end labels, a legend, a line of values, and four
SVG plots (mu_OV, mu_QK, loss, alpha against normalised time). LaTeX and other builders get
a paragraph naming the online page.

``_config.yml`` loads it with ``sphinx: local_extensions: {qkov_explorer: book/_ext}``. The
script is copied into ``_static/`` and added only to pages that use the directive.
"""

from __future__ import annotations

import functools
import html
import json
import math
import shutil
from pathlib import Path

import numpy as np
import yaml
from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from qkov.figures import paper_fig4
from qkov.theory.reduced import attention_mass

HERE = Path(__file__).resolve().parent
JS_FILE = "qkov_explorer.js"
MARK = "data-qkov-explorer"  # on the panel's root element; finds the pages that need the script
PLOTS = (("mu_ov", "μ_OV, OV strength"), ("mu_qk", "μ_QK, QK strength"),
         ("loss", "loss L"), ("alpha", "attention mass α"))
SAMPLES = 1000  # per run, geometric in tau from 1 to the target loss, before thinning
# Thinning: a dropped point lies within this fraction of a plot's height of the line drawn
# between the kept ones (the plots' area is 136 of 200 viewBox units high: under 0.3 units).
TOLERANCE = 2e-3

# The panel's layout: a grid of plots at least 280 px wide (the SVGs' viewBox width, so their
# 12-unit text is drawn at >= 12 px), one column on a phone.
STYLE = """
.qkov-explorer { border: 1px solid #ccc; border-radius: 4px; padding: 0.8em; margin: 1em 0; }
.qkov-explorer .qkx-controls { display: grid; gap: 0.6em 1.5em; margin-bottom: 0.6em;
  grid-template-columns: repeat(auto-fill, minmax(min(100%, 280px), 1fr)); }
.qkov-explorer label { display: block; font-weight: 600; font-size: 0.95em; }
.qkov-explorer label output { font-weight: 400; font-variant-numeric: tabular-nums; }
.qkov-explorer input[type=range] { width: 100%; min-height: 1.5em; margin: 0; }
.qkov-explorer .qkx-ends { display: flex; justify-content: space-between; font-size: 0.95em; }
.qkov-explorer .qkx-legend, .qkov-explorer .qkx-values { font-size: 0.95em; margin: 0.3em 0; }
.qkov-explorer .qkx-values { display: block; font-variant-numeric: tabular-nums; }
.qkov-explorer .qkx-plots { display: grid; gap: 0.8em;
  grid-template-columns: repeat(auto-fill, minmax(min(100%, 280px), 1fr)); }
.qkov-explorer figure.qkx-plot { margin: 0; padding: 0; min-width: 0; }
.qkov-explorer .qkx-plot svg { width: 100%; height: auto; display: block; overflow: visible; }
.qkov-explorer .qkx-legend svg { display: inline; vertical-align: middle; }
""".strip()
LEGEND = (  # the line styles of qkov_explorer.js
    '<svg width="28" height="10" aria-hidden="true"><line x1="0" y1="5" x2="28" y2="5" '
    'stroke="#1f63b4" stroke-width="2.5"/></svg> the sliders\' setting; '
    '<svg width="28" height="10" aria-hidden="true"><line x1="0" y1="5" x2="28" y2="5" '
    'stroke="#555" stroke-width="1.5" stroke-dasharray="4 3"/></svg> r = 1 at the same n; '
    '<svg width="28" height="10" aria-hidden="true"><line x1="0" y1="5" x2="28" y2="5" '
    'stroke="#1f63b4" stroke-width="1.5" stroke-opacity="0.3"/></svg> earlier settings. '
    'Dots: where each run reaches the target loss.')


def one_two_five(lo: float, hi: float) -> list[float]:
    """lo, hi and the values 1, 2, 5 times a power of ten between them."""
    values = {float(lo), float(hi)}
    for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        values.update(v for v in (float(f"{m}e{k}") for m in (1, 2, 5)) if lo <= v <= hi)
    return sorted(values)


def thin(points: np.ndarray, tolerance: float) -> np.ndarray:
    """The indices of the points to keep (first and last always; Ramer-Douglas-Peucker):
    every dropped point's coordinates lie within ``tolerance`` of the straight line between
    its kept neighbours at the same first coordinate. ``points``: (k, d), first column
    increasing, every column scaled to its plot's range."""
    keep = np.zeros(len(points), dtype=bool)
    keep[[0, -1]] = True
    spans = [(0, len(points) - 1)]
    while spans:
        i, j = spans.pop()
        if j - i < 2:
            continue
        inner = points[i + 1:j]
        t = (inner[:, 0] - points[i, 0]) / (points[j, 0] - points[i, 0])
        gap = np.abs(inner - (points[i] + t[:, None] * (points[j] - points[i]))).max(axis=1)
        k = int(np.argmax(gap))
        if gap[k] > tolerance:
            keep[i + 1 + k] = True
            spans += [(i, i + 1 + k), (i + 1 + k, j)]
    return np.flatnonzero(keep)


def _rounded(values, scale: float) -> list[float]:
    """Rounded to a thousandth of ``scale`` (a plot's range) or finer: under 0.2 units."""
    decimals = max(0, 3 - math.floor(math.log10(scale)))
    return [round(float(v), decimals) for v in values]


def loss_axis(p: paper_fig4.Parameters) -> tuple[float, float]:
    """The loss plot's range in log10: the decade below the target up to log M."""
    return math.floor(math.log10(p.target_loss)), math.log10(p.setting.initial_loss)


def run_data(trajectory, p: paper_fig4.Parameters) -> dict:
    """One run as the page draws it: log10 tau and the four quantities at the kept samples
    (the loss as log10, as plotted), and the state where the loss reaches the target."""
    tau = np.geomspace(1.0, trajectory.tau[-1], SAMPLES)
    s = trajectory.sample(tau)
    x, log_loss = np.log10(tau), np.log10(s["loss"])
    lo, hi = loss_axis(p)
    scales = {"x": x[-1], "mu_ov": s["mu_ov"].max(), "mu_qk": s["mu_qk"].max(),
              "loss": hi - lo, "alpha": 1.0}
    columns = {"x": x, "mu_ov": s["mu_ov"], "mu_qk": s["mu_qk"], "loss": log_loss - lo,
               "alpha": s["alpha"]}
    kept = thin(np.column_stack([columns[k] / scales[k] for k in scales]), TOLERANCE)
    data = {key: _rounded(columns[key][kept] + (lo if key == "loss" else 0), scales[key])
            for key in scales}
    data["end"] = {"tau": float(f"{trajectory.tau[-1]:.4g}"),
                   "alpha": float(f"{trajectory.alpha[-1]:.4g}")}
    return data


@functools.lru_cache(maxsize=4)
def grid(n_max: int) -> dict:
    """What the page ships: the setting, the sliders' values and one run per (n, r), as
    ``runs[i_n][i_r]`` (about 4 s: 9 x 13 integrations at the default ``n_max``)."""
    p = paper_fig4.Parameters()
    ratios = sorted({*one_two_five(min(p.ratios), max(p.ratios)), *p.ratios, 1.0})
    ns = sorted({*one_two_five(1, n_max), p.n})
    runs, alpha0 = [], []
    for n in ns:
        q = paper_fig4.Parameters(n=n, ratios=ratios)
        runs.append([run_data(tr, q) for tr in paper_fig4.trajectories(q)])
        alpha0.append(float(f"{float(attention_mass(0.0, q.setting)):.4g}"))
    faster = min(r for r in p.ratios if r > 1)  # the figure's first ratio with faster QK
    return {"target_loss": p.target_loss, "loss_axis": loss_axis(p),
            "ratios": ratios, "n": ns, "alpha0": alpha0,
            "start": {"r": ratios.index(faster), "reference_r": ratios.index(1.0),
                      "n": ns.index(p.n)},
            "runs": runs}


def _slider(uid: str, name: str, label: str, values: list[float], start: int) -> str:
    """A slider over the indices of ``values``, its value shown in the label, its ends under it."""
    return (f'<div><label for="{uid}-{name}">{label}: <output class="qkx-{name}-value" '
            f'for="{uid}-{name}">{values[start]:g}</output></label>'
            f'<input id="{uid}-{name}" class="qkx-{name}" type="range" min="0" '
            f'max="{len(values) - 1}" step="1" value="{start}">'
            f'<div class="qkx-ends" aria-hidden="true"><span>{values[0]:g}</span>'
            f'<span>{values[-1]:g}</span></div></div>')


def panel_html(data: dict, uid: str = "qkx") -> str:
    """The panel's HTML: the sliders (at their start, with values and ends), the legend, an
    output for the values, empty plots and the grid as JSON (``uid`` prefixes the element
    ids, so two panels on a page do not clash)."""
    start = data["start"]
    plots = "\n".join(
        f'<figure class="qkx-plot" data-plot="{key}">'
        f'<svg role="img" aria-label="{html.escape(title)} against normalised time" '
        f'viewBox="0 0 280 200"></svg></figure>'
        for key, title in PLOTS)
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    ratio = _slider(uid, "r", "Learning-rate ratio r = η<sub>QK</sub> / η<sub>OV</sub>",
                  data["ratios"], start["r"])
    tokens = _slider(uid, "n", "Irrelevant tokens n",
                   data["n"], start["n"])
    return f"""<style>{STYLE}</style>
<div class="qkov-explorer" {MARK}="">
<div class="qkx-controls">
{ratio}
{tokens}
</div>
<p class="qkx-legend">{LEGEND}</p>
<output class="qkx-values" aria-live="polite"></output>
<div class="qkx-plots">
{plots}
</div>
<script type="application/json" class="qkx-data">{payload}</script>
<noscript><p>The explorer needs JavaScript.</p></noscript>
</div>"""


def online_url(srcdir, docname: str) -> str:
    """The page ``docname`` in the online book, whose address ``CITATION.cff`` gives (``url``)."""
    path = Path(srcdir) / "CITATION.cff"
    url = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("url")
    if not isinstance(url, str) or not url.startswith("https://"):
        raise ValueError(f"{path}: expected the online book's address as url: https://..., "
                         f"got {url!r}")
    return f"{url.rstrip('/')}/{docname}.html"


class ExplorerDirective(SphinxDirective):
    """``{qkov-explorer}``; option ``n-max``: the largest n on the slider (default 10 n),
    at most 100 n (each factor of 10 adds 13 runs to the page)."""

    option_spec = {"n-max": directives.positive_int}

    def run(self):
        p = paper_fig4.Parameters()
        n_max = self.options.get("n-max", round(10 * p.n))
        if not p.n < n_max <= 100 * p.n:
            raise self.error(f"qkov-explorer: n-max must exceed paper Fig. 4's n={p.n:g} and "
                             f"be at most {100 * p.n:g}, got {n_max}")
        online = addnodes.only(expr="html")
        uid = f"qkx{self.env.new_serialno('qkov-explorer')}"
        online += nodes.raw("", panel_html(grid(n_max), uid), format="html")
        try:
            url = online_url(self.env.srcdir, self.env.docname)
        except (OSError, ValueError) as err:
            raise self.error(f"qkov-explorer: {err}") from err
        elsewhere = addnodes.only(expr="not html")
        paragraph = nodes.paragraph(
            text="The online book has an interactive explorer of these dynamics here, with "
                 "sliders over the learning-rate ratio and the initial attention: ")
        paragraph += nodes.reference("", url, refuri=url)
        paragraph += nodes.Text(".")
        elsewhere += paragraph
        return [online, elsewhere]


def _uses_explorer(doctree) -> bool:
    return any(MARK in node.astext() for node in doctree.findall(nodes.raw))


def _add_script(app, pagename, templatename, context, doctree) -> None:
    if doctree is not None and _uses_explorer(doctree):
        app.add_js_file(JS_FILE, defer="defer")


def _copy_script(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        static = Path(app.outdir) / "_static"
        static.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HERE / JS_FILE, static / JS_FILE)


def setup(app):
    app.add_directive("qkov-explorer", ExplorerDirective)
    app.connect("html-page-context", _add_script)
    app.connect("build-finished", _copy_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
