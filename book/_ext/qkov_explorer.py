"""The ``{qkov-explorer}`` directive: an interactive explorer of the paper's reduced dynamics.

HTML: a panel with two labelled sliders (the learning-rate ratio r = eta_QK / eta_OV on a
log scale; the number n of irrelevant tokens, which sets the initial attention
alpha(0) = m / (m + n), the only free part of the start, since the flow starts at mu = 0)
and four SVG plots (mu_OV, mu_QK, loss, alpha against normalised time), which
``qkov_explorer.js`` fills by integrating the ODE in the reader's browser. Other builders
(LaTeX) get a paragraph that points to the online book.

The constants (m, n, b, M, eta_OV, the target loss, the range of r) are the defaults of
paper Fig. 4's parameters (``qkov.figures.paper_fig4.Parameters``), written into the page
as data attributes: the explorer starts where the figure does, and no number is typed here.

``_config.yml`` loads it with ``sphinx: local_extensions: {qkov_explorer: book/_ext}``. The
script is copied into ``_static/`` and added only to pages that use the directive.
"""

from __future__ import annotations

import html
import shutil
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from qkov.figures.paper_fig4 import Parameters

HERE = Path(__file__).resolve().parent
JS_FILE = "qkov_explorer.js"
MARK = "data-qkov-explorer"  # on the panel's root element; finds the pages that need the script
PLOTS = (("mu_ov", "μ_OV, OV strength"), ("mu_qk", "μ_QK, QK strength"),
         ("loss", "loss L"), ("alpha", "attention mass α"))

# The panel's layout: a grid of plots at least 280 px wide (the SVGs' viewBox width, so their
# 12-unit text is drawn at >= 12 px), one column on a phone.
STYLE = """
.qkov-explorer { border: 1px solid #ccc; border-radius: 4px; padding: 0.8em; margin: 1em 0; }
.qkov-explorer .qkx-controls { display: grid; gap: 0.6em; margin-bottom: 0.6em; }
.qkov-explorer label { display: block; font-weight: 600; font-size: 0.95em; }
.qkov-explorer input[type=range] { width: 100%; min-height: 1.5em; }
.qkov-explorer output { display: block; font-size: 0.95em; font-variant-numeric: tabular-nums; }
.qkov-explorer .qkx-plots { display: grid; gap: 0.8em;
  grid-template-columns: repeat(auto-fill, minmax(min(100%, 280px), 1fr)); }
.qkov-explorer figure.qkx-plot { margin: 0; padding: 0; min-width: 0; }
.qkov-explorer svg { width: 100%; height: auto; display: block; overflow: visible; }
""".strip()


def _attrs(values: dict) -> str:
    return " ".join(f'{k}="{html.escape(str(v), quote=True)}"' for k, v in values.items())


def panel_html(p: Parameters, n_max: float, uid: str = "qkx") -> str:
    """The panel's HTML: controls with labels, an output for the values, empty plots
    (``uid`` prefixes the element ids, so two panels on a page do not clash)."""
    r_min, r_max = min(p.ratios), max(p.ratios)
    data = {MARK: "", "data-m": p.m, "data-n": p.n, "data-b": p.b, "data-big-m": p.M,
            "data-eta-ov": p.eta_ov, "data-target-loss": p.target_loss,
            "data-r-min": r_min, "data-r-max": r_max, "data-n-max": n_max}
    plots = "\n".join(
        f'<figure class="qkx-plot" data-plot="{key}">'
        f'<svg role="img" aria-label="{html.escape(title)} against normalised time" '
        f'viewBox="0 0 280 200"></svg></figure>'
        for key, title in PLOTS)
    return f"""<style>{STYLE}</style>
<div class="qkov-explorer" {_attrs(data)}>
<div class="qkx-controls">
<div><label for="{uid}-r">Learning-rate ratio r = η<sub>QK</sub> / η<sub>OV</sub> (log scale)</label>
<input id="{uid}-r" class="qkx-r" type="range" step="0.05"></div>
<div><label for="{uid}-n">Irrelevant tokens n (sets the initial attention α(0) = m / (m + n))</label>
<input id="{uid}-n" class="qkx-n" type="range" step="1" min="1"></div>
<output class="qkx-values" for="{uid}-r {uid}-n" aria-live="polite"></output>
</div>
<div class="qkx-plots">
{plots}
</div>
<noscript><p>The explorer needs JavaScript.</p></noscript>
</div>"""


class ExplorerDirective(SphinxDirective):
    """``{qkov-explorer}``; option ``n-max``: the largest n on the slider (default 10 n)."""

    option_spec = {"n-max": directives.positive_int}

    def run(self):
        p = Parameters()
        n_max = self.options.get("n-max", 10 * p.n)
        if n_max <= p.n:
            raise self.error(f"qkov-explorer: n-max must exceed paper Fig. 4's n={p.n:g}, "
                             f"got {n_max}")
        online = addnodes.only(expr="html")
        uid = f"qkx{self.env.new_serialno('qkov-explorer')}"
        online += nodes.raw("", panel_html(p, n_max, uid), format="html")
        elsewhere = addnodes.only(expr="not html")
        elsewhere += nodes.paragraph(
            text="An interactive explorer of the reduced dynamics is on this page of the "
                 "online (HTML) book.")
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
