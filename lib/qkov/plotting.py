"""One house style for every figure, shared colours and helpers, and saving in every format.

Each figure draws itself in its own module (``qkov.figures.<figure_id>.plot``)."""

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
from .spec import DRAWING_FORMATS, FigureSpec

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

# The book shows a figure about 768 px wide whatever its size in inches: a wider figure's
# text is scaled up so that it reads at that width as the house sizes read on a figure
# DISPLAY_WIDTH_IN wide (9-point tick labels then show at about 10 px, not 5).
DISPLAY_WIDTH_IN = 8.5

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
        fit_text_to_page(self)
        buffer = io.BytesIO()
        with house_style():
            self.savefig(buffer, format="png", bbox_inches="tight", dpi=HOUSE_STYLE["figure.dpi"],
                         metadata=_METADATA["png"])
        return buffer.getvalue()


def fit_text_to_page(fig) -> None:
    """Scale every text of ``fig`` (titles, labels, tick labels, legends, annotations) by
    width / DISPLAY_WIDTH_IN when the figure is wider, once (the display and the saved files
    share it)."""
    factor = fig.get_figwidth() / DISPLAY_WIDTH_IN
    if getattr(fig, "_qkov_text_fitted", False) or factor <= 1:
        return
    fig._qkov_text_fitted = True
    from matplotlib.text import Text

    ticks = [(ax, axis, labels[0].get_fontsize()) for ax in fig.axes
             for axis, labels in (("x", ax.get_xticklabels()), ("y", ax.get_yticklabels()))
             if labels]
    for text in fig.findobj(Text):
        text.set_fontsize(text.get_fontsize() * factor)
    for ax, axis, size in ticks:  # tick labels are re-made at draw time from these
        ax.tick_params(axis=axis, labelsize=size * factor)


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
    fit_text_to_page(fig)
    with house_style():
        for fmt in DRAWING_FORMATS:
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, bbox_inches="tight", metadata=_METADATA[fmt])
            path = Path(folder) / f"{stem}.{fmt}"
            write_atomic(path, buffer.getvalue())
            paths.append(path)
    return paths


def publish(spec: FigureSpec, parameters: Any, rows: Sequence[Mapping[str, Any]],
            started: float, drawings: Mapping[str, Figure],
            tables: Mapping[str, Any] | None = None) -> None:
    """The save cell of every figure notebook, into ``artifacts/<id>/`` (or the run's
    ``artifacts_dir`` parameter): each drawing as ``<stem>.png``, ``.pdf`` and ``.svg``, each
    table as CSV (``tables[name]`` its rows, or (rows, columns) where it may have none), then
    the rows as ``data.csv`` and ``summary.json`` with the parameters (the figure's
    ``Parameters``: the summary notes which differ from the defaults) and the provenance
    (the wall time counted from ``started``, a ``time.perf_counter()``; the floating-point
    type, from the spec). The drawings and tables must be those the figure's ``spec``
    declares (the pipeline expects exactly those files); anything else fails before a file
    is written. Prints what it wrote."""
    expected = {"drawings": sorted(d.stem for d in spec.drawings), "tables": sorted(spec.tables)}
    given = {"drawings": sorted(drawings), "tables": sorted(tables or {})}
    for kind in expected:
        if given[kind] != expected[kind]:
            raise ValueError(f"publish({spec.id!r}): {kind}: its SPEC declares "
                             f"{expected[kind]}, the notebook gave {given[kind]}")
    dtype = spec.dtype_of(parameters)
    folder = figure_dir(spec.id, parameters.artifacts_dir)
    written = [path for stem, fig in drawings.items() for path in save_figure(fig, folder, stem)]
    for name, table in (tables or {}).items():
        table_rows, columns = table if isinstance(table, tuple) else (table, None)
        write_table(folder / name, table_rows, columns)
        written.append(folder / name)
    summary = write_summary(folder, spec.id, parameters, rows,
                            wall_time_s=time.perf_counter() - started, dtype=dtype)
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


# --- shared by the theory chapter's figures ------------------------------------------------

PARAMETERIZATION_COLORS = {"FAFO": "#d95f02", "FACO": "#1b9e77", "CAFO": "#7570b3",
                           "CACO": "#444444"}
QUANTITIES = (("mu_ov", r"$\mu_{OV}$"), ("mu_qk", r"$\mu_{QK}$"), ("loss", "loss $L$"),
               ("alpha", r"attention mass $\alpha$"))


def curve_points(rows, key, **match):
    """(tau, key) of the stored curve rows that match, for plotting."""
    picked = [row for row in rows if all(row[k] == v for k, v in match.items())]
    return np.array([row["tau"] for row in picked]), np.array([row[key] for row in picked])
