"""model-schematic: the companion's own drawing of the model (paper Fig. 1 is a schematic
that the paper's public material does not show): one self-attention layer with its
query-key (QK) and output-value (OV) circuits, and the four parameterizations.

:class:`Parameters` are the notebook's; :func:`rows` is the table of the four classes
(from ``qkov.circuits``), which :func:`plot` draws below the layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..circuits import PARAMETERIZATIONS, circuit_kinds
from ..params import FigureParameters
from ..plotting import COLUMN_WIDTH_IN, PARAMETERIZATION_COLORS, house_style, new_figure
from ..spec import FigureSpec

SPEC = FigureSpec(
    id="model-schematic", reproduces=None, page="book/paper-fig2",
    alt="Schematic of one self-attention layer: one-hot input tokens feed the query-key "
        "circuit, which scores every token against the last one (the query) and turns the "
        "scores into attention weights, learning at rate eta_QK = r eta_OV; the "
        "attention-weighted average of the inputs feeds the output-value circuit, which maps "
        "it to logits for the next token, learning at rate eta_OV. Below, a two-by-two grid "
        "names the four parameterizations by whether each circuit is one matrix or a product "
        "of two: CACO (W_QK, W_OV), CAFO (W_QK, W_V, W_O), FACO (W_Q, W_K, W_OV) and FAFO "
        "(W_Q, W_K, W_V, W_O).")


@dataclass(frozen=True)
class Parameters(FigureParameters):
    """The notebook's parameters: a drawing has none but where it is written."""



# The matrices of each circuit, collapsed or factorized (named as in qkov.synthetic.models:
# W_QK = W_Q^T W_K, W_OV = W_O W_V), and how the drawing writes them.
MATRICES = {"QK": {"collapsed": ("W_QK",), "factorized": ("W_Q", "W_K")},
            "OV": {"collapsed": ("W_OV",), "factorized": ("W_V", "W_O")}}
PRODUCTS = {"QK": r"W_Q^\top W_K", "OV": r"W_O W_V"}
CIRCUIT_COLORS = {"QK": "#1f78b4", "OV": "#a6761d"}  # apart from PARAMETERIZATION_COLORS
COLUMNS = ("class", "QK circuit", "OV circuit", "matrices")


def rows() -> list[dict]:
    """The four classes: how each circuit is parameterized and the matrices trained."""
    table = []
    for name in PARAMETERIZATIONS:
        qk, ov = circuit_kinds(name)
        table.append({"class": name, "QK circuit": qk, "OV circuit": ov,
                      "matrices": ", ".join(MATRICES["QK"][qk] + MATRICES["OV"][ov])})
    return table


def _tex(matrix: str) -> str:
    """``W_QK`` -> ``W_{QK}`` (mathtext)."""
    return f"W_{{{matrix[2:]}}}"


# --- the figure ---------------------------------------------------------------------------

# The drawing's coordinates: a box WIDTH x HEIGHT, drawn COLUMN_WIDTH_IN inches wide.
WIDTH, HEIGHT = 7.0, 4.95


def _box(ax, x0, y0, x1, y1, color, fill=0.1):
    from matplotlib.colors import to_rgba
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, linewidth=1.6,
                                boxstyle="round,pad=0,rounding_size=0.08",
                                edgecolor=color, facecolor=to_rgba(color, fill)))


def _arrow(ax, start, end, color="#333333"):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.6, shrinkA=0, shrinkB=0,
                                mutation_scale=14))


def _lines(ax, x, top, lines, step=0.3, **kw):
    """Text lines centred at ``x`` from ``top`` down: (text, options) pairs."""
    for k, (text, style) in enumerate(lines):
        ax.text(x, top - k * step, text, ha="center", va="center", **{**kw, **style})


def plot(rows):
    """model-schematic: the layer (top) and the four parameterizations (bottom).

    ``rows``: those of :func:`rows`; each becomes a cell of the 2x2 grid, placed by its
    circuits (rows: QK collapsed, factorized; columns: OV collapsed, factorized).
    """
    qk_c, ov_c, grey = CIRCUIT_COLORS["QK"], CIRCUIT_COLORS["OV"], "#555555"
    bold = dict(fontweight="bold")
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, COLUMN_WIDTH_IN * HEIGHT / WIDTH))
        fig.set_layout_engine("none")  # one axes spanning the figure
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set(xlim=(0, WIDTH), ylim=(0.15, HEIGHT + 0.15))
        ax.axis("off")

        # The layer: input -> QK (weights a_j) -> average h -> OV (logits) -> next token.
        _box(ax, 0.02, 2.75, 1.62, 4.98, grey, fill=0.06)
        _lines(ax, 0.82, 4.68, [("input", bold), (r"one-hot tokens", {}),
                                (r"$x_1, \dots, x_{T-1}$", {}), ("query: the last", {}),
                                (r"$q = x_{T-1}$", {})], step=0.36, fontsize=10)
        _box(ax, 2.05, 3.95, 4.75, 4.98, qk_c)
        _lines(ax, 3.4, 4.74, [("QK circuit: where $q$ attends", bold | dict(color=qk_c)),
                               (r"$a_j = \mathrm{softmax}_j\,(W_{QK}[q, x_j]\,/\sqrt{d})$", {}),
                               (r"learning rate $\eta_{QK} = r\,\eta_{OV}$",
                                bold | dict(color=qk_c))], fontsize=10)
        _box(ax, 2.05, 2.75, 4.75, 3.5, grey, fill=0.06)
        _lines(ax, 3.4, 3.3, [(r"$h = a_1 x_1 + \dots + a_{T-1} x_{T-1}$", {}),
                              ("attention-weighted average", {})], fontsize=10)
        _box(ax, 5.2, 2.75, 6.98, 3.85, ov_c)
        _lines(ax, 6.09, 3.6, [("OV circuit", bold | dict(color=ov_c)),
                               (r"logits $W_{OV}\, h$", {}),
                               (r"learning rate $\eta_{OV}$", bold | dict(color=ov_c))],
               fontsize=10)
        _box(ax, 5.2, 4.3, 6.98, 4.98, grey, fill=0.06)
        _lines(ax, 6.09, 4.79, [("next token", bold), ("softmax, cross-entropy", {})],
               fontsize=10)
        _arrow(ax, (1.62, 4.45), (2.05, 4.45))  # the query and the keys
        _arrow(ax, (1.62, 3.12), (2.05, 3.12))  # the values
        _arrow(ax, (3.4, 3.95), (3.4, 3.5), qk_c)  # the weights
        ax.text(3.5, 3.72, "$a_j$", ha="left", va="center", fontsize=10, color=qk_c)
        _arrow(ax, (4.75, 3.12), (5.2, 3.12))
        _arrow(ax, (6.09, 3.85), (6.09, 4.3), ov_c)

        # The four parameterizations: rows QK collapsed, factorized; columns OV likewise.
        ax.text(0.02, 2.4, "Four parameterizations: each circuit is one matrix (collapsed) "
                "or two (factorized)", ha="left", va="center", fontsize=10, **bold)
        kinds = ("collapsed", "factorized")
        left, width, gap = 1.95, 2.45, 0.13
        top, height = 1.72, 0.7
        for j, ov in enumerate(kinds):
            formula = _tex(MATRICES["OV"][ov][0]) if ov == "collapsed" else \
                rf"W_{{OV}} = {PRODUCTS['OV']}"
            ax.text(left + j * (width + gap) + width / 2, 2.0, f"OV {ov}: ${formula}$",
                    ha="center", va="center", fontsize=10, color=ov_c, **bold)
        for i, qk in enumerate(kinds):
            y = top - i * (height + gap)
            formula = _tex(MATRICES["QK"][qk][0]) if qk == "collapsed" else \
                rf"W_{{QK}} = {PRODUCTS['QK']}"
            _lines(ax, 0.9, y - height / 2 + 0.15, [(f"QK {qk}", bold), (f"${formula}$", {})],
                   fontsize=10, color=qk_c)
        for row in rows:
            i, j = kinds.index(row["QK circuit"]), kinds.index(row["OV circuit"])
            x0, y1 = left + j * (width + gap), top - i * (height + gap)
            color = PARAMETERIZATION_COLORS[row["class"]]
            _box(ax, x0, y1 - height, x0 + width, y1, color, fill=0.12)
            matrices = ", ".join(f"${_tex(m)}$" for m in row["matrices"].split(", "))
            _lines(ax, x0 + width / 2, y1 - 0.2, [(row["class"], bold | dict(color=color)),
                                                  (matrices, {})], fontsize=10)
    return fig
