"""One house style for every figure, shared colours and helpers, and saving in every format.

Each figure draws itself in its own module (``qkov.figures.<figure_id>.plot``)."""

from __future__ import annotations

import io
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import matplotlib as mpl
import numpy as np
from matplotlib.colors import ListedColormap, to_rgb
from matplotlib.figure import Figure

from . import tables as printed_tables
from .artifacts import default_dir, output_dir
from .sets import summary_bytes, write_atomic, write_set
from .spec import DRAWING_FORMATS, FigureSpec

HOUSE_STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 200,
    "savefig.pad_inches": 0.05,
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

# Legibility in the book. Its text column shows a figure's PNG BOOK_WIDTH_PX CSS pixels wide
# (Chromium, the desktop layout), whatever the PNG's size; every text of a saved drawing must
# show there at least MIN_TEXT_PT points tall (CSS: 96 px an inch, so 9 pt is 12 px), as the
# book's 16-px body text reads. A font of f points in a PNG W pixels wide saved at D dots an
# inch shows at f * D / 72 * BOOK_WIDTH_PX / W CSS px: a figure about 7 inches wide (bbox
# tight) needs fonts of 9 points, a wider one proportionally larger fonts. save_figure
# measures every drawn text and refuses a drawing below it (check_text_size).
BOOK_WIDTH_PX = 672
MIN_TEXT_PT = 9.0
CSS_PX_PER_PT = 96 / 72
# The width figures are drawn at, with the house fonts (9 to 10 points): with the saved
# files' margin (savefig.pad_inches) at most 6.9 inches, so at the book's width their text
# shows at its size or larger. Taller, not wider, where a figure has more to show.
COLUMN_WIDTH_IN = 6.8

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


@contextmanager
def _recording_drawn_text():
    """Collect every Text drawn inside the block (visible and not empty: tick labels,
    titles, legends, annotations, colorbar labels - what the reader sees, and nothing of an
    axis turned off), each with its extent in pixels at its last draw (a tight bounding box
    draws the figure twice; the last is the saved one)."""
    from matplotlib.text import Text

    drawn, draw = {}, Text.draw

    def record(self, renderer):
        result = draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            # the text's own box (an Annotation's would include its arrow)
            drawn[id(self)] = (self, Text.get_window_extent(self, renderer))
        return result

    Text.draw = record  # for the block only: matplotlib draws in one thread
    try:
        yield drawn
    finally:
        Text.draw = draw


def png_size(png: bytes) -> tuple[int, int]:
    """The (width, height) in pixels in a PNG's header."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("png_size: not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def png_width(png: bytes) -> int:
    """The pixel width in a PNG's header."""
    return png_size(png)[0]


def shown_size_pt(fontsize: float, dpi: float, png_width_px: int) -> float:
    """The height in points (CSS: 72 pt = 96 px) at which a ``fontsize``-point text of a
    PNG ``png_width_px`` wide saved at ``dpi`` shows at the book's width."""
    return fontsize * dpi / 72 * BOOK_WIDTH_PX / png_width_px / CSS_PX_PER_PT


class Rendered(NamedTuple):
    """A figure rendered as PNG (:func:`render`)."""

    png: bytes
    sizes: list[tuple[str, float]]  # each drawn text, the points it shows at; smallest first
    overlaps: list[tuple[str, str]]  # pairs of drawn texts whose extents overlap


def render(fig, dpi: float | None = None) -> Rendered:
    """``fig`` as PNG bytes (house style, bbox tight), every drawn text with the size in
    points it shows at the book's width, and the pairs of texts that overlap by more than
    OVERLAP_PT in both directions."""
    buffer = io.BytesIO()
    with house_style(), _recording_drawn_text() as drawn:
        dpi = dpi or mpl.rcParams["savefig.dpi"]
        fig.savefig(buffer, format="png", bbox_inches="tight", dpi=dpi,
                    metadata=_METADATA["png"])
    png = buffer.getvalue()
    width = png_width(png)
    texts = list(drawn.values())
    sizes = {(t.get_text(), shown_size_pt(t.get_fontsize(), dpi, width)) for t, _ in texts}
    return Rendered(png, sorted(sizes, key=lambda item: (item[1], item[0])),
                    _overlaps(texts, OVERLAP_PT * dpi / 72))


def render_png(fig, dpi: float | None = None) -> tuple[bytes, list[tuple[str, float]]]:
    """:func:`render` without the overlaps: the PNG bytes and the texts' shown sizes."""
    return render(fig, dpi)[:2]


# Two texts overlap when their extents share more than this in both directions: glyph boxes
# include some blank space, and neighbouring tick labels may touch.
OVERLAP_PT = 1.0


def _overlaps(texts, tolerance_px: float) -> list[tuple[str, str]]:
    if len(texts) < 2:
        return []
    box = np.array([extent.extents for _, extent in texts])  # x0, y0, x1, y1
    wide = np.minimum(box[:, None, 2], box[None, :, 2]) - np.maximum(box[:, None, 0],
                                                                      box[None, :, 0])
    tall = np.minimum(box[:, None, 3], box[None, :, 3]) - np.maximum(box[:, None, 1],
                                                                      box[None, :, 1])
    i, j = np.nonzero(np.triu((wide > tolerance_px) & (tall > tolerance_px), 1))
    return [(texts[a][0].get_text(), texts[b][0].get_text()) for a, b in zip(i, j)]


def check_overlaps(name: str, overlaps: Sequence[tuple[str, str]]) -> None:
    """A ValueError naming ``name`` and the texts when any two drawn texts overlap."""
    if overlaps:
        pairs = "; ".join(f"{a!r} and {b!r}" for a, b in overlaps[:5])
        raise ValueError(f"{name}: {len(overlaps)} pairs of texts overlap: {pairs}"
                         f"{'; ...' if len(overlaps) > 5 else ''}; give them room (constrained "
                         f"layout, shorter titles, legends outside the data)")


def check_text_size(name: str, sizes: Sequence[tuple[str, float]]) -> float:
    """The smallest shown size of ``sizes`` (from :func:`render`); a ValueError naming
    ``name`` and the text when it is below MIN_TEXT_PT."""
    if not sizes:
        return float("inf")
    text, size = sizes[0]
    if size < MIN_TEXT_PT - 1e-9:
        small = [t for t, s in sizes if s < MIN_TEXT_PT - 1e-9]
        raise ValueError(
            f"{name}: the text {text!r} shows at {size:.1f} pt ({size * CSS_PX_PER_PT:.1f} px) "
            f"at the book's width of {BOOK_WIDTH_PX} px, below the minimum of {MIN_TEXT_PT:g} "
            f"pt ({len(small)} texts are: {', '.join(map(repr, small[:5]))}"
            f"{', ...' if len(small) > 5 else ''}); draw the figure narrower (about 7 inches "
            f"for 9-point fonts) or its text larger")
    return size


def drawing_files(fig, name: str) -> dict[str, bytes]:
    """``fig`` in every format of DRAWING_FORMATS (house style, bbox tight, no dates), once
    its text is checked legible at the book's width (:func:`check_text_size`) and free of
    overlapping texts (:func:`check_overlaps`), naming it ``name``."""
    png, sizes, overlaps = render(fig)
    check_text_size(name, sizes)
    check_overlaps(name, overlaps)
    files = {"png": png}
    with house_style():
        for fmt in DRAWING_FORMATS:
            if fmt not in files:
                buffer = io.BytesIO()
                fig.savefig(buffer, format=fmt, bbox_inches="tight", metadata=_METADATA[fmt])
                files[fmt] = buffer.getvalue()
    return files


def _write_drawing(files: Mapping[str, bytes], folder: Path, stem: str) -> list[Path]:
    paths = []
    for fmt in DRAWING_FORMATS:
        path = Path(folder) / f"{stem}.{fmt}"
        write_atomic(path, files[fmt])
        paths.append(path)
    return paths


def save_figure(fig, folder: Path, stem: str = "figure") -> list[Path]:
    """Save ``fig`` as ``stem.png``, ``.pdf`` and ``.svg`` in ``folder``, each atomically;
    nothing when its text is too small for the book (:func:`drawing_files`)."""
    return _write_drawing(drawing_files(fig, f"{Path(folder).name}/{stem}"), folder, stem)


def publish(spec: FigureSpec, parameters: Any, rows: Sequence[Mapping[str, Any]],
            started: float, drawings: Mapping[str, Figure],
            tables: Mapping[str, Any] | None = None) -> None:
    """The save cell of every figure notebook: the figure's set of files, written as a whole
    into its folder (:func:`qkov.artifacts.output_dir`: the run's ``artifacts_dir``, the
    canonical ``artifacts/<id>/`` in the pipeline, else a run folder of its own): each drawing
    as ``<stem>.png``, ``.pdf`` and ``.svg``, each table as CSV (``tables[name]`` its rows,
    or (rows, columns) where it may have none), then the rows as ``data.csv`` and
    ``summary.json`` with the parameters (the figure's ``Parameters``: the summary notes
    which differ from the defaults), the provenance (the wall time counted from ``started``,
    a ``time.perf_counter()``; the floating-point type, from the spec) and every other file's
    digest, and the tables the notebook showed (:func:`qkov.tables.show`). The drawings and
    tables must be those the figure's ``spec`` declares (the pipeline expects exactly those
    files), each with alt text in the spec and text legible at
    the book's width (:func:`check_text_size`); anything else fails before a file is written.
    Prints what it wrote (and where, unless into the canonical folder: the notebooks store
    that line, so it names no machine's path)."""
    expected = {"drawings": sorted(d.stem for d in spec.drawings), "tables": sorted(spec.tables)}
    given = {"drawings": sorted(drawings), "tables": sorted(tables or {})}
    for kind in expected:
        if given[kind] != expected[kind]:
            raise ValueError(f"publish({spec.id!r}): {kind}: its SPEC declares "
                             f"{expected[kind]}, the notebook gave {given[kind]}")
    for drawing in spec.drawings:
        if not isinstance(drawing.alt, str) or not drawing.alt.strip():
            raise ValueError(f"publish({spec.id!r}): drawing {drawing.stem!r}: its SPEC gives "
                             "no alt text (a sentence saying what the figure shows)")
    folder = output_dir(spec.id, parameters)
    # Every drawing is rendered and checked before anything is written.
    files = {f"{stem}.{fmt}": data for stem, fig in drawings.items()
             for fmt, data in drawing_files(fig, f"{spec.id}/{stem}").items()}
    for name, table in (tables or {}).items():
        table_rows, columns = table if isinstance(table, tuple) else (table, None)
        files[name] = printed_tables.csv_bytes(table_rows, columns, f"{spec.id}/{name}")
    files["data.csv"] = printed_tables.csv_bytes(rows, None, f"{spec.id}/data.csv")
    files["summary.json"] = summary_bytes(spec.id, parameters, rows,
                                          time.perf_counter() - started, dict(files),
                                          dtype=spec.dtype or parameters.dtype,
                                          tables=printed_tables.taken())
    files = {name: files[name] for name in spec.files}  # the spec's order
    write_set(folder, files)
    where = "" if folder == default_dir(spec.id) else f" into {folder}"
    print("wrote", ", ".join(files) + where)


# One colour map for every heatmap: white at zero, so that empty cells recede (paper Fig. 2's).
HEATMAP_CMAP = "Blues"


def heatmap_text_color(value: float, vmax: float) -> str:
    """The colour of a number written in a HEATMAP_CMAP cell: white where the cell is dark."""
    return "white" if value > 0.6 * vmax else "black"


# One palette for ordered lines (ratios, lengths): plasma from its dark end to where it still
# has 3:1 contrast against white (WCAG's minimum for graphics); viridis' yellow end has 1.3:1.
SEQUENTIAL_CMAP = ListedColormap(mpl.colormaps["plasma"](np.linspace(0, 0.6, 256)),
                                name="qkov-sequential")


def sequential_colors(values: Sequence[float]) -> list:
    """One colour per value, from dark (the smallest: slow QK for ratios) to light (the
    largest)."""
    order = np.argsort(np.argsort(values))
    span = max(len(values) - 1, 1)
    return [SEQUENTIAL_CMAP(k / span) for k in order]


def contrast_with_white(color) -> float:
    """WCAG's contrast ratio of ``color`` against white (1 to 21)."""
    rgb = np.array(to_rgb(color))
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return 1.05 / (float(linear @ [0.2126, 0.7152, 0.0722]) + 0.05)


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
